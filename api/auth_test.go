package api_test

import (
	"context"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
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

// TestAuthFailuresAreLimitedPerSource: a source address (named by a trusted proxy)
// presenting unknown keys is answered 429 with Retry-After once over its budget and the
// process's lookups for such sources, without the store being asked; another address is
// not, and a key already cached still passes from the first.
func TestAuthFailuresAreLimitedPerSource(t *testing.T) {
	s := newSharedStack(t)
	const k = "sk_good_0123456789abcdef"
	s.tenant(t, "t1", k)
	keys := &countingKeys{APIKeys: s.store}
	srv := s.server(t, api.Config{AuthFailuresPerMinute: 5, BlockedSourceLookups: 0.001, TrustedProxies: cidrs(t, "127.0.0.0/8")}, keys)
	if got := status(t, srv, k, "203.0.113.7"); got != http.StatusOK {
		t.Fatalf("good key: HTTP %d", got)
	}
	for i := range 6 {
		if got := status(t, srv, "sk_guess_"+strconv.Itoa(i)+"_0123456789", "203.0.113.7"); got != http.StatusUnauthorized {
			t.Fatalf("guess %d: HTTP %d, want 401 (5 of the source's, 1 of the process's for sources over theirs)", i+1, got)
		}
	}
	before := keys.lookups.Load()
	resp := get(t, srv, "/v1/events", "sk_guess_x_0123456789", "203.0.113.7")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
		resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("guess over the budgets: HTTP %d, Retry-After %q, %s", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"))
	}
	if keys.lookups.Load() != before {
		t.Fatal("the store was asked for a key from an address over its budget once the process's were spent")
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
	st.Mu.Lock()
	st.Down = true
	st.Mu.Unlock()
	time.Sleep(250 * time.Millisecond)
	if got := status(t, srv, key, ""); got != http.StatusServiceUnavailable {
		t.Fatalf("MySQL down past the bound: HTTP %d, want 503", got)
	}
	st.Mu.Lock()
	st.Down = false
	st.Mu.Unlock()
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

// peerHeader names, in a test's request, the address the server is to see as its peer:
// every peer of an httptest server is 127.0.0.1.
const peerHeader = "X-Test-Peer"

// asPeers serves h with each request's peer taken from peerHeader.
func asPeers(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.Header.Get(peerHeader); p != "" {
			r.RemoteAddr = net.JoinHostPort(p, "40000")
			r.Header.Del(peerHeader)
		}
		h.ServeHTTP(w, r)
	})
}

// authServer is an API server on the fakes whose keys are keys (the fake store's own
// key if nil), counted, and whose peers the requests choose (asPeers).
func authServer(tb testing.TB, cfg api.Config, keys payment.APIKeys) (*httptest.Server, *countingKeys) {
	tb.Helper()
	st := &fakeStore{
		tenant: payment.Tenant{ID: "t1", APIKeyHash: api.HashAPIKey(key), AlipayAppID: "app", AlipaySeller: "seller"},
		idem:   map[string]payment.IdempotencyRecord{},
	}
	if keys == nil {
		keys = st
	}
	counted := &countingKeys{APIKeys: keys}
	stores := st.stores()
	stores.APIKeys = counted
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := api.New(cfg, stores, payment.SingleGateway{Gateway: fakeGateway{}}, &fakeOrch{}, nil, quiet, nil)
	srv := httptest.NewServer(asPeers(checked(tb, s)))
	tb.Cleanup(srv.Close)
	return srv, counted
}

// from is the status of GET /v1/events with key from the peer address peer, naming xff
// in X-Forwarded-For if it is set.
func from(tb testing.TB, srv *httptest.Server, key, peer, xff string) int {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set(peerHeader, peer)
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// guess is the i-th bad key of a test.
func guess(i int) string { return "sk_guess_" + strconv.Itoa(i) + "_0123456789abcdef" }

// TestSpoofedForwardedForIsNotASource: a client on a private address that names a new
// address in X-Forwarded-For with every guess is limited by its own address, as no proxy
// is trusted by default: its guesses beyond its budget are answered 429, and the store is
// asked for few of them.
func TestSpoofedForwardedForIsNotASource(t *testing.T) {
	srv, keys := authServer(t, api.Config{AuthFailuresPerMinute: 5, BlockedSourceLookups: 1}, nil)
	start := time.Now()
	limited := 0
	for i := range 100 {
		switch got := from(t, srv, guess(i), "10.1.2.3", "203.0.113."+strconv.Itoa(i+1)); got {
		case http.StatusTooManyRequests:
			limited++
		case http.StatusUnauthorized:
		default:
			t.Fatalf("guess %d: HTTP %d", i+1, got)
		}
	}
	// The source's 5, and the process's 1 a second for sources over their budget.
	most := 5 + 1 + int(math.Ceil(time.Since(start).Seconds()))
	if n := keys.lookups.Load(); limited < 100-most || n > int64(most) {
		t.Fatalf("%d of 100 guesses with a spoofed X-Forwarded-For answered 429, %d store lookups; want %d or more, and %d at most",
			limited, n, 100-most, most)
	}
}

// TestValidKeyPassesFromABlockedSource: a source over its budget of bad keys (an attacker
// behind the same NAT, or a balancer that names no client) does not lock out a valid key
// that is not cached: it is still looked up, and authenticates.
func TestValidKeyPassesFromABlockedSource(t *testing.T) {
	srv, _ := authServer(t, api.Config{AuthFailuresPerMinute: 5}, nil)
	const shared = "198.51.100.7"
	for i := range 6 {
		from(t, srv, guess(i), shared, "")
	}
	if got := from(t, srv, key, shared, ""); got != http.StatusOK {
		t.Fatalf("the victim's valid key from the blocked source: HTTP %d, want 200", got)
	}
}

// TestConcurrentGuessesStayWithinTheBudget: guesses sent at once from one source are
// counted before they are looked up, so that the store sees no more of them than the
// source's budget and the process-wide lookups of blocked sources.
func TestConcurrentGuessesStayWithinTheBudget(t *testing.T) {
	rows := &keyRows{rows: map[string]payment.APIKey{}, delay: 20 * time.Millisecond}
	srv, keys := authServer(t, api.Config{AuthFailuresPerMinute: 5, BlockedSourceLookups: 1}, rows)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from(t, srv, guess(i), "198.51.100.8", "")
		}()
	}
	wg.Wait()
	most := 5 + 1 + int(math.Ceil(time.Since(start).Seconds()))
	if n := keys.lookups.Load(); n > int64(most) {
		t.Fatalf("50 concurrent guesses from one source with a budget of 5: %d store lookups, want %d at most", n, most)
	}
}

