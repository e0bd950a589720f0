package api

import (
	"context"
	"math"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/paykit/paykit/payment"
)

// Limiter counts requests against limits shared by every API process (redis.APICache).
// A Cache that is also a Limiter limits the rates of Config.Limits.
type Limiter interface {
	// Allow takes one request of tenantID on route from its limit of rate a second with
	// bursts of burst; it answers how long to wait when the request is over it.
	Allow(ctx context.Context, tenantID, route string, rate float64, burst int) (ok bool, retryAfter time.Duration, err error)
}

// Routes with a per-tenant rate limit, as named in Limits and in the metrics.
const (
	RouteCheckoutTokens = "checkout_tokens"
	RouteCheckouts      = "checkouts"
	RouteRefunds        = "refunds"
	RouteRedeliveries   = "redeliveries"
	RouteCancels        = "cancels"
)

// Default per-tenant limits, in requests a second: above the ~100 checkouts a second of
// the project's own load test for one tenant.
const (
	DefaultCheckoutTokenRate = 200
	DefaultCheckoutRate      = 200
	DefaultRefundRate        = 50
	DefaultRedeliveryRate    = 10
	// DefaultCancelRate bounds a tenant's cancels, each of which may hold a Temporal call
	// for up to Config.CancelWait.
	DefaultCancelRate            = 20
	DefaultMaxOpenCheckoutTokens = 50000
	DefaultAuthFailuresPerMinute = 60
	// DefaultBlockedSourceLookups is the default Config.BlockedSourceLookups: a few
	// queries a second, which MySQL does not notice, and which let a valid key through
	// from a source that others' bad keys put over its budget.
	DefaultBlockedSourceLookups = 5
	// DefaultRateBurst lets a tenant spend five seconds of its rate at once: the load
	// tests start hundreds of checkouts together.
	DefaultRateBurst = 5 * time.Second
)

// Limits are the per-tenant rate limits of the routes that create work, in requests a
// second; zero is no limit.
type Limits struct {
	CheckoutTokens, Checkouts, Refunds, Redeliveries, Cancels float64
	// Burst is how much of its rate a tenant may spend at once (zero: one second's).
	Burst time.Duration
	// MaxOpenCheckoutTokens bounds a tenant's unspent checkout tokens; zero is no bound.
	MaxOpenCheckoutTokens int
}

// DefaultLimits are the limits of the Default* constants.
func DefaultLimits() Limits {
	return Limits{CheckoutTokens: DefaultCheckoutTokenRate, Checkouts: DefaultCheckoutRate, Refunds: DefaultRefundRate,
		Redeliveries: DefaultRedeliveryRate, Cancels: DefaultCancelRate, Burst: DefaultRateBurst, MaxOpenCheckoutTokens: DefaultMaxOpenCheckoutTokens}
}

func (l Limits) rate(route string) float64 {
	switch route {
	case RouteCheckoutTokens:
		return l.CheckoutTokens
	case RouteCheckouts:
		return l.Checkouts
	case RouteRefunds:
		return l.Refunds
	case RouteRedeliveries:
		return l.Redeliveries
	case RouteCancels:
		return l.Cancels
	}
	return 0
}

// limited applies the tenant's limit of route to h. When the limiter fails (Redis is
// down or slow) the request goes through, counted in paykit_rate_limiter_errors_total:
// payments must not stop because Redis is down, and MySQL still holds every guarantee.
func (s *Server) limited(route string, h echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		rate := s.cfg.Limits.rate(route)
		if s.limiter == nil || rate <= 0 {
			return h(c)
		}
		tenantID := tenantIDOf(c)
		burst := s.cfg.Limits.Burst
		if burst <= 0 {
			burst = time.Second
		}
		ok, wait, err := s.limiter.Allow(c.Request().Context(), tenantID, route, rate, max(1, int(math.Ceil(rate*burst.Seconds()))))
		switch {
		case err != nil:
			s.metrics.limiterErrors.WithLabelValues(route).Inc()
		case !ok:
			s.metrics.rateLimited.WithLabelValues(tenantID, route).Inc()
			return rateLimited(c, wait, "over the tenant's rate limit of "+route+"; retry after Retry-After")
		}
		return h(c)
	}
}

// rateLimited answers 429 rate_limited with Retry-After in whole seconds (at least 1).
func rateLimited(c echo.Context, wait time.Duration, msg string) error {
	secs := max(1, int(math.Ceil(wait.Seconds())))
	c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
	return payment.Errorf(payment.ERATELIMITED, "%s", msg)
}

