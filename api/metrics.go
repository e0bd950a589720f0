package api

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/paykit/paykit/payment"
)

// Metrics are the API's Prometheus collectors.
type Metrics struct {
	registry  *prometheus.Registry
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	checkouts *prometheus.CounterVec
	// checkoutPaths counts answered checkouts by how they were answered.
	checkoutPaths *prometheus.CounterVec
	callbacks     *prometheus.CounterVec
	// unverifiedBytes counts the bytes posted in unverified callbacks, of which only a
	// prefix is stored.
	unverifiedBytes prometheus.Counter
	idem            *prometheus.CounterVec
	anomalies       prometheus.Counter
	// dispatches counts the inbox's hand-overs of notifications by outcome, settled the
	// notifications the sweep saw settled by their payment being PAID.
	dispatches *prometheus.CounterVec
	settled    prometheus.Counter
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
		checkouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paykit_checkouts_total", Help: "Checkout outcomes.",
		}, []string{"outcome"}),
		checkoutPaths: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paykit_checkout_paths_total",
			Help: "Checkouts answered, by path: direct (the API's own transaction and a workflow start) or update (the workflow's checkout update: QR, a run of the order already running, or the direct path off).",
		}, []string{"path"}),
		callbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paykit_alipay_callbacks_total", Help: "Alipay notification outcomes.",
		}, []string{"outcome"}),
		unverifiedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paykit_alipay_unverified_callback_bytes_total",
			Help: "Bytes of the bodies of Alipay callbacks whose signature did not verify (only a prefix of each is stored).",
		}),
		idem: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paykit_idempotency_keys_total", Help: "Idempotency-Key outcomes (acquired, replay, in_flight, mismatch).",
		}, []string{"outcome"}),
		anomalies: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paykit_payment_anomalies_total", Help: "Cases recorded for an operator, such as money received for a closed payment.",
		}),
	}
	m.dispatches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paykit_notification_dispatches_total",
		Help: "Hand-overs of acknowledged Alipay notifications to their payments, by outcome (retry: MySQL or Temporal failed, handed over again later).",
	}, []string{"outcome"})
	m.settled = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "paykit_notifications_settled_paid_total", Help: "Acknowledged Alipay notifications the inbox sweep saw settled by their payment being PAID.",
	})
	m.rateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paykit_rate_limited_total",
		Help: "Requests answered 429, by tenant and limit (checkout_tokens, checkouts, refunds, redeliveries, open_checkout_tokens; auth with no tenant: a source address presenting too many unknown API keys).",
	}, []string{"tenant", "route"})
	m.limiterErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paykit_rate_limiter_errors_total", Help: "Requests let through unlimited because the rate limiter (Redis) did not answer, by route.",
	}, []string{"route"})
	m.authFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "paykit_auth_failures_total", Help: "Requests whose API key is unknown, revoked or expired.",
	})
	reg.MustRegister(m.requests, m.latency, m.checkouts, m.checkoutPaths, m.callbacks, m.unverifiedBytes, m.idem, m.anomalies, m.dispatches, m.settled,
		m.rateLimited, m.limiterErrors, m.authFailures)
	for _, r := range []string{RouteCheckoutTokens, RouteCheckouts, RouteRefunds, RouteRedeliveries} {
		m.limiterErrors.WithLabelValues(r)
	}
	// The outcomes alerts and dashboards read exist from the start at 0, so a rate over
	// them counts the first one too.
	for _, o := range checkoutOutcomes {
		m.checkouts.WithLabelValues(o)
	}
	for _, p := range []string{"direct", "update"} {
		m.checkoutPaths.WithLabelValues(p)
	}
	for _, o := range callbackOutcomes {
		m.callbacks.WithLabelValues(o)
	}
	for _, o := range dispatchOutcomes {
		m.dispatches.WithLabelValues(o)
	}
	return m
}

// checkoutOutcomes are the outcomes of paykit_checkouts_total: "ok", the refusals before
// the workflow, and the error codes a checkout through it can end with.
var checkoutOutcomes = []string{
	"ok", "token_reused", payment.EORDERPAID, payment.ECONFLICT, payment.ECHANNEL, payment.EFINISHING,
	payment.EINVALID, payment.EUNAVAILABLE, payment.EINTERNAL,
}

// callbackOutcomes are the outcomes of paykit_alipay_callbacks_total, the answers to
// Alipay: those answered failure before or while recording, then accepted (recorded and
// answered success) and duplicate (recorded before, answered success).
var callbackOutcomes = []string{"unreadable", "malformed", "unverified", "store_unavailable", "accepted", "duplicate"}

// dispatchOutcomes are the outcomes of paykit_notification_dispatches_total.
var dispatchOutcomes = []string{
	"retry", "queue_full", outcomeSignalled, outcomeRedriven, outcomeAlreadyPaid, outcomeIgnored, outcomeAnomaly, "rejected",
	outcomeRefundFinal, outcomeRefundStarted, outcomeRefundUnknown,
}

func (m *Metrics) observeHTTP(method, route string, status int, d time.Duration) {
	m.requests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(method, route).Observe(d.Seconds())
}
