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

	"github.com/hashicorp/golang-lru/v2/expirable"
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
	// maxCachedKeys bounds each of the positive and negative caches (least recently
	// used first out).
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

	// pos and neg are expirable LRUs: entries leave after ttl (pos, and at the key's
	// expiry, checked on read) or negativeKeyTTL (neg), or as the least recently used.
	pos *expirable.LRU[string, cachedKey]
	neg *expirable.LRU[string, struct{}]

	mu sync.Mutex
	// checked is when the last look at the changed keys that succeeded started.
	checked time.Time

	// looking serialises the looks; background says one is started in the background,
	// so that a busy process starts one at a time and requests never wait for it.
	looking    sync.Mutex
	background atomic.Bool
}

func newKeyCache(ttl, bound time.Duration, store payment.APIKeys) *keyCache {
	return &keyCache{ttl: ttl, bound: bound, store: store,
		pos: expirable.NewLRU[string, cachedKey](maxCachedKeys, nil, ttl),
		neg: expirable.NewLRU[string, struct{}](maxCachedKeys, nil, negativeKeyTTL)}
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
		kc.pos.Purge()
		kc.neg.Purge()
	}
	for _, k := range changed {
		if c, ok := kc.pos.Peek(k.Hash); ok && c.key.UpdatedAt.Before(k.UpdatedAt) {
			kc.pos.Remove(k.Hash)
		}
		kc.neg.Remove(k.Hash)
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
	if c, ok := kc.pos.Get(hash); ok {
		if now.Before(c.until) && c.key.ValidAt(now) {
			return c.tenant, true, false
		}
		kc.pos.Remove(hash)
	}
	if _, ok := kc.neg.Get(hash); ok {
		return payment.Tenant{}, true, true
	}
	return payment.Tenant{}, false, false
}

func (kc *keyCache) put(k payment.APIKey, t payment.Tenant, now time.Time) {
	until := now.Add(kc.ttl)
	if !k.ExpiresAt.IsZero() && k.ExpiresAt.Before(until) {
		until = k.ExpiresAt
	}
	kc.pos.Add(k.Hash, cachedKey{key: k, tenant: t, until: until})
}

func (kc *keyCache) refuse(hash string) {
	kc.neg.Add(hash, struct{}{})
}

// authenticator resolves API keys to tenants: from the key cache, or from MySQL, with
// the source addresses that present keys that do not authenticate held back.
type authenticator struct {
	keys     *keyCache
	failures *failureLimiter
	store    payment.APIKeys
	metrics  *Metrics
}

// errUnknownKey is the answer to a key that does not authenticate.
var errUnknownKey = payment.Errorf(payment.EUNAUTHORIZED, "unknown, revoked or expired API key")

// authenticate resolves "Authorization: Bearer <api key>" to a tenant. Every /v1 query is
// scoped to that tenant, so one tenant can never see or touch another's payments. A source
// address that keeps presenting keys that do not authenticate is answered 429 for a while
// (failures) before its next key is looked up in MySQL; keys already cached still
// pass, so a legitimate client behind the same address is not locked out.
func (a *authenticator) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header.Get(echo.HeaderAuthorization)
		key, ok := strings.CutPrefix(h, "Bearer ")
		key = strings.TrimSpace(key)
		if !ok || key == "" || len(key) > 256 {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="paykit"`)
			return payment.Errorf(payment.EUNAUTHORIZED, "missing or malformed Authorization: Bearer <api key>")
		}
		t, err := a.tenantForKey(c, HashAPIKey(key))
		if err != nil {
			return err
		}
		c.Set(tenantKey, t)
		return next(c)
	}
}

func (a *authenticator) tenantForKey(c echo.Context, hash string) (payment.Tenant, error) {
	ctx := c.Request().Context()
	now := time.Now()
	trusted, due := a.keys.trusted(now)
	switch {
	case !trusted:
		trusted = a.keys.look(ctx) == nil
	case due:
		a.keys.lookInBackground()
	}
	if trusted {
		t, known, refused := a.keys.cached(hash, now)
		if known && !refused {
			return t, nil
		}
		if known {
			return payment.Tenant{}, a.authFailed(c, now)
		}
	}
	ip := c.RealIP()
	if wait := a.failures.blocked(ip, now); wait > 0 {
		a.metrics.rateLimited.WithLabelValues("", "auth").Inc()
		return payment.Tenant{}, rateLimited(c, wait, "too many requests with API keys that do not authenticate from this address")
	}
	k, t, err := a.store.TenantAPIKey(ctx, hash)
	switch {
	case errors.Is(err, payment.ErrNotFound) || (err == nil && !k.ValidAt(now)):
		a.keys.refuse(hash)
		return payment.Tenant{}, a.authFailed(c, now)
	case err != nil:
		return payment.Tenant{}, &payment.Error{Code: payment.EUNAVAILABLE, Message: "cannot authenticate right now, retry later", Err: err}
	}
	a.keys.put(k, t, now)
	return t, nil
}

// authFailed counts a key that did not authenticate against its source address.
func (a *authenticator) authFailed(c echo.Context, now time.Time) error {
	a.failures.fail(c.RealIP(), now)
	a.metrics.authFailures.Inc()
	return errUnknownKey
}

func tenantOf(c echo.Context) payment.Tenant {
	t, _ := c.Get(tenantKey).(payment.Tenant)
	return t
}

func tenantIDOf(c echo.Context) string {
	return tenantOf(c).ID
}
