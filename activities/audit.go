package activities

import (
	"context"
	"fmt"
	"maps"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/paykit/paykit/audit"
)

// ErrTypeAuditWatermarkMoved is the non-retryable error of an audit whose watermark is
// no longer where the run read it: another run of the same scope audited meanwhile.
const ErrTypeAuditWatermarkMoved = "AuditWatermarkMoved"

// AuditWatermarks keeps where each scheduled audit stands; *mysql.Store implements it.
type AuditWatermarks interface {
	// AuditWatermark returns the end of the last window scope audited; zero if none.
	AuditWatermark(ctx context.Context, scope string) (time.Time, error)
	// AdvanceAuditWatermark moves it from from (zero: none yet) to to, and reports
	// false if it stood elsewhere. A watermark already at to counts as moved.
	AdvanceAuditWatermark(ctx context.Context, scope string, from, to time.Time) (bool, error)
}

// AuditRetries keeps the payments a scheduled audit could not verify; *mysql.Store
// implements it.
type AuditRetries interface {
	AddAuditRetry(ctx context.Context, scope, paymentNo, detail string, next time.Time) error
	DueAuditRetries(ctx context.Context, scope string, now time.Time, limit int) ([]audit.Retry, error)
	RescheduleAuditRetry(ctx context.Context, scope string, r audit.Retry, next time.Time, detail string) error
	DeleteAuditRetry(ctx context.Context, scope, paymentNo string) error
}

// AuditRequest is the window and thresholds of one scheduled audit. Zero thresholds take
// the auditor's defaults.
type AuditRequest struct {
	Since        time.Time     `json:"since"`
	Until        time.Time     `json:"until"`
	TenantID     string        `json:"tenant_id,omitempty"`
	GrantSLA     time.Duration `json:"grant_sla,omitempty"`
	WebhookSLA   time.Duration `json:"webhook_sla,omitempty"`
	PendingGrace time.Duration `json:"pending_grace,omitempty"`
	// Scope, if set, names the watermark the audit moves from WatermarkFrom (zero: it
	// has none yet) to Until once the whole window is recorded.
	Scope         string    `json:"scope,omitempty"`
	WatermarkFrom time.Time `json:"watermark_from,omitzero"`
}

// AuditResult counts what one audit saw and found.
type AuditResult struct {
	Payments int            `json:"payments"`
	Queried  int            `json:"queried"`
	InFlight int            `json:"in_flight"`
	Findings int            `json:"findings"`
	ByKind   map[string]int `json:"by_kind,omitempty"`
	// ChangedWhileAudited counts payments whose findings were dropped because they
	// changed while audited (they are audited again in the window of that change).
	ChangedWhileAudited int `json:"changed_while_audited,omitempty"`
	// Windows counts the windows audited, AuditedUntil is where the last one ended: the
	// watermark after the run.
	Windows      int       `json:"windows,omitempty"`
	AuditedUntil time.Time `json:"audited_until,omitzero"`
	// Rechecked counts the payments an earlier window could not verify that the run
	// checked again; RecheckGaveUp those it gave up on (AuditRecheck).
	Rechecked     int `json:"rechecked,omitempty"`
	RecheckGaveUp int `json:"recheck_gave_up,omitempty"`
}

// Add adds the counts of another window's result.
func (r *AuditResult) Add(o AuditResult) {
	r.Payments += o.Payments
	r.Queried += o.Queried
	r.InFlight += o.InFlight
	r.Findings += o.Findings
	r.ChangedWhileAudited += o.ChangedWhileAudited
	r.Windows += o.Windows
	if o.AuditedUntil.After(r.AuditedUntil) {
		r.AuditedUntil = o.AuditedUntil
	}
	for k, n := range o.ByKind {
		if r.ByKind == nil {
			r.ByKind = map[string]int{}
		}
		r.ByKind[k] += n
	}
}