// TestOneKeyPresentedAtOnceIsLookedUpOnce: requests presenting one valid key at once, as
// a merchant's burst after the process starts does, share one lookup, and none of them is
// refused for the source's budget, however small.
func TestOneKeyPresentedAtOnceIsLookedUpOnce(t *testing.T) {
	hash := api.HashAPIKey(key)
	rows := &keyRows{tenant: payment.Tenant{ID: "t1", APIKeyHash: hash, AlipayAppID: "app"},
		rows: map[string]payment.APIKey{hash: {Hash: hash, TenantID: "t1"}}, delay: 50 * time.Millisecond}
	srv, keys := authServer(t, api.Config{AuthFailuresPerMinute: 1, BlockedSourceLookups: 1}, rows)
	codes := make(chan int, 50)
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- from(t, srv, key, "198.51.100.10", "")
		}()
	}
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusOK {
			t.Fatalf("a request with the valid key: HTTP %d", code)
		}
	}
	if n := keys.lookups.Load(); n != 1 {
		t.Fatalf("%d lookups of one key presented at once, want 1", n)
	}
}

// keyRows are API keys as MySQL holds them: rows that hosts write with their own clocks,
// each read taking delay.
type keyRows struct {
	mu     sync.Mutex
	tenant payment.Tenant
	rows   map[string]payment.APIKey
	delay  time.Duration
}

