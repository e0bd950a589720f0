package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/paykit/paykit/activities"
)

func maintenanceOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		Summary:             summary,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
			MaximumAttempts:    5,
		},
	})
}

// SweeperWorkflow runs on a schedule. It re-drives payments still pending in MySQL whose
// workflow is not running, grants the benefit of paid payments whose workflow lost it,
// and redelivers the merchant webhooks that are due, with a per-event backoff.
func SweeperWorkflow(ctx workflow.Context, in SweepInput) (activities.SweepResult, error) {
	var res activities.SweepResult
	opts := activities.SweepOptions{GrantGrace: in.GrantGrace, GrantLookback: in.GrantLookback}
	// The schedule hands each run the result of the last that completed: the sweep goes
	// on where that one stopped in its walk of the pending payments. The result is in the
	// run's start event, so a replay reads the same cursor; a run with none (the first, or
	// one started before the cursor) starts from the oldest.
	if workflow.HasLastCompletionResult(ctx) {
		var last activities.SweepResult
		if err := workflow.GetLastCompletionResult(ctx, &last); err != nil {
			workflow.GetLogger(ctx).Warn("sweeper: last run's result unreadable; sweeping from the oldest pending payment", "err", err)
		} else {
			opts.After = last.Cursor
		}
	}
	actx := maintenanceOptions(ctx, "sweep stale pending payments")
	// The sweep beats every second whatever it waits on, so a worker that died mid-sweep
	// is noticed in seconds rather than at the 5-minute timeout, and the schedule's next
	// sweeps, skipped while this one runs, are not held up; the events it had claimed are
	// due again when their lease ends.
	actx = workflow.WithHeartbeatTimeout(actx, activities.LoopHeartbeatTimeout)
	err := workflow.ExecuteActivity(actx, a.SweepStalePayments, in.StaleAfter, in.Limit, opts).Get(ctx, &res)
	return res, err
}

// PurgeRetentionChangeID gates the purge of delivered events and resolved anomalies in
// PurgeIdempotencyKeysWorkflow: a run started before it replays without them.
const PurgeRetentionChangeID = "purge-retention"

// PurgeIdempotencyKeysWorkflow runs on a schedule and deletes expired Idempotency-Keys,
// then the delivered merchant events and the resolved anomalies past their retention.
// It returns how many keys it deleted.
func PurgeIdempotencyKeysWorkflow(ctx workflow.Context) (int64, error) {
	var n int64
	err := workflow.ExecuteActivity(maintenanceOptions(ctx, "purge expired idempotency keys"),
		a.PurgeIdempotencyKeys).Get(ctx, &n)
	if err != nil {
		return n, err
	}
	if workflow.GetVersion(ctx, PurgeRetentionChangeID, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return n, nil
	}
	// Each purge heartbeats after each batch: a worker that died mid-purge is noticed in
	// a minute, and the batches it finished stay done.
	// One purge failing does not keep the other from running; the run reports the first
	// failure, and the next scheduled run tries both again.
	actx := workflow.WithHeartbeatTimeout(maintenanceOptions(ctx, "purge delivered events past their retention"), time.Minute)
	eventsErr := workflow.ExecuteActivity(actx, a.PurgeDeliveredEvents).Get(ctx, nil)
	actx = workflow.WithHeartbeatTimeout(maintenanceOptions(ctx, "purge anomalies resolved past their retention"), time.Minute)
	anomaliesErr := workflow.ExecuteActivity(actx, a.PurgeResolvedAnomalies).Get(ctx, nil)
	if eventsErr != nil {
		return n, eventsErr
	}
	return n, anomaliesErr
}