// auditHeartbeat is what a heartbeat of the Audit activity carries: where the run
// stands, and the counts of the pages already recorded, so that a retried attempt
// resumes after them instead of starting the window over.
type auditHeartbeat struct {
	Cursor audit.Cursor `json:"cursor"`
	Done   AuditResult  `json:"done"`
}

// AuditWatermark returns the end of the last window the scheduled audit of scope
// completed; zero if it never completed one.
func (a *Activities) AuditWatermark(ctx context.Context, scope string) (time.Time, error) {
	if a.Watermarks == nil {
		return time.Time{}, temporal.NewNonRetryableApplicationError("audit: the worker has no watermark store", ErrTypeInvalid, nil)
	}
	at, err := a.Watermarks.AuditWatermark(ctx, scope)
	if err != nil {
		return time.Time{}, fmt.Errorf("audit: %w", err)
	}
	return at, nil
}

// Audit runs the invariant audit over the window and records every finding as an
// anomaly of kind audit_<kind>, page by page as they are found: a window too large for
// one attempt keeps what it found, and a retried attempt resumes after the last page it
// heartbeat. The anomaly table keeps one row per (kind, payment_no, subject), and a
// finding's subject is what it is about (a refund's out_request_no, or nothing for the
// payment as a whole), never the run, so a retried or repeated audit records nothing twice. With a Scope, the watermark moves to Until once
// the whole window is recorded.
func (a *Activities) Audit(ctx context.Context, req AuditRequest) (AuditResult, error) {
	if a.Auditor == nil {
		return AuditResult{}, temporal.NewNonRetryableApplicationError("audit: the worker has no auditor", ErrTypeInvalid, nil)
	}
	if req.Scope != "" && a.Watermarks == nil {
		return AuditResult{}, temporal.NewNonRetryableApplicationError("audit: the worker has no watermark store", ErrTypeInvalid, nil)
	}
	hb := a.auditProgress(ctx)
	done := hb.Done
	// tally is what the heartbeat says is recorded: the earlier attempts' pages and this
	// one's, each counted once the page is.
	tally := done
	tally.ByKind = maps.Clone(done.ByKind)
	record := func(ctx context.Context, fs []audit.Finding) error {
		if err := a.recordFindings(ctx, req.Scope, fs); err != nil {
			return err
		}
		for _, f := range fs {
			tally.Add(AuditResult{Findings: 1, ByKind: map[string]int{f.Kind: 1}})
			a.reportAuditFinding(ctx, f)
		}
		return nil
	}
	rep, err := a.Auditor.Run(ctx, audit.Params{
		Since: req.Since, Until: req.Until, TenantID: req.TenantID,
		GrantSLA: req.GrantSLA, WebhookSLA: req.WebhookSLA, PendingGrace: req.PendingGrace,
		After: hb.Cursor, Record: record,
		Progress: func(p audit.Progress) {
			hb := auditHeartbeat{Cursor: p.Cursor, Done: tally}
			hb.Done.Payments = done.Payments + p.Payments
			activity.RecordHeartbeat(ctx, hb)
		},
	})
	res := done
	res.Add(AuditResult{Payments: rep.Payments, Queried: rep.Queried, InFlight: rep.InFlight, Findings: count(rep.ByKind),
		ByKind: maps.Clone(rep.ByKind), ChangedWhileAudited: rep.ChangedWhileAudited})
	if err != nil {
		return res, classify("audit", err)
	}
	res.Windows, res.AuditedUntil = 1, req.Until
	return res, a.advanceWatermark(ctx, req)
}

// auditProgress is the progress the last attempt recorded in its heartbeat, none if it
// recorded none or it cannot be read.
func (a *Activities) auditProgress(ctx context.Context) auditHeartbeat {
	var hb auditHeartbeat
	if !activity.HasHeartbeatDetails(ctx) {
		return hb
	}
	if err := activity.GetHeartbeatDetails(ctx, &hb); err != nil {
		a.log().WarnContext(ctx, "audit: the last attempt's progress is unreadable; auditing the window from its start", "err", err)
		return auditHeartbeat{}
	}
	return hb
}

