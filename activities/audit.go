package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/paykit/paykit/audit"
)

// AuditRequest is the window and thresholds of one scheduled audit. Zero thresholds take
// the auditor's defaults.
type AuditRequest struct {
	Since        time.Time     `json:"since"`
	Until        time.Time     `json:"until"`
	GrantSLA     time.Duration `json:"grant_sla,omitempty"`
	WebhookSLA   time.Duration `json:"webhook_sla,omitempty"`
	PendingGrace time.Duration `json:"pending_grace,omitempty"`
}

// AuditResult counts what one audit saw and found.
type AuditResult struct {
	Payments int            `json:"payments"`
	Queried  int            `json:"queried"`
	InFlight int            `json:"in_flight"`
	Findings int            `json:"findings"`
	ByKind   map[string]int `json:"by_kind,omitempty"`
}

// Audit runs the invariant audit over the window and records every finding as an
// anomaly of kind audit_<kind>. The anomaly table keeps one row per (kind, payment_no),
// so a retried or repeated audit records nothing twice. Once all are recorded, each
// finding is logged at error level and counted.
func (a *Activities) Audit(ctx context.Context, req AuditRequest) (AuditResult, error) {
	if a.Auditor == nil {
		return AuditResult{}, temporal.NewNonRetryableApplicationError("audit: the worker has no auditor", ErrTypeInvalid, nil)
	}
	rep, err := a.Auditor.Run(ctx, audit.Params{
		Since: req.Since, Until: req.Until, GrantSLA: req.GrantSLA, WebhookSLA: req.WebhookSLA, PendingGrace: req.PendingGrace,
		Progress: func(p audit.Progress) { activity.RecordHeartbeat(ctx, p) },
	})
	if err != nil {
		return AuditResult{}, classify("audit", err)
	}
	for _, f := range rep.Findings {
		an := f.Anomaly()
		an.CreatedAt = a.now()
		if err := a.Store.RecordAnomaly(ctx, an); err != nil {
			return AuditResult{}, fmt.Errorf("audit: %w", err)
		}
	}
	for _, f := range rep.Findings {
		a.Metrics.auditFinding(f.Kind)
		a.Metrics.anomaly(audit.AnomalyPrefix + f.Kind)
		a.log().ErrorContext(ctx, "audit finding: operator action required", "kind", f.Kind, "tenant_id", f.TenantID,
			"order_id", f.OrderID, "payment_no", f.PaymentNo, "status", f.Status.String(), "trade_no", f.TradeNo,
			"amount_fen", int64(f.AmountFen), "alipay_amount_fen", int64(f.AlipayAmountFen), "detail", f.Detail)
	}
	return AuditResult{Payments: rep.Payments, Queried: rep.Queried, InFlight: rep.InFlight,
		Findings: len(rep.Findings), ByKind: rep.Counts()}, nil
}
