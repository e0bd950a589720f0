package worker

import (
	"testing"
	"time"
)

// TestStatementCalendar: a China time of day is the same instant in UTC, eight hours
// earlier, wrapping around midnight.
func TestStatementCalendar(t *testing.T) {
	for _, tc := range []struct {
		at                 time.Duration
		hour, minute, secs int
	}{
		{9*time.Hour + 30*time.Minute, 1, 30, 0},
		{7 * time.Hour, 23, 0, 0},
		{8 * time.Hour, 0, 0, 0},
		{23*time.Hour + 59*time.Minute + 30*time.Second, 15, 59, 30},
	} {
		c := statementCalendar(tc.at)
		if c.Hour[0].Start != tc.hour || c.Minute[0].Start != tc.minute || c.Second[0].Start != tc.secs {
			t.Errorf("%s China: %d:%d:%d UTC, want %d:%d:%d", tc.at, c.Hour[0].Start, c.Minute[0].Start, c.Second[0].Start, tc.hour, tc.minute, tc.secs)
		}
	}
}
