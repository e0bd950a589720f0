package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/paykit/paykit/activities"
)

// DefaultAuditWindow is the window of an AuditInput that sets none: a day, the interval
// the audit schedule runs at by default.
const DefaultAuditWindow = 24 * time.Hour

// saScheduledStart is set by Temporal on every run a schedule starts: the time the run
// was due, however late it actually started.
var saScheduledStart = temporal.NewSearchAttributeKeyTime("TemporalScheduledStartTime")

// AuditInput configures one scheduled audit. The window ends Lag before the run was due
// and is Window long, so consecutive runs Window apart cover every payment once, and
// every payment in a window is past its SLAs when it is audited.
type AuditInput struct {
	Window time.Duration `json:"window"`
	Lag    time.Duration `json:"lag"`
	// Zero thresholds take the auditor's defaults.
	GrantSLA     time.Duration `json:"grant_sla,omitempty"`
	WebhookSLA   time.Duration `json:"webhook_sla,omitempty"`
	PendingGrace time.Duration `json:"pending_grace,omitempty"`
}

// AuditWorkflow runs on a schedule. It audits the payments of one window against Alipay
// in a single heartbeating activity, which records every finding as an anomaly.
func AuditWorkflow(ctx workflow.Context, in AuditInput) (activities.AuditResult, error) {
	if in.Window <= 0 {
		in.Window = DefaultAuditWindow
	}
	// The due time rather than the clock: a run that starts late, or is retried, still
	// audits exactly its own window. A run started by hand has no due time.
	due := workflow.GetInfo(ctx).WorkflowStartTime
	if t, ok := workflow.GetTypedSearchAttributes(ctx).GetTime(saScheduledStart); ok && !t.IsZero() {
		due = t
	}
	until := due.Add(-in.Lag)
	req := activities.AuditRequest{
		Since: until.Add(-in.Window), Until: until,
		GrantSLA: in.GrantSLA, WebhookSLA: in.WebhookSLA, PendingGrace: in.PendingGrace,
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// A day of payments is one Alipay query each, eight at a time.
		StartToCloseTimeout: 2 * time.Hour,
		HeartbeatTimeout:    5 * time.Minute,
		Summary:             "audit payments against Alipay",
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Minute,
			BackoffCoefficient: 2,
			MaximumInterval:    10 * time.Minute,
			MaximumAttempts:    3,
		},
	})
	var res activities.AuditResult
	err := workflow.ExecuteActivity(ctx, a.Audit, req).Get(ctx, &res)
	return res, err
}
