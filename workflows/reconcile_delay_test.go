package workflows

import (
	"fmt"
	"testing"
	"time"
)

// Each delay doubles up to eight intervals and stays within ±20% of it; the same payment
// always gets the same delay (replays agree), and payments created together spread out.
func TestReconcileDelayBacksOffWithJitter(t *testing.T) {
	for n, base := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 8 * time.Minute, 8 * time.Minute} {
		for i := range 200 {
			no := fmt.Sprintf("P20261201%024d", i)
			d := reconcileDelay(time.Minute, no, n)
			if d < base*8/10 || d >= base*12/10 {
				t.Fatalf("delay %d of %s = %v, want within ±20%% of %v", n, no, d, base)
			}
			if again := reconcileDelay(time.Minute, no, n); again != d {
				t.Fatalf("delay %d of %s is %v, then %v", n, no, d, again)
			}
		}
	}
	// 1,000 payments created in the same second: their first queries spread over most of
	// the ±12 s window, never more than 100 in any one second.
	perSecond := map[int64]int{}
	lo, hi := time.Hour, time.Duration(0)
	for i := range 1000 {
		d := reconcileDelay(time.Minute, fmt.Sprintf("P20261201%024d", i), 0)
		perSecond[int64(d/time.Second)]++
		lo, hi = min(lo, d), max(hi, d)
	}
	if hi-lo < 20*time.Second {
		t.Fatalf("first queries spread over %v, want most of 24 s", hi-lo)
	}
	for s, c := range perSecond {
		if c > 100 {
			t.Fatalf("%d first queries in second %d", c, s)
		}
	}
}
