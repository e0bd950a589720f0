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
		// Whether the row is newer than the cached one is not asked of updated_at: each
		// host writes it from its own clock, and a revocation by a host whose clock is
		// behind must not be missed. A row unlike the cached one is dropped; the window
		// reads a change again for a minute, and it then matches what was read since.
		if c, ok := kc.pos.Peek(k.Hash); ok && !sameKey(c.key, k) {
			kc.pos.Remove(k.Hash)
		}
		kc.neg.Remove(k.Hash)
	}
	kc.checked = started
	return nil
}

// sameKey reports whether a and b are the same row of a key: nothing in it changed.
func sameKey(a, b payment.APIKey) bool {
	return a.Hash == b.Hash && a.TenantID == b.TenantID && a.CreatedAt.Equal(b.CreatedAt) &&
		a.ExpiresAt.Equal(b.ExpiresAt) && a.RevokedAt.Equal(b.RevokedAt) && a.UpdatedAt.Equal(b.UpdatedAt)
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

// keyLookupTimeout bounds a lookup of a key in MySQL, which the requests presenting the
// key while it runs share, whichever of them goes away.
const keyLookupTimeout = 5 * time.Second

// authenticator resolves API keys to tenants: from the key cache, or from MySQL, with
// the sources that present keys that do not authenticate held back.
type authenticator struct {
	keys *keyCache
	// failures is each source's budget of lookups of keys that do not authenticate;
	// overLimit the lookups made for sources over theirs, every source together.
	failures  *failureLimiter
	overLimit *lookupBudget
	store     payment.APIKeys
	metrics   *Metrics

	mu sync.Mutex
	// lookups are the lookups in MySQL under way, by hash.
	lookups map[string]*keyLookup
}

func newAuthenticator(cfg Config, store payment.APIKeys, metrics *Metrics) *authenticator {
	return &authenticator{keys: newKeyCache(cfg.TenantCacheTTL, cfg.KeyRevocationBound, store),
		failures: newFailureLimiter(cfg.AuthFailuresPerMinute), overLimit: newLookupBudget(cfg.BlockedSourceLookups),
		store: store, metrics: metrics, lookups: map[string]*keyLookup{}}
}

// keyLookup is one lookup of a key in MySQL; done is closed once the rest is set.
type keyLookup struct {
	done   chan struct{}
	key    payment.APIKey
	tenant payment.Tenant
	err    error
}

// errUnknownKey is the answer to a key that does not authenticate.
var errUnknownKey = payment.Errorf(payment.EUNAUTHORIZED, "unknown, revoked or expired API key")

// authenticate resolves "Authorization: Bearer <api key>" to a tenant. Every /v1 query is
// scoped to that tenant, so one tenant can never see or touch another's payments.
//
// A key not cached is looked up in MySQL within its source address's budget of keys that
// do not authenticate (failures). A source over it, whatever others did to put it there
// (guesses from behind the same NAT or balancer), still has its keys looked up, but
// within one budget of the process for every such source (overLimit), so that a valid
// key passes while a flood of bad ones costs MySQL no more than that budget beyond the
// sources' own; only when that is spent too is it answered 429. Cached keys always pass.
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
	now := time.Now()
	if t, known, err := a.fromCache(c, hash, now); known {
		return t, err
	}
	src := sourceOf(c.RealIP())
	l, joined, took, wait := a.join(hash, src, now)
	switch {
	case l == nil:
		a.metrics.rateLimited.WithLabelValues("", "auth").Inc()
		return payment.Tenant{}, rateLimited(c, wait, "too many requests with API keys that do not authenticate from this address")
	case !joined:
		a.lookUp(c.Request().Context(), hash, l, now)
	default:
		select {
		case <-l.done:
		case <-c.Request().Context().Done():
			return payment.Tenant{}, &payment.Error{Code: payment.EUNAVAILABLE, Message: "cannot authenticate right now, retry later", Err: c.Request().Context().Err()}
		}
	}
	switch {
	case errors.Is(l.err, payment.ErrNotFound) || (l.err == nil && !l.key.ValidAt(now)):
		if joined {
			return payment.Tenant{}, a.authFailed(c, now)
		}
		// The source's token, or one of overLimit, is spent on it already.
		a.metrics.authFailures.Inc()
		return payment.Tenant{}, errUnknownKey
	case took:
		// Nothing is counted against the source for a key that authenticates, nor for a
		// lookup that could not be made.
		a.failures.give(src, now)
	}
	if l.err != nil {
		return payment.Tenant{}, &payment.Error{Code: payment.EUNAVAILABLE, Message: "cannot authenticate right now, retry later", Err: l.err}
	}
	return l.tenant, nil
}

// fromCache answers from the key cache when it may (known), after a look at the changed
// keys if one is due.
func (a *authenticator) fromCache(c echo.Context, hash string, now time.Time) (t payment.Tenant, known bool, err error) {
	trusted, due := a.keys.trusted(now)
	switch {
	case !trusted:
		trusted = a.keys.look(c.Request().Context()) == nil
	case due:
		a.keys.lookInBackground()
	}
	if !trusted {
		return payment.Tenant{}, false, nil
	}
	t, known, refused := a.keys.cached(hash, now)
	if known && refused {
		return payment.Tenant{}, true, a.authFailed(c, now)
	}
	return t, known, nil
}

// join returns the lookup of hash under way (joined), or starts one if src has a lookup
// left (took: one of its own budget, else one of overLimit), or returns nil and how long
// until there is one. The budgets are taken from under mu, before the lookup, so that
// neither guesses sent at once nor one key presented at once get more lookups than them.
func (a *authenticator) join(hash, src string, now time.Time) (l *keyLookup, joined, took bool, wait time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if l, ok := a.lookups[hash]; ok {
		return l, true, false, 0
	}
	if took, wait = a.failures.take(src, now); !took {
		var ok bool
		if ok, wait = a.overLimit.take(now); !ok {
			return nil, false, false, wait
		}
	}
	l = &keyLookup{done: make(chan struct{})}
	a.lookups[hash] = l
	return l, false, took, 0
}

// lookUp makes lookup l of hash in MySQL, records its answer in the cache, and lets the
// requests waiting for it go.
func (a *authenticator) lookUp(ctx context.Context, hash string, l *keyLookup, now time.Time) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keyLookupTimeout)
	defer cancel()
	l.key, l.tenant, l.err = a.store.TenantAPIKey(ctx, hash)
	switch {
	case errors.Is(l.err, payment.ErrNotFound) || (l.err == nil && !l.key.ValidAt(now)):
		a.keys.refuse(hash)
	case l.err == nil:
		a.keys.put(l.key, l.tenant, now)
	}
	a.mu.Lock()
	delete(a.lookups, hash)
	a.mu.Unlock()
	close(l.done)
}

// authFailed counts a key that did not authenticate, and was not looked up for this
// request, against its source address.
func (a *authenticator) authFailed(c echo.Context, now time.Time) error {
	a.failures.fail(sourceOf(c.RealIP()), now)
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
