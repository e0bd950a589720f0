package workflows

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/paykit/paykit/payment"
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

// schedule is the backoff queries an unpaid payment with the given TTL makes before the
// close path's query at expiry.
func schedule(no string, ttl time.Duration, nearExpiry bool) []time.Duration {
	start := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	r := &paymentRun{timing: Timing{ReconcileInterval: time.Minute}, v2: nearExpiry,
		st: PaymentState{PaymentNo: no, ExpireAt: start.Add(ttl)}}
	var at []time.Duration
	r.scheduleReconcile(start, 0)
	for !r.st.NextReconcileAt.IsZero() && len(at) < 20 {
		at = append(at, r.st.NextReconcileAt.Sub(start))
		r.st.Queries++
		r.scheduleReconcile(r.st.NextReconcileAt, r.st.Queries)
	}
	return at
}

// An abandoned 15-minute checkout is queried three times on the backoff, whatever its
// jitter, and the close path asks once more at expiry: never a fourth backoff query
// seconds before the close path's. A longer TTL keeps querying on the capped backoff.
func TestAnAbandonedCheckoutIsQueriedThreeTimesBeforeItsExpiryWhateverItsJitter(t *testing.T) {
	for i := range 2000 {
		no := fmt.Sprintf("P20261204%024d", i)
		if at := schedule(no, 15*time.Minute, true); len(at) != 3 {
			t.Fatalf("%s: backoff queries at %v, want 3 before the close path's at 15m", no, at)
		}
		at := schedule(no, 2*time.Hour, true)
		if len(at) < 6 || at[len(at)-1] > 2*time.Hour-time.Minute {
			t.Fatalf("%s: backoff queries at %v for a 2 h TTL, want the capped backoff up to expiry", no, at)
		}
	}
	// Runs recorded on version 1 of PaymentChangesID keep their schedule, fourth query and all.
	fourth := 0
	for i := range 2000 {
		if len(schedule(fmt.Sprintf("P20261204%024d", i), 15*time.Minute, false)) == 4 {
			fourth++
		}
	}
	if fourth == 0 {
		t.Fatal("no payment's version-1 schedule has a fourth query: the test no longer sees the case it guards")
	}
}

// The scheduled reconciler follows the same schedule as a run's own backoff timer
// (payment.NextQueryAt against scheduleReconcile on version 2): an abandoned payment is
// queried at the same moments, three times in 15 minutes, whichever does it.
func TestScheduledReconcilerKeepsTheRunsSchedule(t *testing.T) {
	start := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	for i := range 500 {
		no := fmt.Sprintf("P20261204%024d", i)
		for _, ttl := range []time.Duration{90 * time.Second, 5 * time.Minute, 15 * time.Minute, 2 * time.Hour} {
			want := schedule(no, ttl, true)
			var got []time.Duration
			at := start
			for n := 0; n < 20; n++ {
				next := payment.NextQueryAt(at, start.Add(ttl), time.Minute, no, n)
				if next.IsZero() {
					break
				}
				got = append(got, next.Sub(start))
				at = next
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s, TTL %v: reconciler at %v, run's timer at %v", no, ttl, got, want)
			}
			if ttl == 15*time.Minute && len(got) > 3 {
				t.Fatalf("%s: %d queries in 15 minutes", no, len(got))
			}
		}
	}
}