// recordFindings records each finding as an anomaly, and a scoped audit's unverifiable
// payments as retries, due again after audit.RecheckAfter.
func (a *Activities) recordFindings(ctx context.Context, scope string, fs []audit.Finding) error {
	for _, f := range fs {
		an := f.Anomaly()
		an.CreatedAt = a.now()
		if err := a.Store.RecordAnomaly(ctx, an); err != nil {
			return err
		}
	}
	if scope == "" || a.AuditRetries == nil {
		return nil
	}
	for _, f := range fs {
		if f.Kind != audit.KindUnverifiable {
			continue
		}
		if err := a.AuditRetries.AddAuditRetry(ctx, scope, f.PaymentNo, f.Detail, a.now().Add(audit.RecheckAfter(0))); err != nil {
			return err
		}
	}
	return nil
}

// advanceWatermark moves a scoped audit's watermark from where the window started to its
// end; another audit of the scope that moved it meanwhile is a refusal, not retried.
func (a *Activities) advanceWatermark(ctx context.Context, req AuditRequest) error {
	if req.Scope == "" {
		return nil
	}
	moved, err := a.Watermarks.AdvanceAuditWatermark(ctx, req.Scope, req.WatermarkFrom, req.Until)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	if !moved {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"audit: the watermark of %s is no longer at %s: another audit of the scope ran meanwhile",
			req.Scope, req.WatermarkFrom.UTC().Format(time.RFC3339Nano)), ErrTypeAuditWatermarkMoved, nil)
	}
	return nil
}

func count(byKind map[string]int) int {
	n := 0
	for _, c := range byKind {
		n += c
	}
	return n
}

// AuditRecheckRequest names the scheduled audit whose unverifiable payments are checked
// again, with its thresholds.
type AuditRecheckRequest struct {
	Scope        string        `json:"scope"`
	GrantSLA     time.Duration `json:"grant_sla,omitempty"`
	WebhookSLA   time.Duration `json:"webhook_sla,omitempty"`
	PendingGrace time.Duration `json:"pending_grace,omitempty"`
}

// AuditRecheckResult counts what a check again did.
type AuditRecheckResult struct {
	// Checked counts the due payments checked again; Verified those it could check
	// (their findings, if any, recorded); StillUnverifiable those due again later;
	// GaveUp those it stopped checking, each recorded as an anomaly.
	Checked           int `json:"checked"`
	Verified          int `json:"verified"`
	StillUnverifiable int `json:"still_unverifiable"`
	GaveUp            int `json:"gave_up"`
	Findings          int `json:"findings"`
}

// auditRecheckBatch bounds the payments one check again takes.
const auditRecheckBatch = 200