// maxFailureSources bounds the sources a failureLimiter tracks.
const maxFailureSources = 10000

// sourceOf is the source address ip is counted under: an IPv4 address, or the /64 of an
// IPv6 one, which one subscriber commonly holds whole (counting its addresses apart would
// give it 2^64 budgets).
func sourceOf(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return a.String()
	}
	return netip.PrefixFrom(a, 64).Masked().String()
}

type failureBucket struct {
	tokens float64
	at     time.Time
}

// failureLimiter limits, per source and in this process, the lookups of API keys that do
// not authenticate: a token bucket of perMinute, refilled at perMinute a minute. A lookup
// takes its token before it is made and gives it back when the key authenticates, so that
// guesses sent at once cannot all pass before the first one fails. It holds without
// Redis; with n API processes a source gets n times the budget.
type failureLimiter struct {
	perMinute float64
	mu        sync.Mutex
	m         map[string]failureBucket
	// swept is when the sources back at a full bucket were last let go.
	swept time.Time
}

func newFailureLimiter(perMinute int) *failureLimiter {
	return &failureLimiter{perMinute: float64(perMinute), m: map[string]failureBucket{}}
}

// level is the bucket of src at now, refilled; mu is held.
func (fl *failureLimiter) level(src string, now time.Time) failureBucket {
	b, ok := fl.m[src]
	if !ok {
		return failureBucket{tokens: fl.perMinute, at: now}
	}
	b.tokens = math.Min(fl.perMinute, b.tokens+now.Sub(b.at).Minutes()*fl.perMinute)
	b.at = now
	return b
}

// room reports whether a source not yet tracked can be, letting go of the sources whose
// buckets are full again (at most once a second, for a flood of new sources must not
// cost a scan each); mu is held. Forgetting sources that are still short would give each
// a new budget, so a new source finds no room while every tracked one is short.
func (fl *failureLimiter) room(now time.Time) bool {
	if len(fl.m) < maxFailureSources {
		return true
	}
	if now.Sub(fl.swept) < time.Second {
		return false
	}
	fl.swept = now
	for k := range fl.m {
		if fl.level(k, now).tokens >= fl.perMinute {
			delete(fl.m, k)
		}
	}
	return len(fl.m) < maxFailureSources
}

// take takes one key of src from its budget: ok, or how long until src has one again. A
// new source when maxFailureSources are tracked and short is refused as if over its
// budget.
func (fl *failureLimiter) take(src string, now time.Time) (ok bool, wait time.Duration) {
	if fl.perMinute <= 0 {
		return true, 0
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if _, tracked := fl.m[src]; !tracked && !fl.room(now) {
		return false, time.Duration(float64(time.Minute) / fl.perMinute)
	}
	b := fl.level(src, now)
	if b.tokens < 1 {
		fl.m[src] = b
		return false, time.Duration((1 - b.tokens) / fl.perMinute * float64(time.Minute))
	}
	b.tokens--
	fl.m[src] = b
	return true, 0
}

// give gives back the token a lookup of src took, when its key authenticated (or the
// lookup could not be made).
func (fl *failureLimiter) give(src string, now time.Time) {
	if fl.perMinute <= 0 {
		return
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if _, tracked := fl.m[src]; !tracked {
		return
	}
	b := fl.level(src, now)
	b.tokens = math.Min(fl.perMinute, b.tokens+1)
	if b.tokens >= fl.perMinute {
		delete(fl.m, src)
		return
	}
	fl.m[src] = b
}

// fail counts one key of src that did not authenticate without a lookup (a key refused
// from the cache, or by a lookup another request made).
func (fl *failureLimiter) fail(src string, now time.Time) {
	_, _ = fl.take(src, now)
}

// lookupBudget is a token bucket of rate a second, in bursts of as many (at least one):
// the lookups of keys that this process makes, every source together, for sources over
// their own budget.
type lookupBudget struct {
	rate   float64
	mu     sync.Mutex
	tokens float64
	at     time.Time
}

func newLookupBudget(rate float64) *lookupBudget {
	return &lookupBudget{rate: rate, tokens: max(1, rate)}
}

// take takes one lookup: ok, or how long until there is one.
func (lb *lookupBudget) take(now time.Time) (ok bool, wait time.Duration) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if !lb.at.IsZero() {
		lb.tokens = math.Min(max(1, lb.rate), lb.tokens+now.Sub(lb.at).Seconds()*lb.rate)
	}
	lb.at = now
	if lb.tokens < 1 {
		return false, time.Duration((1 - lb.tokens) / lb.rate * float64(time.Second))
	}
	lb.tokens--
	return true, 0
}
