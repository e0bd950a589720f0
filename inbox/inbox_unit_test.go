package inbox

import (
	"fmt"
	"testing"
	"time"
)

// The hand-overs of a notification wait SettleBound, then twice as long each time, up to
// maxDispatchBackoff, with no jitter: an unsettled notification is handed over about
// unsettledAnomalyAt times in its first hour.
func TestInboxBackoffDoublesUpToItsCap(t *testing.T) {
	ib := &Inbox{cfg: Config{SettleBound: 30 * time.Second}.withDefaults()}
	for attempt, want := range map[int]time.Duration{
		1: 30 * time.Second, 2: time.Minute, 3: 2 * time.Minute, 5: 8 * time.Minute, 6: maxDispatchBackoff, 50: maxDispatchBackoff,
	} {
		if got := ib.backoff(attempt); got != want {
			t.Errorf("backoff(%d) = %s, want %s", attempt, got, want)
		}
	}
	big := &Inbox{cfg: Config{SettleBound: time.Hour}.withDefaults()}
	if got := big.backoff(1); got != maxDispatchBackoff {
		t.Errorf("a bound above the cap: backoff(1) = %s, want %s", got, maxDispatchBackoff)
	}
}

// The sample of unverified callbacks keeps 20 a minute per claimed app_id and 100 a
// minute in all, says once when it starts dropping, and fills again at that rate.
func TestInboxUnverifiedSampleKeepsItsRate(t *testing.T) {
	u := newUnverifiedSampler()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	kept := map[string]int{}
	firsts := 0
	for i := range 1000 {
		app := fmt.Sprintf("app%d", i%10)
		keep, first := u.take(app, now)
		if keep {
			kept[app]++
		}
		if first {
			firsts++
		}
	}
	total := 0
	for app, n := range kept {
		if n > unverifiedPerAppPerMinute {
			t.Errorf("%s: %d kept, want at most %d", app, n, unverifiedPerAppPerMinute)
		}
		total += n
	}
	if total != unverifiedPerMinute || firsts != 1 {
		t.Errorf("%d kept and %d first drops at once, want %d and 1", total, firsts, unverifiedPerMinute)
	}
	if keep, _ := u.take("other", now); keep {
		t.Error("kept one past the total")
	}
	if keep, _ := u.take("other", now.Add(time.Minute/unverifiedPerMinute)); !keep {
		t.Error("nothing kept once the total refilled by one")
	}
	later := now.Add(time.Minute)
	n := 0
	for range 200 {
		if keep, _ := u.take("app0", later); keep {
			n++
		}
	}
	if n != unverifiedPerAppPerMinute {
		t.Errorf("a minute later %d kept for one app, want %d", n, unverifiedPerAppPerMinute)
	}
}