func (k *keyRows) set(r payment.APIKey) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.rows[r.Hash] = r
}

func (k *keyRows) TenantAPIKey(_ context.Context, hash string) (payment.APIKey, payment.Tenant, error) {
	time.Sleep(k.delay)
	k.mu.Lock()
	defer k.mu.Unlock()
	r, ok := k.rows[hash]
	if !ok {
		return payment.APIKey{}, payment.Tenant{}, payment.ErrNotFound
	}
	return r, k.tenant, nil
}

func (k *keyRows) APIKeysChangedSince(_ context.Context, since time.Time, limit int) ([]payment.APIKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var changed []payment.APIKey
	for _, r := range k.rows {
		if !r.UpdatedAt.Before(since) && len(changed) < limit {
			changed = append(changed, r)
		}
	}
	return changed, nil
}

// TestRevocationDoesNotDependOnClocks: a key cached from a row written by a host whose
// clock is ahead, then revoked by a host whose clock is behind (an earlier updated_at), is
// refused within the revocation bound; a key whose row is read again unchanged stays
// cached.
func TestRevocationDoesNotDependOnClocks(t *testing.T) {
	now := time.Now()
	hash := api.HashAPIKey(key)
	rows := &keyRows{tenant: payment.Tenant{ID: "t1", APIKeyHash: hash, AlipayAppID: "app"}, rows: map[string]payment.APIKey{}}
	ahead := payment.APIKey{Hash: hash, TenantID: "t1", CreatedAt: now.Add(4 * time.Second), UpdatedAt: now.Add(4 * time.Second)}
	rows.set(ahead)
	srv, keys := authServer(t, api.Config{KeyRevocationBound: 100 * time.Millisecond}, rows)
	if got := from(t, srv, key, "198.51.100.9", ""); got != http.StatusOK {
		t.Fatalf("before the revocation: HTTP %d", got)
	}
	time.Sleep(300 * time.Millisecond) // a few looks at the changed keys, which list it unchanged
	if got := from(t, srv, key, "198.51.100.9", ""); got != http.StatusOK || keys.lookups.Load() != 1 {
		t.Fatalf("unchanged: HTTP %d after %d lookups, want 200 from the cache after one", got, keys.lookups.Load())
	}
	revoked := ahead
	revoked.RevokedAt, revoked.UpdatedAt = now.Add(500*time.Millisecond), now.Add(500*time.Millisecond)
	rows.set(revoked)
	at := time.Now()
	for from(t, srv, key, "198.51.100.9", "") != http.StatusUnauthorized {
		if time.Since(at) > time.Second {
			t.Fatalf("the key is still accepted %v after its revocation, with an updated_at before the cached one's", time.Since(at))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cidrs parses networks for Config.TrustedProxies.
func cidrs(tb testing.TB, networks ...string) []*net.IPNet {
	tb.Helper()
	var ns []*net.IPNet
	for _, c := range networks {
		_, n, err := net.ParseCIDR(c)
		if err != nil {
			tb.Fatal(err)
		}
		ns = append(ns, n)
	}
	return ns
}

// TestSourceAddress: the source address a key is counted against is the peer's unless
// the peer is a trusted proxy, and then the last address X-Forwarded-For names outside the
// trusted networks; an IPv6 source is its /64. An attacker sends guesses past its budget
// and the process's lookups for sources over theirs; a probe from the same source is
// then answered 429, one from another source 401.
func TestSourceAddress(t *testing.T) {
	type req struct{ peer, xff string }
	fresh := func(i int) string { return "203.0.113." + strconv.Itoa(i+1) }
	tests := []struct {
		name     string
		trusted  []string
		attacker func(i int) req
		probe    req
		want     int
	}{
		{"no proxy: a spoofed header is ignored", nil,
			func(i int) req { return req{"10.1.2.3", fresh(i)} }, req{"10.1.2.3", "198.51.100.77"}, http.StatusTooManyRequests},
		{"no proxy: another peer", nil,
			func(i int) req { return req{"10.1.2.3", fresh(i)} }, req{"10.1.2.4", ""}, http.StatusUnauthorized},
		{"trusted proxy: the client it names", []string{"10.0.0.0/8"},
			func(int) req { return req{"10.0.0.2", "198.51.100.1"} }, req{"10.0.0.3", "198.51.100.1"}, http.StatusTooManyRequests},
		{"trusted proxy: another client", []string{"10.0.0.0/8"},
			func(int) req { return req{"10.0.0.2", "198.51.100.1"} }, req{"10.0.0.2", "198.51.100.2"}, http.StatusUnauthorized},
		{"trusted proxy: addresses the client put before its own", []string{"10.0.0.0/8"},
			func(i int) req { return req{"10.0.0.2", fresh(i) + ", 198.51.100.1"} }, req{"10.0.0.2", "198.51.100.1"}, http.StatusTooManyRequests},
		{"untrusted peer: its header is ignored", []string{"10.0.0.0/8"},
			func(i int) req { return req{"192.168.7.7", fresh(i)} }, req{"192.168.7.7", "198.51.100.5"}, http.StatusTooManyRequests},
		{"untrusted peer: loopback is not trusted either", []string{"10.0.0.0/8"},
			func(i int) req { return req{"127.0.0.1", fresh(i)} }, req{"127.0.0.1", ""}, http.StatusTooManyRequests},
		{"IPv6: one /64", nil,
			func(i int) req { return req{"2001:db8::" + strconv.Itoa(i+1), ""} }, req{"2001:db8::ffff", ""}, http.StatusTooManyRequests},
		{"IPv6: another /64", nil,
			func(i int) req { return req{"2001:db8::" + strconv.Itoa(i+1), ""} }, req{"2001:db8:0:1::1", ""}, http.StatusUnauthorized},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := authServer(t, api.Config{AuthFailuresPerMinute: 3, BlockedSourceLookups: 0.001, TrustedProxies: cidrs(t, tc.trusted...)}, nil)
			for i := range 5 {
				r := tc.attacker(i)
				from(t, srv, guess(i), r.peer, r.xff)
			}
			if got := from(t, srv, "sk_probe_0123456789abcdef", tc.probe.peer, tc.probe.xff); got != tc.want {
				t.Fatalf("probe from %s (X-Forwarded-For %q): HTTP %d, want %d", tc.probe.peer, tc.probe.xff, got, tc.want)
			}
		})
	}
}

// TestBlockedSourcesShareOneLookupBudget: a flood of bad keys from many sources costs the
// store no more lookups than the sources' budgets and the process's lookups for sources
// over theirs; a valid key from a blocked source is answered 429 only while those are
// spent, and authenticates once there is one again.
func TestBlockedSourcesShareOneLookupBudget(t *testing.T) {
	const perSource, perSecond = 2, 1
	srv, keys := authServer(t, api.Config{AuthFailuresPerMinute: perSource, BlockedSourceLookups: perSecond}, nil)
	start := time.Now()
	for p := range 10 {
		for i := range 10 {
			from(t, srv, guess(p*10+i), "198.51.100."+strconv.Itoa(p+1), "")
		}
	}
	most := 10*perSource + perSecond + int(math.Ceil(time.Since(start).Seconds()*perSecond))
	if n := keys.lookups.Load(); n > int64(most) {
		t.Fatalf("100 guesses from 10 sources: %d store lookups, want %d at most", n, most)
	}
	for i := 0; from(t, srv, guess(100+i), "198.51.100.1", "") != http.StatusTooManyRequests; i++ {
		if i == 10 {
			t.Fatal("guesses from a blocked source are still looked up after the process's lookups should be spent")
		}
	}
	if got := from(t, srv, key, "198.51.100.1", ""); got != http.StatusTooManyRequests {
		t.Fatalf("a valid key from a blocked source while the process's lookups are spent: HTTP %d, want 429", got)
	}
	time.Sleep(time.Second / perSecond)
	if got := from(t, srv, key, "198.51.100.1", ""); got != http.StatusOK {
		t.Fatalf("a valid key from a blocked source once there is a lookup again: HTTP %d, want 200", got)
	}
}
