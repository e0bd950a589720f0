package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/redis"
)

// countingKeys counts the key lookups of the store it wraps.
type countingKeys struct {
	payment.APIKeys
	lookups atomic.Int64
}

func (c *countingKeys) TenantAPIKey(ctx context.Context, hash string) (payment.APIKey, payment.Tenant, error) {
	c.lookups.Add(1)
	return c.APIKeys.TenantAPIKey(ctx, hash)
}

// sharedStack is MariaDB and Redis of one test, for API processes that share them.
type sharedStack struct {
	store *mysql.Store
	cache redis.APICache
}

func newSharedStack(tb testing.TB) sharedStack {
	tb.Helper()
	db, _ := testenv.MySQL(tb)
	rdb, prefix := testenv.Redis(tb)
	st := mysql.NewStore(db)
	tb.Cleanup(func() { _ = st.Close() })
	return sharedStack{store: st, cache: redis.APICache{Client: redis.New(rdb, prefix)}}
}

// server is one API process on the stack: its own store handle and its own caches.
func (s sharedStack) server(tb testing.TB, cfg api.Config, keys payment.APIKeys) *httptest.Server {
	tb.Helper()
	public, _ := s.servers(tb, cfg, keys)
	return public
}

// servers is server with its admin listener too.
func (s sharedStack) servers(tb testing.TB, cfg api.Config, keys payment.APIKeys) (public, admin *httptest.Server) {
	tb.Helper()
	st := mysql.NewStore(s.store.DB())
	tb.Cleanup(func() { _ = st.Close() })
	if keys == nil {
		keys = st
	}
	stores := mysqlStores(st)
	stores.APIKeys = keys
	a := api.New(cfg, stores, payment.SingleGateway{Gateway: fakeGateway{}}, &fakeOrch{}, s.cache, nil, nil)
	public = httptest.NewServer(checked(tb, a))
	tb.Cleanup(public.Close)
	admin = httptest.NewServer(a.AdminHandler())
	tb.Cleanup(admin.Close)
	return public, admin
}

func (s sharedStack) tenant(tb testing.TB, id, key string) {
	tb.Helper()
	if err := s.store.UpsertTenant(context.Background(), payment.Tenant{ID: id, APIKeyHash: api.HashAPIKey(key), AlipayAppID: "app"}); err != nil {
		tb.Fatal(err)
	}
}

// status is the status of GET /v1/events with key, from the source address ip if given.
func status(tb testing.TB, srv *httptest.Server, key, ip string) int {
	tb.Helper()
	resp := get(tb, srv, "/v1/events", key, ip)
	return resp.StatusCode
}