// AuditRecheck checks again the payments the scheduled audit of req.Scope could not
// verify and that are due: a payment it can now check leaves the list, its findings
// recorded as the window's would have been; one still unverifiable is due again later
// (audit.RecheckAfter), and after audit.RecheckFor the audit records that it gave up
// (audit_unverifiable_gave_up) and stops. Retried, it does each step at most once.
func (a *Activities) AuditRecheck(ctx context.Context, req AuditRecheckRequest) (AuditRecheckResult, error) {
	var res AuditRecheckResult
	if a.Auditor == nil || a.AuditRetries == nil || req.Scope == "" {
		return res, temporal.NewNonRetryableApplicationError("audit recheck: the worker has no auditor or no retry store, or no scope", ErrTypeInvalid, nil)
	}
	now := a.now()
	due, err := a.AuditRetries.DueAuditRetries(ctx, req.Scope, now, auditRecheckBatch)
	if err != nil || len(due) == 0 {
		return res, err
	}
	nos := make([]string, len(due))
	for i, r := range due {
		nos[i] = r.PaymentNo
	}
	rep, err := a.Auditor.Recheck(ctx, audit.Params{GrantSLA: req.GrantSLA, WebhookSLA: req.WebhookSLA, PendingGrace: req.PendingGrace}, nos)
	if err != nil {
		return res, classify("audit recheck", err)
	}
	unverifiable, found := splitUnverifiable(rep.Findings)
	for _, f := range found {
		if err := a.recordAuditFinding(ctx, f); err != nil {
			return res, err
		}
		res.Findings++
	}
	for _, r := range due {
		res.Checked++
		detail, still := unverifiable[r.PaymentNo]
		if err := a.settleRetry(ctx, req.Scope, r, detail, still, now, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// splitUnverifiable separates the unverifiable findings, as their detail by payment_no,
// from the others.
func splitUnverifiable(fs []audit.Finding) (map[string]string, []audit.Finding) {
	unverifiable := map[string]string{}
	var found []audit.Finding
	for _, f := range fs {
		if f.Kind == audit.KindUnverifiable {
			unverifiable[f.PaymentNo] = f.Detail
			continue
		}
		found = append(found, f)
	}
	return unverifiable, found
}

// settleRetry ends a retry checked again: verified, given up after audit.RecheckFor, or
// due again later (still unverifiable), each counted in res.
func (a *Activities) settleRetry(ctx context.Context, scope string, r audit.Retry, detail string, still bool, now time.Time, res *AuditRecheckResult) error {
	switch {
	case !still:
		res.Verified++
		return a.AuditRetries.DeleteAuditRetry(ctx, scope, r.PaymentNo)
	case now.Sub(r.FirstAt) >= audit.RecheckFor:
		res.GaveUp++
		if err := a.giveUpAudit(ctx, r, detail); err != nil {
			return err
		}
		return a.AuditRetries.DeleteAuditRetry(ctx, scope, r.PaymentNo)
	default:
		res.StillUnverifiable++
		return a.AuditRetries.RescheduleAuditRetry(ctx, scope, r, now.Add(audit.RecheckAfter(r.Attempts+1)), detail)
	}
}

// recordAuditFinding records one finding as an anomaly, counts and logs it.
func (a *Activities) recordAuditFinding(ctx context.Context, f audit.Finding) error {
	an := f.Anomaly()
	an.CreatedAt = a.now()
	if err := a.Store.RecordAnomaly(ctx, an); err != nil {
		return err
	}
	a.reportAuditFinding(ctx, f)
	return nil
}

// reportAuditFinding counts and logs a recorded finding.
func (a *Activities) reportAuditFinding(ctx context.Context, f audit.Finding) {
	a.Metrics.auditFinding(f.Kind)
	a.Metrics.anomaly(audit.AnomalyPrefix + f.Kind)
	a.log().ErrorContext(ctx, "audit finding: operator action required", "kind", f.Kind, "tenant_id", f.TenantID,
		"order_id", f.OrderID, "payment_no", f.PaymentNo, "status", f.Status.String(), "trade_no", f.TradeNo,
		"amount_fen", int64(f.AmountFen), "alipay_amount_fen", int64(f.AlipayAmountFen), "detail", f.Detail)
}

// giveUpAudit records that the audit stopped checking a payment it could not verify.
func (a *Activities) giveUpAudit(ctx context.Context, r audit.Retry, detail string) error {
	p, err := a.Store.GetPayment(ctx, r.PaymentNo)
	if err != nil {
		return classify("audit give up", err)
	}
	f := audit.Finding{Kind: audit.KindUnverifiableGaveUp, TenantID: p.TenantID, OrderID: p.OrderID, PaymentNo: p.PaymentNo,
		Status: p.Status, TradeNo: p.TradeNo, AmountFen: p.Amount, CreatedAt: p.CreatedAt,
		Detail: fmt.Sprintf("could not be verified for %s since %s (%d checks again); last: %s; check it by hand",
			audit.RecheckFor, r.FirstAt.UTC().Format(time.RFC3339), r.Attempts+1, detail)}
	return a.recordAuditFinding(ctx, f)
}
