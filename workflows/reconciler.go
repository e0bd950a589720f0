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
}

// ReconcilerWorkflow is one run of a task queue's scheduled reconciler (its schedule is
// worker.ReconcilerScheduleID): one activity that queries Alipay about every pending
// payment whose next query is due and wakes the runs of those Alipay says are paid. Its
// cost follows the queries due, not the payments open: an abandoned checkout costs its
// three queries and no workflow task of its own until its expiry.
func ReconcilerWorkflow(ctx workflow.Context, in ReconcilerInput) (activities.ReconcileDueResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: in.Budget + 2*time.Minute,
		HeartbeatTimeout:    time.Minute,
		Summary:             "query the due pending payments at alipay",
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second, MaximumAttempts: 3,
		},
	})
	var res activities.ReconcileDueResult
	err := workflow.ExecuteActivity(ctx, a.ReconcileDue, activities.ReconcileDueInput{
		Interval: in.Interval, Page: in.Page, Parallel: in.Parallel, Budget: in.Budget,
	}).Get(ctx, &res)
	return res, err
}