func get(tb testing.TB, srv *httptest.Server, path, key, ip string) *http.Response {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	if ip != "" {
		req.Header.Set("X-Forwarded-For", ip)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// TestAPIKeyRotationOverlap: after a rotation both keys work, on a process that had the
// old one cached too, and the old one stops at its expiry while the new one goes on.
func TestAPIKeyRotationOverlap(t *testing.T) {
	s := newSharedStack(t)
	const oldKey, newKey = "sk_old_0123456789abcdef", "sk_new_0123456789abcdef"
	s.tenant(t, "t1", oldKey)
	srv := s.server(t, api.Config{}, nil)
	if got := status(t, srv, oldKey, ""); got != http.StatusOK {
		t.Fatalf("old key before the rotation: HTTP %d", got)
	}
	expires := time.Now().Add(1500 * time.Millisecond)
	if err := s.store.AddAPIKey(context.Background(), "t1", api.HashAPIKey(newKey), expires); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{oldKey, newKey} {
		if got := status(t, srv, k, ""); got != http.StatusOK {
			t.Fatalf("%s during the overlap: HTTP %d", k, got)
		}
	}
	time.Sleep(time.Until(expires) + 50*time.Millisecond)
	if got := status(t, srv, oldKey, ""); got != http.StatusUnauthorized {
		t.Fatalf("old key after its expiry: HTTP %d, want 401", got)
	}
	if got := status(t, srv, newKey, ""); got != http.StatusOK {
		t.Fatalf("new key after the overlap: HTTP %d", got)
	}
}

// TestRevocationReachesEveryProcess: two API processes on one MariaDB and Redis both
// have a key cached; revoked through a third handle, it stops working on both within a
// second.
func TestRevocationReachesEveryProcess(t *testing.T) {
	s := newSharedStack(t)
	const k = "sk_revoke_0123456789abcdef"
	s.tenant(t, "t1", k)
	a, b := s.server(t, api.Config{}, nil), s.server(t, api.Config{}, nil)
	for _, srv := range []*httptest.Server{a, b} {
		if got := status(t, srv, k, ""); got != http.StatusOK {
			t.Fatalf("before the revocation: HTTP %d", got)
		}
	}
	if n, err := s.store.RevokeAPIKeys(context.Background(), "t1", []string{api.HashAPIKey(k)}); err != nil || n != 1 {
		t.Fatalf("revoke: %d, %v", n, err)
	}
	revoked := time.Now()
	for name, srv := range map[string]*httptest.Server{"a": a, "b": b} {
		for status(t, srv, k, "") != http.StatusUnauthorized {
			if time.Since(revoked) > time.Second {
				t.Fatalf("process %s still accepts the key %v after its revocation", name, time.Since(revoked))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestUnknownKeysAreCachedNegatively: an unknown key presented again is refused without
// asking the store, while a known one is still looked up once.
func TestUnknownKeysAreCachedNegatively(t *testing.T) {
	s := newSharedStack(t)
	const k = "sk_known_0123456789abcdef"
	s.tenant(t, "t1", k)
	keys := &countingKeys{APIKeys: s.store}
	srv := s.server(t, api.Config{}, keys)
	for i := range 5 {
		if got := status(t, srv, "sk_unknown_0123456789abcdef", ""); got != http.StatusUnauthorized {
			t.Fatalf("unknown key, request %d: HTTP %d", i+1, got)
		}
	}
	if n := keys.lookups.Load(); n != 1 {
		t.Fatalf("the store was asked %d times for one unknown key, want once", n)
	}
	for range 3 {
		if got := status(t, srv, k, ""); got != http.StatusOK {
			t.Fatalf("known key: HTTP %d", got)
		}
	}
	if n := keys.lookups.Load(); n != 2 {
		t.Fatalf("%d lookups after a known key three times, want 2", n)
	}
}

// TestAuthFailuresAreLimitedPerSource: a source address presenting unknown keys is
// answered 429 with Retry-After once over its budget, without the store being asked;
// another address is not, and a key already cached still passes from the first.
func TestAuthFailuresAreLimitedPerSource(t *testing.T) {
	s := newSharedStack(t)
	const k = "sk_good_0123456789abcdef"
	s.tenant(t, "t1", k)
	keys := &countingKeys{APIKeys: s.store}
	srv := s.server(t, api.Config{AuthFailuresPerMinute: 5}, keys)
	if got := status(t, srv, k, "203.0.113.7"); got != http.StatusOK {
		t.Fatalf("good key: HTTP %d", got)
	}
	for i := range 5 {
		if got := status(t, srv, "sk_guess_"+strconv.Itoa(i)+"_0123456789", "203.0.113.7"); got != http.StatusUnauthorized {
			t.Fatalf("guess %d: HTTP %d, want 401", i+1, got)
		}
	}
	before := keys.lookups.Load()
	resp := get(t, srv, "/v1/events", "sk_guess_x_0123456789", "203.0.113.7")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
		resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("guess over the budget: HTTP %d, Retry-After %q, %s", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"))
	}
	if keys.lookups.Load() != before {
		t.Fatal("the store was asked for a key from an address over its budget")
	}
	if got := status(t, srv, k, "203.0.113.7"); got != http.StatusOK {
		t.Fatalf("cached good key from the limited address: HTTP %d", got)
	}
	if got := status(t, srv, "sk_other_0123456789abcdef", "198.51.100.9"); got != http.StatusUnauthorized {
		t.Fatalf("another address: HTTP %d, want 401", got)
	}
}

// TestCachedKeyIsNotTrustedWithoutMySQL: a process that cannot read the changed keys
// stops answering from its cache within the revocation bound (here 200 ms), rather than
// for the cache's 30 s: it then asks MySQL for each key, and answers 503 while MySQL is
// down, and 200 again once it is back.
func TestCachedKeyIsNotTrustedWithoutMySQL(t *testing.T) {
	srv, st, _ := newServerWith(t, serverOptions{cfg: api.Config{KeyRevocationBound: 200 * time.Millisecond}})
	if got := status(t, srv, key, ""); got != http.StatusOK {
		t.Fatalf("before: HTTP %d", got)
	}
	st.mu.Lock()
	st.down = true
	st.mu.Unlock()
	time.Sleep(250 * time.Millisecond)
	if got := status(t, srv, key, ""); got != http.StatusServiceUnavailable {
		t.Fatalf("MySQL down past the bound: HTTP %d, want 503", got)
	}
	st.mu.Lock()
	st.down = false
	st.mu.Unlock()
	if got := status(t, srv, key, ""); got != http.StatusOK {
		t.Fatalf("MySQL back: HTTP %d", got)
	}
}

// mysqlStores gives every noun the API uses the one MariaDB store.
func mysqlStores(st *mysql.Store) api.Stores {
	return api.Stores{
		Payments: st, PayLinks: st, Refunds: st, IdempotencyKeys: st, Notifications: st, Inbox: st,
		EventFeed: st, Tenants: st, APIKeys: st, Anomalies: st, Pinger: st,
	}
}
