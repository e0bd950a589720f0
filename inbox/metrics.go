package inbox

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paykit/paykit/payment"
)

// Metrics are the inbox's Prometheus collectors.
type Metrics struct {
	// callbacks counts Alipay's callbacks by outcome, wechatpayCallbacks WeChat Pay's
	// (its signature probes among the unverified), apart so that neither channel's
	// alerts read the other's traffic.
	callbacks          *prometheus.CounterVec
	wechatpayCallbacks *prometheus.CounterVec
	// unverifiedBytes counts the bytes posted in unverified callbacks, of which only a
	// prefix is stored.
	unverifiedBytes prometheus.Counter
	anomalies       prometheus.Counter
	// dispatches counts the hand-overs of notifications by outcome, settled the
	// notifications the sweep saw settled by their payment being PAID.
	dispatches *prometheus.CounterVec
	settled    prometheus.Counter
}

// NewMetrics registers the collectors on reg, or on none if reg is nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		callbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paykit_alipay_callbacks_total", Help: "Alipay notification outcomes.",
		}, []string{"outcome"}),
		wechatpayCallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paykit_wechatpay_callbacks_total", Help: "WeChat Pay notification outcomes (unverified includes its signature probes).",
		}, []string{"outcome"}),
		unverifiedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paykit_alipay_unverified_callback_bytes_total",
			Help: "Bytes of the bodies of Alipay callbacks whose signature did not verify (only a prefix of each is stored).",
		}),
		anomalies: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paykit_payment_anomalies_total", Help: "Cases recorded for an operator, such as money received for a closed payment.",
		}),
		dispatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paykit_notification_dispatches_total",
			Help: "Hand-overs of acknowledged Alipay notifications to their payments, by outcome (retry: MySQL or Temporal failed, handed over again later).",
		}, []string{"outcome"}),
		settled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paykit_notifications_settled_paid_total", Help: "Acknowledged Alipay notifications the inbox sweep saw settled by their payment being PAID.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.callbacks, m.wechatpayCallbacks, m.unverifiedBytes, m.anomalies, m.dispatches, m.settled)
	}
	// The outcomes alerts and dashboards read exist from the start at 0, so a rate over
	// them counts the first one too.
	for _, o := range callbackOutcomes {
		m.callbacks.WithLabelValues(o)
		m.wechatpayCallbacks.WithLabelValues(o)
	}
	for _, o := range dispatchOutcomes {
		m.dispatches.WithLabelValues(o)
	}
	return m
}

// callbackOutcomes are the outcomes of paykit_alipay_callbacks_total, the answers to
// Alipay: those answered failure before or while recording, then accepted (recorded and
// answered success) and duplicate (recorded before, answered success).
var callbackOutcomes = []string{"unreadable", "malformed", "unverified", "store_unavailable", "accepted", "duplicate"}

// callbacksOf is the callback counter of channel ch.
func (m *Metrics) callbacksOf(ch payment.Channel) *prometheus.CounterVec {
	return map[payment.Channel]*prometheus.CounterVec{
		payment.ChannelAlipay: m.callbacks, payment.ChannelWechatPay: m.wechatpayCallbacks,
	}[ch.OrAlipay()]
}

// dispatchOutcomes are the outcomes of paykit_notification_dispatches_total.
var dispatchOutcomes = []string{
	"retry", "queue_full", outcomeSignalled, outcomeRedriven, outcomeAlreadyPaid, outcomeIgnored, outcomeAnomaly, "rejected",
	outcomeRefundFinal, outcomeRefundStarted, outcomeRefundUnknown,
}
