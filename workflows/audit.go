package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/audit"
)

// DefaultAuditWindow is the window of an AuditInput that sets none: a day, the interval
// the audit schedule runs at by default.
const DefaultAuditWindow = 24 * time.Hour

// saScheduledStart is set by Temporal on every run a schedule starts: the time the run
// was due, however late it actually started.
var saScheduledStart = temporal.NewSearchAttributeKeyTime("TemporalScheduledStartTime")

// AuditInput configures one scheduled audit. The run audits what changed from its scope's
// watermark (the end of the last window audited to the end) to Lag before it was due,
// Window at a time, and moves the watermark after each window: a run that was skipped,
// paused or failed leaves nothing unaudited, the next one catches up. With no watermark
// yet, the run audits the one window that ends Lag before it was due. Lag keeps every
// change past its SLAs when it is audited.
type AuditInput struct {
	Window time.Duration `json:"window"`
	Lag    time.Duration `json:"lag"`
	// TenantID, if set, audits that tenant's payments only.
	TenantID string `json:"tenant_id,omitempty"`
	// Scope names the watermark; empty is "paykit-audit-" + the task queue (the audit
	// schedule's id), followed by "/" + TenantID if it is set.
	Scope string `json:"scope,omitempty"`
	// Zero thresholds take the auditor's defaults.
	GrantSLA     time.Duration `json:"grant_sla,omitempty"`
	WebhookSLA   time.Duration `json:"webhook_sla,omitempty"`
	PendingGrace time.Duration `json:"pending_grace,omitempty"`
}

// MaxAuditWindowsPerRun bounds the windows one run catches up (and its history); the
// next run goes on from the watermark.
const MaxAuditWindowsPerRun = 60

// AuditWorkflow runs on a schedule. It audits each window against Alipay in a
// heartbeating activity, which records every finding as an anomaly as it goes and then
// moves the watermark.
func AuditWorkflow(ctx workflow.Context, in AuditInput) (activities.AuditResult, error) {
	if in.Window <= 0 {
		in.Window = DefaultAuditWindow
	}
	in.Window = min(in.Window, audit.MaxWindow)
	info := workflow.GetInfo(ctx)
	// The due time rather than the clock: a run that starts late, or is retried, still
	// audits up to its own due time. A run started by hand has no due time.
	due := info.WorkflowStartTime
	if t, ok := workflow.GetTypedSearchAttributes(ctx).GetTime(saScheduledStart); ok && !t.IsZero() {
		due = t
	}
	until := due.Add(-in.Lag)
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// A day of payments is one Alipay query each, eight at a time; an attempt that
		// runs out resumes after its last recorded page.
		StartToCloseTimeout: 2 * time.Hour,
		HeartbeatTimeout:    5 * time.Minute,
		Summary:             "audit payments against Alipay",
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Minute,
			BackoffCoefficient:     2,
			MaximumInterval:        10 * time.Minute,
			MaximumAttempts:        3,
			NonRetryableErrorTypes: []string{activities.ErrTypeAuditWatermarkMoved, activities.ErrTypeInvalid},
		},
	})
	if workflow.GetVersion(ctx, "audit-watermark", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		// Runs started before the watermark audited one window of creations.
		req := activities.AuditRequest{
			Since: until.Add(-in.Window), Until: until,
			GrantSLA: in.GrantSLA, WebhookSLA: in.WebhookSLA, PendingGrace: in.PendingGrace,
		}
		var res activities.AuditResult
		err := workflow.ExecuteActivity(ctx, a.Audit, req).Get(ctx, &res)
		return res, err
	}

	scope := in.Scope
	if scope == "" {
		scope = "paykit-audit-" + info.TaskQueueName
		if in.TenantID != "" {
			scope += "/" + in.TenantID
		}
	}
	var mark time.Time
	wctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		Summary:             "read the audit watermark",
		RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: time.Minute},
	})
	if err := workflow.ExecuteActivity(wctx, a.AuditWatermark, scope).Get(ctx, &mark); err != nil {
		return activities.AuditResult{}, err
	}
	since := mark
	if since.IsZero() {
		since = until.Add(-in.Window)
	}
	total := activities.AuditResult{AuditedUntil: mark}
	for range MaxAuditWindowsPerRun {
		if !since.Before(until) {
			break
		}
		end := since.Add(in.Window)
		if end.After(until) {
			end = until
		}
		req := activities.AuditRequest{
			Since: since, Until: end, TenantID: in.TenantID, Scope: scope, WatermarkFrom: mark,
			GrantSLA: in.GrantSLA, WebhookSLA: in.WebhookSLA, PendingGrace: in.PendingGrace,
		}
		var res activities.AuditResult
		if err := workflow.ExecuteActivity(ctx, a.Audit, req).Get(ctx, &res); err != nil {
			return total, err
		}
		total.Add(res)
		mark, since = end, end
	}
	if workflow.GetVersion(ctx, "audit-recheck", workflow.DefaultVersion, 1) == 1 {
		// The payments an earlier window could not verify, now behind the watermark.
		rctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: 10 * time.Minute,
			Summary:             "check again the payments the audit could not verify",
			RetryPolicy: &temporal.RetryPolicy{
				InitialInterval: time.Minute, BackoffCoefficient: 2, MaximumInterval: 10 * time.Minute, MaximumAttempts: 3,
				NonRetryableErrorTypes: []string{activities.ErrTypeInvalid},
			},
		})
		var res activities.AuditRecheckResult
		if err := workflow.ExecuteActivity(rctx, a.AuditRecheck, activities.AuditRecheckRequest{
			Scope: scope, GrantSLA: in.GrantSLA, WebhookSLA: in.WebhookSLA, PendingGrace: in.PendingGrace,
		}).Get(ctx, &res); err != nil {
			return total, err
		}
		total.Rechecked, total.RecheckGaveUp = res.Checked, res.GaveUp
		total.Findings += res.Findings
	}
	return total, nil
}
