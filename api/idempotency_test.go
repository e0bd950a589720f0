package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/payment"
)

// TestReplayCachesForTheRecordsRemainingLifetime: a replay from MySQL puts the response
// back in Redis for what is left of the record's life, never for a fresh full TTL, so the
// cache never answers for a key that MySQL has already forgotten.
func TestReplayCachesForTheRecordsRemainingLifetime(t *testing.T) {
	tests := []struct {
		name    string
		left    time.Duration // of the MySQL record when the replay comes
		wantTTL time.Duration // 0: not cached
	}{
		{"a minute left", time.Minute, time.Minute},
		{"an hour left", time.Hour, time.Hour},
		{"expired", -time.Second, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cache := newFakeCache()
			srv, st, _ := newServerWith(t, serverOptions{cfg: api.Config{IdempotencyTTL: 24 * time.Hour}, cache: cache})
			const idemKey = "unit-replay-key-1"
			h := map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json", "Idempotency-Key": idemKey}
			body := `{"order_id":"o1","amount_fen":990,"subject":"s"}`
			if resp, b := post(t, srv.URL+"/v1/payments", body, h); resp.StatusCode != http.StatusCreated {
				t.Fatalf("first: HTTP %d %s", resp.StatusCode, b)
			}
			// Time passes: Redis has dropped the entry, MySQL's record has tc.left to live.
			st.Mu.Lock()
			rec := st.idem[idemKey]
			rec.ExpiresAt = time.Now().Add(tc.left)
			st.idem[idemKey] = rec
			st.Mu.Unlock()
			cache.mu.Lock()
			clear(cache.resp)
			clear(cache.ttls)
			cache.mu.Unlock()

			resp, b := post(t, srv.URL+"/v1/payments", body, h)
			if resp.StatusCode != http.StatusCreated || resp.Header.Get(api.ReplayedHeader) != "true" {
				t.Fatalf("replay: HTTP %d %s", resp.StatusCode, b)
			}
			cache.mu.Lock()
			ttl, cached := cache.ttls["t1:"+idemKey]
			cache.mu.Unlock()
			t.Logf("record with %v left: cached=%v for %v", tc.left, cached, ttl)
			switch {
			case tc.wantTTL == 0 && cached:
				t.Fatalf("an expired record was cached for %v", ttl)
			case tc.wantTTL > 0 && (!cached || ttl > tc.wantTTL || ttl < tc.wantTTL-5*time.Second):
				t.Fatalf("cached=%v for %v, want about %v", cached, ttl, tc.wantTTL)
			}
		})
	}
}

// TestIdempotencyKeyLockIsRenewedWhileTheRequestRuns: the in-flight lock is short, so
// that a crashed holder frees its key within seconds, and renewed while its request
// runs, so that a slow request keeps it: a retry meanwhile gets 409, not a takeover.
func TestIdempotencyKeyLockIsRenewedWhileTheRequestRuns(t *testing.T) {
	const lock = 600 * time.Millisecond
	srv, st, orch := newServerWith(t, serverOptions{cfg: api.Config{IdempotencyLock: lock}})
	orch.delay = 4 * lock
	h := map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json", "Idempotency-Key": "unit-renew-key-1"}
	body := `{"order_id":"o1","amount_fen":990,"subject":"s"}`
	done := make(chan int, 1)
	go func() {
		resp, _ := post(t, srv.URL+"/v1/payments", body, h)
		done <- resp.StatusCode
	}()
	time.Sleep(5 * lock / 2) // the first request is still running, well past its first lock
	resp, b := post(t, srv.URL+"/v1/payments", body, h)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(b, `"code":"in_flight"`) {
		t.Fatalf("retry while the first runs: HTTP %d %s, want 409 in_flight", resp.StatusCode, b)
	}
	if code := <-done; code != http.StatusCreated {
		t.Fatalf("first: HTTP %d", code)
	}
	st.Mu.Lock()
	takeovers, renewals := st.takeovers, st.renewals
	st.Mu.Unlock()
	if takeovers != 0 || renewals == 0 {
		t.Fatalf("takeovers=%d renewals=%d, want the lock renewed and never taken over", takeovers, renewals)
	}
	// The renewer stops with the request.
	time.Sleep(lock)
	st.Mu.Lock()
	after := st.renewals
	st.Mu.Unlock()
	t.Logf("a %v request with a %v lock: %d renewals, %d after it ended", orch.delay, lock, renewals, after-renewals)
	if after != renewals {
		t.Fatalf("%d renewals after the request ended", after-renewals)
	}
}

// TestIdempotencyKeyTakeoverIsLogged: a renewal that finds the key taken over is logged,
// and the renewer gives up.
func TestIdempotencyKeyTakeoverIsLogged(t *testing.T) {
	var logs logBuffer
	const lock = 150 * time.Millisecond
	srv, st, orch := newServerWith(t, serverOptions{cfg: api.Config{IdempotencyLock: lock}, logger: logs.logger()})
	st.renewErr = payment.Errorf(payment.ECONFLICT, "idempotency key was taken over by another request")
	orch.delay = 3 * lock
	h := map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json", "Idempotency-Key": "unit-renew-key-2"}
	if resp, b := post(t, srv.URL+"/v1/payments", `{"order_id":"o1","amount_fen":990,"subject":"s"}`, h); resp.StatusCode != http.StatusCreated {
		t.Fatalf("HTTP %d %s", resp.StatusCode, b)
	}
	if n := strings.Count(logs.String(), "idempotency key taken over while its request ran"); n != 1 {
		t.Fatalf("logged the takeover %d times, want once:\n%s", n, logs.String())
	}
}
