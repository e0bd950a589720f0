package activities

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paykit/paykit/audit"
	"github.com/paykit/paykit/payment"
)

// Metrics are the business counters the activities keep. A nil *Metrics counts nothing.
type Metrics struct {
	transitions *prometheus.CounterVec
	refunds     *prometheus.CounterVec
	webhooks    *prometheus.CounterVec
	anomalies   *prometheus.CounterVec
	redriven    prometheus.Counter
	grants      prometheus.Counter
	audit       *prometheus.CounterVec
	repaired    prometheus.Counter
	dead        prometheus.Counter
	reconciler  *prometheus.CounterVec
}

// NewMetrics registers the activity counters on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paykit_payment_transitions_total",
			Help: "Payment state changes committed, by new status (only the compare-and-set winner counts).",
		}, []string{"status"}),
		refunds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paykit_refund_transitions_total",
			Help: "Refunds that ended, by final status (only the compare-and-set winner counts).",
		}, []string{"status"}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paykit_webhook_deliveries_total", Help: "Merchant webhook delivery attempts by outcome.",
		}, []string{"outcome"}),
		anomalies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paykit_payment_anomalies_recorded_total", Help: "Cases recorded for an operator, by kind.",
		}, []string{"kind"}),
		redriven: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paykit_sweeper_redriven_total", Help: "Pending payments re-driven by the sweeper.",
		}),
		grants: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paykit_benefit_grants_total", Help: "Benefit grants created (repeats are not counted).",
		}),
		audit: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paykit_audit_findings_total",
			Help: "Findings of the scheduled audit, by kind; each run counts every finding it makes, old or new.",
		}, []string{"kind"}),
		repaired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paykit_sweeper_grants_repaired_total",
			Help: "Benefit grants of paid payments that their workflow lost, created by the sweeper (also counted in paykit_benefit_grants_total).",
		}),
		dead: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paykit_webhook_events_dead_total",
			Help: "Outbox events given up on after their last allowed delivery attempt; each needs an operator.",
		}),
		reconciler: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paykit_reconciler_queries_total",
			Help: "Queries at Alipay made by the scheduled reconciler, by answer: paid (its run is woken), unpaid, or failed; unclaimable counts due payments it skipped, asking nothing, because their claim could not be written.",
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.transitions, m.refunds, m.webhooks, m.anomalies, m.redriven, m.grants, m.repaired, m.dead, m.audit, m.reconciler)
	// The label values alerts and dashboards read exist from the start at 0, so a rate
	// over them counts the first one too.
	for _, s := range []payment.Status{payment.StatusPaid, payment.StatusClosed, payment.StatusFailed} {
		m.transitions.WithLabelValues(s.String())
	}
	for _, s := range []payment.RefundStatus{payment.RefundSucceeded, payment.RefundFailed} {
		m.refunds.WithLabelValues(s.String())
	}
	for _, o := range []string{"delivered", "rejected", "unreachable", "refused"} {
		m.webhooks.WithLabelValues(o)
	}
	for _, k := range AnomalyKinds() {
		m.anomalies.WithLabelValues(k)
	}
	for _, k := range audit.Kinds() {
		m.audit.WithLabelValues(k)
	}
	for _, o := range []string{"paid", "unpaid", "failed", "unclaimable"} {
		m.reconciler.WithLabelValues(o)
	}
	return m
}

// AnomalyKinds are the kinds of anomaly a worker records: the payment and refund
// workflows', the audit's (audit_<kind>) and the statement reconciliation's.
func AnomalyKinds() []string {
	kinds := []string{payment.AnomalyPaidAfterClose, payment.AnomalyUnverifiedSignal, "amount_mismatch", "refund_amount_mismatch", "refund_succeeded_after_fail", "refund_unconfirmed", "refund_stuck"}
	for _, k := range audit.Kinds() {
		kinds = append(kinds, audit.AnomalyPrefix+k)
	}
	return append(kinds, statementKinds...)
}

func (m *Metrics) transition(status string) {
	if m != nil {
		m.transitions.WithLabelValues(status).Inc()
	}
}

func (m *Metrics) refund(status payment.RefundStatus) {
	if m != nil {
		m.refunds.WithLabelValues(status.String()).Inc()
	}
}

func (m *Metrics) webhook(outcome string) {
	if m != nil {
		m.webhooks.WithLabelValues(outcome).Inc()
	}
}

func (m *Metrics) anomaly(kind string) { m.anomalyN(kind, 1) }

func (m *Metrics) anomalyN(kind string, n int) {
	if m != nil && n > 0 {
		m.anomalies.WithLabelValues(kind).Add(float64(n))
	}
}

func (m *Metrics) redrive() {
	if m != nil {
		m.redriven.Inc()
	}
}

func (m *Metrics) grant() {
	if m != nil {
		m.grants.Inc()
	}
}

func (m *Metrics) auditFinding(kind string) {
	if m != nil {
		m.audit.WithLabelValues(kind).Inc()
	}
}

func (m *Metrics) grantRepaired() {
	if m != nil {
		m.repaired.Inc()
	}
}

func (m *Metrics) eventDead() {
	if m != nil {
		m.dead.Inc()
	}
}

func (m *Metrics) reconcilerQuery(outcome string) {
	if m != nil {
		m.reconciler.WithLabelValues(outcome).Inc()
	}
}
