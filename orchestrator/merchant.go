package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
)

// cancelAttempts bounds how often CancelPayment looks for the payment's run again (it
// continued as new, or had to be started).
const cancelAttempts = 4

// CancelPayment asks the run that holds a pending payment to cancel it. The run then
// takes its close path: it closes the trade at Alipay first and the payment locally once
// Alipay confirms that the trade cannot be paid, or marks it paid if Alipay says it is.
// The cancel targets that run by its run id, so it can never reach a later run of the
// order that holds another payment. A pending payment without a running workflow gets an
// adopting run first, as the sweeper would start. It returns once the run has the request.
func (o *Orchestrator) CancelPayment(ctx context.Context, p payment.Payment) error {
	var lastErr error
	for attempt := range cancelAttempts {
		if attempt > 0 {
			if err := sleep(ctx, time.Duration(attempt)*100*time.Millisecond); err != nil {
				return err
			}
		}
		desc, err := o.client.DescribeWorkflow(ctx, p.WorkflowID, "")
		var nf *serviceerror.NotFound
		if err != nil && !errors.As(err, &nf) {
			return translate("describe", err)
		}
		if err != nil || desc.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			if _, err := o.Redrive(ctx, p); err != nil {
				return err
			}
			lastErr = errors.New("no running workflow; started one")
			continue
		}
		runID := desc.WorkflowExecution.RunID
		v, err := o.client.QueryWorkflow(ctx, p.WorkflowID, runID, workflows.StateQuery)
		if err != nil {
			lastErr = err
			continue
		}
		var st workflows.PaymentState
		if err := v.Get(&st); err != nil {
			return fmt.Errorf("cancel: decode state: %w", err)
		}
		if st.PaymentNo != p.PaymentNo || !st.Initialized {
			// The order's run holds another payment (this one has ended), or is still
			// setting its payment up: a cancel then would cut its trade's opening short.
			lastErr = fmt.Errorf("run %s holds payment %s (initialized %v)", runID, st.PaymentNo, st.Initialized)
			continue
		}
		err = o.client.CancelWorkflow(ctx, p.WorkflowID, runID)
		var already *serviceerror.CancellationAlreadyRequested
		switch {
		case err == nil, errors.As(err, &already):
			return nil
		case errors.As(err, &nf):
			lastErr = err // the run continued as new or just ended
			continue
		default:
			return translate("cancel", err)
		}
	}
	return &payment.Error{Code: payment.EUNAVAILABLE, Message: "could not reach the payment's workflow; retry", Err: lastErr}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// RedeliverEvent runs one delivery attempt of a tenant's outbox event now and waits for
// its outcome. Concurrent requests for the same event join one attempt.
func (o *Orchestrator) RedeliverEvent(ctx context.Context, tenantID, eventID string) (activities.RedeliverResult, error) {
	opts := client.StartWorkflowOptions{
		ID:                       "redeliver:" + tenantID + ":" + eventID,
		TaskQueue:                o.taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TypedSearchAttributes:    temporal.NewSearchAttributes(workflows.SATenantID.ValueSet(tenantID)),
		StaticSummary:            fmt.Sprintf("redeliver event %s · tenant %s", eventID, tenantID),
	}
	run, err := o.client.ExecuteWorkflow(ctx, opts, workflows.RedeliverEventWorkflowName,
		activities.RedeliverInput{TenantID: tenantID, EventID: eventID})
	if err != nil {
		return activities.RedeliverResult{}, translate("redeliver", err)
	}
	var res activities.RedeliverResult
	if err := run.Get(ctx, &res); err != nil {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) {
			switch appErr.Type() {
			case activities.ErrTypeEventNotFound:
				return res, &payment.Error{Code: payment.ENOTFOUND, Message: "no event " + eventID, Err: err}
			case activities.ErrTypeEventBusy:
				return res, &payment.Error{Code: payment.EINFLIGHT, Message: appErr.Message(), Err: err}
			}
		}
		return res, translate("redeliver", err)
	}
	return res, nil
}
