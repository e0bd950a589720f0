package api

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/paykit/paykit/checkout"
	"github.com/paykit/paykit/inbox"
)

// Metrics are the API's Prometheus collectors.
type Metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	idem     *prometheus.CounterVec
	// inbox and checkout are the collectors of the notification inbox and of the
	// checkout, on the same registry.
	inbox    *inbox.Metrics
	checkout *checkout.Metrics
	// rateLimited counts the requests answered 429 by tenant and limit, limiterErrors
	// the requests let through because the limiter did not answer, authFailures the API
	// keys that did not authenticate.
	rateLimited   *prometheus.CounterVec
	limiterErrors *prometheus.CounterVec
	authFailures  prometheus.Counter
}

// NewMetrics registers the collectors on reg, or on a new registry if reg is nil.
func NewMetrics(reg *prometheus.Registry) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	m := &Metrics{
		registry: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paykit_http_requests_total", Help: "HTTP requests by route and status.",
		}, []string{"method", "route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "paykit_http_request_duration_seconds", Help: "HTTP request latency.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"method", "route"}),
		idem: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paykit_idempotency_keys_total", Help: "Idempotency-Key outcomes (acquired, replay, in_flight, mismatch).",
		}, []string{"outcome"}),
	}
	m.inbox = inbox.NewMetrics(reg)
	m.checkout = checkout.NewMetrics(reg)
	m.rateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paykit_rate_limited_total",
		Help: "Requests answered 429, by tenant and limit (checkout_tokens, checkouts, refunds, redeliveries, cancels, open_checkout_tokens; auth with no tenant: a source address over its budget of unknown API keys when the lookups allowed such sources are spent too).",
	}, []string{"tenant", "route"})
	m.limiterErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paykit_rate_limiter_errors_total", Help: "Requests let through unlimited because the rate limiter (Redis) did not answer, by route.",
	}, []string{"route"})
	m.authFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "paykit_auth_failures_total", Help: "Requests whose API key is unknown, revoked or expired.",
	})
	reg.MustRegister(m.requests, m.latency, m.idem,
		m.rateLimited, m.limiterErrors, m.authFailures)
	for _, r := range []string{RouteCheckoutTokens, RouteCheckouts, RouteRefunds, RouteRedeliveries, RouteCancels} {
		m.limiterErrors.WithLabelValues(r)
	}
	// The outcomes alerts and dashboards read exist from the start at 0, so a rate over
	// them counts the first one too.
	return m
}

func (m *Metrics) observeHTTP(method, route string, status int, d time.Duration) {
	m.requests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(method, route).Observe(d.Seconds())
}
