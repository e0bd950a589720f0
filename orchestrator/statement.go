package orchestrator

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
)

// StatementPending is the error of a statement run that did not finish within the wait;
// its workflow goes on in Temporal.
type StatementPending struct {
	WorkflowID string
	Wait       time.Duration
	// State is the run's state, if Queried.
	State   workflows.StatementState
	Queried bool
}

func (e *StatementPending) Error() string {
	return fmt.Sprintf("workflow %s did not finish within %s", e.WorkflowID, e.Wait)
}

// ReconcileStatement starts the statement workflow of an app's day, or joins the run of
// that day, asks a run waiting for its bill to ask Alipay again now, and waits at most
// wait for its report; a run still going then is a *StatementPending.
func (o *Orchestrator) ReconcileStatement(ctx context.Context, in workflows.StatementInput, summary string, wait time.Duration) (payment.StatementReport, error) {
	var rep payment.StatementReport
	id := workflows.StatementWorkflowID(in.AppID, in.BillDate)
	run, err := o.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: o.taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:            summary,
	}, workflows.StatementWorkflowName, in)
	if err != nil {
		return rep, fmt.Errorf("start %s: %w", id, err)
	}
	// A run already waiting for its bill asks Alipay again now rather than at its next
	// timer; one that has finished meanwhile is not found, which is fine.
	_ = o.client.SignalWorkflow(ctx, id, run.GetRunID(), workflows.StatementRetrySignal, nil)
	wctx, cancel := context.WithTimeout(ctx, wait)
	err = run.Get(wctx, &rep)
	cancel()
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		pending := &StatementPending{WorkflowID: id, Wait: wait}
		if v, qerr := o.client.QueryWorkflow(ctx, id, "", workflows.StatementQuery); qerr == nil && v.Get(&pending.State) == nil {
			pending.Queried = true
		}
		return rep, pending
	}
	if err != nil {
		return rep, fmt.Errorf("workflow %s: %w", id, err)
	}
	return rep, nil
}
