package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/paykit/paykit/api"
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
			st.mu.Lock()
			rec := st.idem[idemKey]
			rec.ExpiresAt = time.Now().Add(tc.left)
			st.idem[idemKey] = rec
			st.mu.Unlock()
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
