package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/paykit/paykit/activities"
)

// RedeliverEventWorkflowName is the registered name of RedeliverEventWorkflow.
const RedeliverEventWorkflowName = "RedeliverEventWorkflow"

// RedeliverEventWorkflow makes one delivery attempt of an outbox event that a merchant
// asked for through the API. Its workflow id is redeliver:{tenant}:{event_id}, so
// concurrent requests for one event share one attempt. It tries once: the merchant asked
// for an attempt now, and the outbox's own retries carry on after a failure.
func RedeliverEventWorkflow(ctx workflow.Context, in activities.RedeliverInput) (activities.RedeliverResult, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// One webhook request and the writes around it (activities' default timeout 10s).
		StartToCloseTimeout: 30 * time.Second,
		Summary:             "redeliver merchant webhook on request",
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var res activities.RedeliverResult
	err := workflow.ExecuteActivity(actx, a.RedeliverEvent, in).Get(ctx, &res)
	return res, err
}
