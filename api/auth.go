package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/paykit/paykit/payment"
)

const tenantKey = "paykit.tenant"

// HashAPIKey returns the stored form of an API key: hex SHA-256. API keys are random
// 128-bit+ secrets, so a fast hash is enough and keeps authentication cheap.
func HashAPIKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// Bounds of the key cache.
const (
	// DefaultKeyRevocationBound is the default Config.KeyRevocationBound.
	DefaultKeyRevocationBound = time.Second
	// keyChangeWindow is how far back each look at the changed keys reads, against clock
	// skew between the hosts that change keys and the API's, and transactions slow to
	// commit; a process that has not looked for half of it forgets every cached key.
	keyChangeWindow = time.Minute
	// keyChangesRead is the most changed keys one look reads; more forget every key.
	keyChangesRead = 1000
	// negativeKeyTTL is how long an unknown, revoked or expired key is answered 401
	// without asking MySQL.
	negativeKeyTTL = 5 * time.Second
	// maxCachedKeys bounds each of the positive and negative caches.
	maxCachedKeys = 10000
)

type cachedKey struct {
	key    payment.APIKey
	tenant payment.Tenant
	until  time.Time
}

// keyCache remembers API keys, by hash (never the keys themselves), to save MySQL a
// query per request: authenticated ones for TenantCacheTTL (at most until they expire),
// refused ones for negativeKeyTTL.
//
// Revocation is seen through MySQL alone: at most every revocation bound, and in the
// background every half of it while requests come, the process reads the keys whose rows
// changed lately (APIKeysChangedSince, one indexed query) and drops them. A cached key
// is trusted only while the last such look started less than the bound ago: if MySQL
// does not answer it, every request asks MySQL for its key, and fails with it. So a
// revoked key stops working on every process within the bound whatever Redis does,
// Redis is not on the authentication path at all, and an authenticated request with a
// cached key costs nothing beyond a map read (plus, twice a second per process, one
// MySQL query off the request path). The trade-off: a MySQL outage fails authentication
// within the bound instead of serving cached keys for TenantCacheTTL; every other /v1
// request needs MySQL anyway.
type keyCache struct {
	ttl, bound time.Duration
	store      payment.APIKeys

	mu  sync.Mutex
	pos map[string]cachedKey
	neg map[string]time.Time
	// checked is when the last look at the changed keys that succeeded started.
	checked time.Time

	// looking serialises the looks; background says one is started in the background,
	// so that a busy process starts one at a time and requests never wait for it.
	looking    sync.Mutex
	background atomic.Bool
}

func newKeyCache(ttl, bound time.Duration, store payment.APIKeys) *keyCache {
	return &keyCache{ttl: ttl, bound: bound, store: store, pos: map[string]cachedKey{}, neg: map[string]time.Time{}}
}

// trusted reports whether cached entries may answer at now, and whether a look at the
// changed keys is due.
func (kc *keyCache) trusted(now time.Time) (ok, due bool) {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	age := now.Sub(kc.checked)
	return age < kc.bound, age >= kc.bound/2
}

// look reads the keys changed since the last look (less the window) and drops them.
func (kc *keyCache) look(ctx context.Context) error {
	kc.looking.Lock()
	defer kc.looking.Unlock()
	started := time.Now()
	kc.mu.Lock()
	last := kc.checked
	kc.mu.Unlock()
	if started.Sub(last) < kc.bound/2 {
		return nil // another request just looked
	}
	since := last
	if started.Sub(last) > keyChangeWindow/2 {
		since = started // every key is forgotten below
	}
	changed, err := kc.store.APIKeysChangedSince(ctx, since.Add(-keyChangeWindow), keyChangesRead)
	if err != nil {
		return err
	}
	kc.mu.Lock()
	defer kc.mu.Unlock()
	if started.Sub(last) > keyChangeWindow/2 || len(changed) >= keyChangesRead {
		// Changes may have gone by unread.
		clear(kc.pos)
		clear(kc.neg)
	}
	for _, k := range changed {
		if c, ok := kc.pos[k.Hash]; ok && c.key.UpdatedAt.Before(k.UpdatedAt) {
			delete(kc.pos, k.Hash)
		}
		delete(kc.neg, k.Hash)
	}
	kc.checked = started
	return nil
}

// lookInBackground starts a look unless one is running.
func (kc *keyCache) lookInBackground() {
	if !kc.background.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer kc.background.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = kc.look(ctx)
	}()
}

