package checkout

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paykit/paykit/payment"
)

// Metrics are the checkout's Prometheus collectors.
type Metrics struct {
	checkouts *prometheus.CounterVec
	// paths counts answered checkouts by how they were answered.
	paths *prometheus.CounterVec
}

// NewMetrics registers the collectors on reg, or on none if reg is nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		checkouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paykit_checkouts_total", Help: "Checkout outcomes.",
		}, []string{"outcome"}),
		paths: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paykit_checkout_paths_total",
			Help: "Checkouts answered, by path: direct (the API's own transaction and a workflow start) or update (the workflow's checkout update: QR, a run of the order already running, or the direct path off).",
		}, []string{"path"}),
	}
	if reg != nil {
		reg.MustRegister(m.checkouts, m.paths)
	}
	// The outcomes alerts and dashboards read exist from the start at 0, so a rate over
	// them counts the first one too.
	for _, o := range checkoutOutcomes {
		m.checkouts.WithLabelValues(o)
	}
	for _, p := range []string{pathDirect, pathUpdate} {
		m.paths.WithLabelValues(p)
	}
	return m
}

// checkoutOutcomes are the outcomes of paykit_checkouts_total: "ok", the refusals before
// the workflow, and the error codes a checkout through it can end with.
var checkoutOutcomes = []string{
	"ok", "token_reused", payment.EORDERPAID, payment.ECONFLICT, payment.ECHANNEL, payment.EFINISHING,
	payment.EINVALID, payment.EUNAVAILABLE, payment.EINTERNAL,
}
