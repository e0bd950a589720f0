package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/paykit/paykit/activities"
)

// ReconcilerInput tunes a run of the scheduled reconciler (activities.ReconcileDueInput).
type ReconcilerInput struct {
	Interval time.Duration `json:"interval"`
	Page     int           `json:"page"`
	Parallel int           `json:"parallel"`
	Budget   time.Duration `json:"budget"`
	// Every and Span make the run a loop of passes Every apart for Span from its start
	// (the schedule's period); without them the run is one pass.
	Every time.Duration `json:"every,omitempty"`
	Span  time.Duration `json:"span,omitempty"`
}

// ReconcilerWorkflow is one run of a task queue's scheduled reconciler (its schedule is
// worker.ReconcilerScheduleID): one activity that, every Every for Span, queries Alipay
// about every pending payment whose next query is due and wakes the runs of those Alipay
// says are paid. Its cost follows the queries due, not the payments open: an abandoned
// checkout costs its three queries and no workflow task of its own until its expiry. One
// run makes the passes of a schedule period, so an idle task queue costs Temporal a run
// per period rather than one per pass. A retry of its activity (a worker that stopped or
// died) loops until the same end.
func ReconcilerWorkflow(ctx workflow.Context, in ReconcilerInput) (activities.ReconcileDueResult, error) {
	attempts := int32(3)
	if in.Span > 0 {
		attempts = reconcilerLoopAttempts
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: in.Span + in.Budget + 2*time.Minute,
		// The loop beats every second whatever it waits on: a worker that dies under it
		// is noticed in seconds, and the retry carries on the loop on another worker.
		HeartbeatTimeout: activities.LoopHeartbeatTimeout,
		Summary:          "query the due pending payments at alipay",
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second, MaximumAttempts: attempts,
		},
	})
	next := activities.ReconcileDueInput{Interval: in.Interval, Page: in.Page, Parallel: in.Parallel, Budget: in.Budget}
	if in.Span > 0 && in.Every > 0 {
		next.Every, next.Until = in.Every, workflow.Now(ctx).Add(in.Span)
	}
	var res activities.ReconcileDueResult
	err := workflow.ExecuteActivity(ctx, a.ReconcileDue, next).Get(ctx, &res)
	return res, err
}

// reconcilerLoopAttempts bounds a loop's attempts: a rolling deploy stops a loop's worker
// once per worker replaced, and each stop is an attempt.
const reconcilerLoopAttempts = 8