// cached answers from the cache: known says whether it did, and refused that the key is
// unknown, revoked or expired.
func (kc *keyCache) cached(hash string, now time.Time) (t payment.Tenant, known, refused bool) {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	if c, ok := kc.pos[hash]; ok {
		if now.Before(c.until) && c.key.ValidAt(now) {
			return c.tenant, true, false
		}
		delete(kc.pos, hash)
	}
	if until, ok := kc.neg[hash]; ok {
		if now.Before(until) {
			return payment.Tenant{}, true, true
		}
		delete(kc.neg, hash)
	}
	return payment.Tenant{}, false, false
}

func (kc *keyCache) put(k payment.APIKey, t payment.Tenant, now time.Time) {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	if len(kc.pos) >= maxCachedKeys {
		clear(kc.pos)
	}
	until := now.Add(kc.ttl)
	if !k.ExpiresAt.IsZero() && k.ExpiresAt.Before(until) {
		until = k.ExpiresAt
	}
	kc.pos[k.Hash] = cachedKey{key: k, tenant: t, until: until}
}

func (kc *keyCache) refuse(hash string, now time.Time) {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	if len(kc.neg) >= maxCachedKeys {
		for h, until := range kc.neg {
			if !now.Before(until) {
				delete(kc.neg, h)
			}
		}
		if len(kc.neg) >= maxCachedKeys {
			clear(kc.neg)
		}
	}
	kc.neg[hash] = now.Add(negativeKeyTTL)
}

// errUnknownKey is the answer to a key that does not authenticate.
var errUnknownKey = payment.Errorf(payment.EUNAUTHORIZED, "unknown, revoked or expired API key")

// authenticate resolves "Authorization: Bearer <api key>" to a tenant. Every /v1 query is
// scoped to that tenant, so one tenant can never see or touch another's payments. A source
// address that keeps presenting keys that do not authenticate is answered 429 for a while
// (authFailures) before its next key is looked up in MySQL; keys already cached still
// pass, so a legitimate client behind the same address is not locked out.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header.Get(echo.HeaderAuthorization)
		key, ok := strings.CutPrefix(h, "Bearer ")
		key = strings.TrimSpace(key)
		if !ok || key == "" || len(key) > 256 {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="paykit"`)
			return payment.Errorf(payment.EUNAUTHORIZED, "missing or malformed Authorization: Bearer <api key>")
		}
		t, err := s.tenantForKey(c, HashAPIKey(key))
		if err != nil {
			return err
		}
		c.Set(tenantKey, t)
		return next(c)
	}
}

func (s *Server) tenantForKey(c echo.Context, hash string) (payment.Tenant, error) {
	ctx := c.Request().Context()
	now := time.Now()
	trusted, due := s.keys.trusted(now)
	switch {
	case !trusted:
		trusted = s.keys.look(ctx) == nil
	case due:
		s.keys.lookInBackground()
	}
	if trusted {
		t, known, refused := s.keys.cached(hash, now)
		if known && !refused {
			return t, nil
		}
		if known {
			return payment.Tenant{}, s.authFailed(c, now)
		}
	}
	ip := c.RealIP()
	if wait := s.authFailures.blocked(ip, now); wait > 0 {
		s.metrics.rateLimited.WithLabelValues("", "auth").Inc()
		return payment.Tenant{}, rateLimited(c, wait, "too many requests with API keys that do not authenticate from this address")
	}
	k, t, err := s.store.TenantAPIKey(ctx, hash)
	switch {
	case errors.Is(err, payment.ErrNotFound) || (err == nil && !k.ValidAt(now)):
		s.keys.refuse(hash, now)
		return payment.Tenant{}, s.authFailed(c, now)
	case err != nil:
		return payment.Tenant{}, &payment.Error{Code: payment.EUNAVAILABLE, Message: "cannot authenticate right now, retry later", Err: err}
	}
	s.keys.put(k, t, now)
	return t, nil
}

// authFailed counts a key that did not authenticate against its source address.
func (s *Server) authFailed(c echo.Context, now time.Time) error {
	s.authFailures.fail(c.RealIP(), now)
	s.metrics.authFailures.Inc()
	return errUnknownKey
}

func tenantOf(c echo.Context) payment.Tenant {
	t, _ := c.Get(tenantKey).(payment.Tenant)
	return t
}

func tenantIDOf(c echo.Context) string {
	return tenantOf(c).ID
}
