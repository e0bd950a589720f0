package api

import (
	"context"
	"math"
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
)

// Default per-tenant limits, in requests a second: above the ~100 checkouts a second of
// the project's own load test for one tenant.
const (
	DefaultCheckoutTokenRate     = 200
	DefaultCheckoutRate          = 200
	DefaultRefundRate            = 50
	DefaultRedeliveryRate        = 10
	DefaultMaxOpenCheckoutTokens = 50000
	DefaultAuthFailuresPerMinute = 60
	// DefaultRateBurst lets a tenant spend five seconds of its rate at once: the load
	// tests start hundreds of checkouts together.
	DefaultRateBurst = 5 * time.Second
)

// Limits are the per-tenant rate limits of the routes that create work, in requests a
// second; zero is no limit.
type Limits struct {
	CheckoutTokens, Checkouts, Refunds, Redeliveries float64
	// Burst is how much of its rate a tenant may spend at once (zero: one second's).
	Burst time.Duration
	// MaxOpenCheckoutTokens bounds a tenant's unspent checkout tokens; zero is no bound.
	MaxOpenCheckoutTokens int
}

// DefaultLimits are the limits of the Default* constants.
func DefaultLimits() Limits {
	return Limits{CheckoutTokens: DefaultCheckoutTokenRate, Checkouts: DefaultCheckoutRate, Refunds: DefaultRefundRate,
		Redeliveries: DefaultRedeliveryRate, Burst: DefaultRateBurst, MaxOpenCheckoutTokens: DefaultMaxOpenCheckoutTokens}
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

// maxFailureSources bounds the source addresses authFailures tracks.
const maxFailureSources = 10000

type failureBucket struct {
	tokens float64
	at     time.Time
}

// failureLimiter limits, per source address and in this process, the API keys that do
// not authenticate: a token bucket of perMinute, refilled at perMinute a minute. It holds
// without Redis; with n API processes an address gets n times the budget.
type failureLimiter struct {
	perMinute float64
	mu        sync.Mutex
	m         map[string]failureBucket
}

func newFailureLimiter(perMinute int) *failureLimiter {
	return &failureLimiter{perMinute: float64(perMinute), m: map[string]failureBucket{}}
}

// level is the bucket of ip at now, refilled; mu is held.
func (fl *failureLimiter) level(ip string, now time.Time) failureBucket {
	b, ok := fl.m[ip]
	if !ok {
		return failureBucket{tokens: fl.perMinute, at: now}
	}
	b.tokens = math.Min(fl.perMinute, b.tokens+now.Sub(b.at).Minutes()*fl.perMinute)
	b.at = now
	return b
}

// blocked returns how long ip must wait before its next unknown key is looked up, or 0.
func (fl *failureLimiter) blocked(ip string, now time.Time) time.Duration {
	if fl.perMinute <= 0 {
		return 0
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	b := fl.level(ip, now)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) / fl.perMinute * float64(time.Minute))
}

// fail counts one key of ip that did not authenticate.
func (fl *failureLimiter) fail(ip string, now time.Time) {
	if fl.perMinute <= 0 {
		return
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	b := fl.level(ip, now)
	b.tokens = math.Max(0, b.tokens-1)
	if _, ok := fl.m[ip]; !ok && len(fl.m) >= maxFailureSources {
		for k := range fl.m {
			if fl.level(k, now).tokens >= fl.perMinute {
				delete(fl.m, k)
			}
		}
		if len(fl.m) >= maxFailureSources {
			clear(fl.m)
		}
	}
	fl.m[ip] = b
}
