package workflows

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestSweepInputJSONIsReadableAndAcceptsOldSchedules(t *testing.T) {
	tests := []struct {
		name string
		json string
		want SweepInput
	}{
		{"scheduled before grant repair", `{"stale_after":1020000000000,"limit":500}`,
			SweepInput{StaleAfter: 17 * time.Minute, Limit: 500}},
		{"readable", `{"stale_after":"17m0s","limit":500,"grant_grace":"2m0s","grant_lookback":"168h0m0s"}`,
			SweepInput{StaleAfter: 17 * time.Minute, Limit: 500, GrantGrace: 2 * time.Minute, GrantLookback: 168 * time.Hour}},
		{"nanoseconds everywhere", `{"stale_after":60000000000,"limit":1,"grant_grace":30000000000}`,
			SweepInput{StaleAfter: time.Minute, Limit: 1, GrantGrace: 30 * time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got SweepInput
			if err := json.Unmarshal([]byte(tc.json), &got); err != nil || got != tc.want {
				t.Fatalf("decode %s: %+v %v, want %+v", tc.json, got, err, tc.want)
			}
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var back SweepInput
			if err := json.Unmarshal(b, &back); err != nil || back != got {
				t.Fatalf("round trip %s: %+v %v", b, back, err)
			}
		})
	}
	b, _ := json.Marshal(SweepInput{StaleAfter: 17 * time.Minute, GrantGrace: 2 * time.Minute})
	if !strings.Contains(string(b), `"stale_after":"17m0s"`) || !strings.Contains(string(b), `"grant_grace":"2m0s"`) {
		t.Fatalf("not readable: %s", b)
	}
	if err := json.Unmarshal([]byte(`{"grant_grace":"soon"}`), new(SweepInput)); err == nil {
		t.Fatal("bad duration accepted")
	}
}
