// Package orchestrator is the adapter over the Temporal client: it starts, joins, signals
// and re-drives payment workflows, and translates Temporal errors into domain errors.
package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
)

// Orchestrator starts and drives payment workflows.
type Orchestrator struct {
	client    client.Client
	taskQueue string
	timing    workflows.Timing
}

// New returns an Orchestrator that starts workflows on taskQueue with the given timing.
func New(c client.Client, taskQueue string, timing workflows.Timing) *Orchestrator {
	return &Orchestrator{client: c, taskQueue: taskQueue, timing: timing}
}

// Timing returns the timing given to new workflows.
func (o *Orchestrator) Timing() workflows.Timing { return o.timing }

func (o *Orchestrator) startOptions(in workflows.PaymentInput) client.StartWorkflowOptions {
	sa := []temporal.SearchAttributeUpdate{
		workflows.SATenantID.ValueSet(in.TenantID),
		workflows.SAOrderID.ValueSet(in.OrderID),
		workflows.SAAmountFen.ValueSet(int64(in.Amount)),
		workflows.SAPaymentStatus.ValueSet(payment.StatusPending.String()),
	}
	if in.PaymentNo != "" {
		sa = append(sa, workflows.SAPaymentNo.ValueSet(in.PaymentNo))
	}
	return client.StartWorkflowOptions{
		ID:        payment.WorkflowID(in.TenantID, in.OrderID),
		TaskQueue: o.taskQueue,
		// Concurrent checkouts of one order join the running workflow; once it has
		// closed, a new checkout may start a new run (re-purchase). The generated-column
		// unique index still allows one pending payment per order.
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TypedSearchAttributes:    temporal.NewSearchAttributes(sa...),
		StaticSummary:            fmt.Sprintf("%s CNY · order %s · tenant %s", in.Amount.Yuan(), in.OrderID, in.TenantID),
		StaticDetails:            fmt.Sprintf("Subject: %s\n\nMethod: %s", in.Subject, in.Method),
	}
}

// Checkout starts the order's payment workflow, or joins the running one, and waits for
// the checkout update to answer with the payment. Repeating a call with the same
// updateID returns the original answer, even after the workflow has closed.
func (o *Orchestrator) Checkout(ctx context.Context, in workflows.PaymentInput, updateID string) (workflows.CheckoutResult, error) {
	in.Timing = o.timing
	var (
		res workflows.CheckoutResult
		err error
	)
	started := time.Now()
	for retries := 0; ; retries++ {
		res, err = o.checkoutOnce(ctx, in, updateID)
		if !(updateAbortedByServer(err) || updateRefusedForLoad(err)) || time.Since(started) >= checkoutRetryBudget {
			if err != nil {
				return workflows.CheckoutResult{}, checkoutError(err)
			}
			return res, nil
		}
		// The server dropped the update (it cleared the run's update registry, or the
		// workflow task carrying it failed, as when a worker dies) or admitted nothing (the
		// run has as many updates in flight as it takes, or the namespace is over its
		// rate): the same update ID again recreates it, and one that had in fact been
		// applied is answered with its result. The waits grow and are jittered, so that
		// many checkouts of one order arriving at once take turns.
		wait := min(checkoutRetryFirstWait<<min(retries, 5), checkoutRetryMaxWait)
		wait += rand.N(wait)
		select {
		case <-ctx.Done():
			return res, checkoutError(err)
		case <-time.After(wait):
		}
	}
}

// StartOpened starts the run of a payment the API has created and opened itself (in.PaymentNo
// and in.Opened set), without waiting for any of its workflow tasks. started=false means
// a run of the order is already running: one of this payment (a concurrent checkout's,
// or one a notification started) or of the order's previous payment, still finishing;
// the caller then joins it with Checkout, whose update answers which.
func (o *Orchestrator) StartOpened(ctx context.Context, in workflows.PaymentInput) (started bool, err error) {
	in.Timing = o.timing
	opts := o.startOptions(in)
	opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL
	opts.WorkflowExecutionErrorWhenAlreadyStarted = true
	_, err = o.client.ExecuteWorkflow(ctx, opts, workflows.PaymentWorkflowName, in)
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &already):
		return false, nil
	default:
		return false, translate("start", err)
	}
}

// A checkout whose update the server aborted or refused for load is sent again within
// its request for up to checkoutRetryBudget, the waits growing from
// checkoutRetryFirstWait to checkoutRetryMaxWait (each with up to as much again at
// random). For 200 checkouts of one order at once on a loaded machine, the dev server
// logged 2,123 aborted updates and 373 refused for the in-flight limit
// (e2e/TestConcurrentCheckoutsWithDifferentKeys).
const (
	checkoutRetryBudget    = 8 * time.Second
	checkoutRetryFirstWait = 25 * time.Millisecond
	checkoutRetryMaxWait   = 500 * time.Millisecond
)

func (o *Orchestrator) checkoutOnce(ctx context.Context, in workflows.PaymentInput, updateID string) (workflows.CheckoutResult, error) {
	op := o.client.NewWithStartWorkflowOperation(o.startOptions(in), workflows.PaymentWorkflowName, in)
	handle, err := o.client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: op,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateID:   updateID,
			UpdateName: workflows.CheckoutUpdate,
			Args: []any{workflows.CheckoutRequest{Amount: in.Amount, Currency: in.Currency, Subject: in.Subject, Method: in.Method,
				Repurchase: in.Repurchase}},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		return workflows.CheckoutResult{}, err
	}
	var res workflows.CheckoutResult
	if err := handle.Get(ctx, &res); err != nil {
		return workflows.CheckoutResult{}, err
	}
	return res, nil
}

// updateAbortedByServer reports an update the server dropped without running it, which
// it documents as to be retried by the caller: "workflow update was aborted"
// (Unavailable: it cleared the run's update registry) and "Unable to perform workflow
// execution update due to unexpected workflow task failure" (WorkflowNotReady: the
// workflow task that carried the update failed or timed out, as when its worker is
// killed).
func updateAbortedByServer(err error) bool {
	var un *serviceerror.Unavailable
	var nr *serviceerror.WorkflowNotReady
	return (errors.As(err, &un) && strings.Contains(un.Message, "update was aborted")) || errors.As(err, &nr)
}

// updateRefusedForLoad reports an update the server refused before admitting it because
// of load: ResourceExhausted, as for "limit on number of concurrent in-flight updates has
// been reached" (a run takes 10 at a time by default, and many checkouts of one order
// arrive at once) or a namespace over its rate limit. Nothing of it ran, so the same
// update ID can be sent again.
func updateRefusedForLoad(err error) bool {
	var re *serviceerror.ResourceExhausted
	return errors.As(err, &re)
}

// checkoutError translates a checkout's error. NotFound means the update reached a run
// that completed before it could take the update (a finished run making way for the next
// one): the checkout is retried, which starts that next run; it is never a 404.
func checkoutError(err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return &payment.Error{Code: payment.EFINISHING, Message: "the order's previous run has just ended; retry", Err: err}
	}
	return translate("checkout", err)
}

// Notify signals a verified notification to the running workflow of a pending payment.
// running=false means no workflow is running for it.
func (o *Orchestrator) Notify(ctx context.Context, p payment.Payment, n workflows.NotificationPayload) (running bool, err error) {
	err = o.client.SignalWorkflow(ctx, p.WorkflowID, "", workflows.NotificationSignal, n)
	var nf *serviceerror.NotFound
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &nf):
		return false, nil
	default:
		return false, translate("signal", err)
	}
}

// NotifyOrRedrive signals a pending payment's workflow, starting a run that adopts the
// payment if none is running. The run is given the existing payment_no, so it can never
// create a second payment (this is why SignalWithStart is safe here, unlike with a
// fresh-payment input).
func (o *Orchestrator) NotifyOrRedrive(ctx context.Context, p payment.Payment, n workflows.NotificationPayload) error {
	in := o.redriveInput(p)
	_, err := o.client.SignalWithStartWorkflow(ctx, p.WorkflowID, workflows.NotificationSignal, n, o.startOptions(in),
		workflows.PaymentWorkflowName, in)
	if err != nil {
		return translate("signal with start", err)
	}
	return nil
}

// redriveInput is the input of a run that adopts an existing payment: same payment_no,
// and the same kind of trade (cashier URL or QR code) as the payment was created with.
func (o *Orchestrator) redriveInput(p payment.Payment) workflows.PaymentInput {
	return workflows.PaymentInput{
		TenantID: p.TenantID, OrderID: p.OrderID, Amount: p.Amount, Currency: p.Currency, Subject: p.Subject,
		Method: p.Method, Timing: o.timing, PaymentNo: p.PaymentNo,
	}
}

// Redrive starts a workflow for a pending payment whose workflow is not running, for
// example because an operator terminated it. It reports whether it started one.
func (o *Orchestrator) Redrive(ctx context.Context, p payment.Payment) (bool, error) {
	if p.Status != payment.StatusPending {
		return false, nil
	}
	running, err := o.Running(ctx, p.WorkflowID)
	if err != nil || running {
		return false, err
	}
	in := o.redriveInput(p)
	if _, err := o.client.ExecuteWorkflow(ctx, o.startOptions(in), workflows.PaymentWorkflowName, in); err != nil {
		return false, translate("redrive", err)
	}
	return true, nil
}

// Running reports whether the workflow with this id has a running execution. A workflow
// that does not exist, or whose last run has closed, is not running.
func (o *Orchestrator) Running(ctx context.Context, workflowID string) (bool, error) {
	desc, err := o.client.DescribeWorkflow(ctx, workflowID, "")
	var nf *serviceerror.NotFound
	switch {
	case err == nil:
		return desc.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
	case errors.As(err, &nf):
		return false, nil
	default:
		return false, translate("describe", err)
	}
}

// State queries the running workflow of an order for its current state.
func (o *Orchestrator) State(ctx context.Context, tenantID, orderID string) (workflows.PaymentState, error) {
	v, err := o.client.QueryWorkflow(ctx, payment.WorkflowID(tenantID, orderID), "", workflows.StateQuery)
	if err != nil {
		return workflows.PaymentState{}, translate("query", err)
	}
	var st workflows.PaymentState
	if err := v.Get(&st); err != nil {
		return workflows.PaymentState{}, fmt.Errorf("query: decode: %w", err)
	}
	return st, nil
}

// Ping checks that the Temporal frontend answers.
func (o *Orchestrator) Ping(ctx context.Context) error {
	if _, err := o.client.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return translate("health", err)
	}
	return nil
}

// translate maps Temporal errors to domain errors: business refusals keep their meaning,
// anything else means Temporal is unavailable and the caller should retry.
func translate(op string, err error) error {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		switch appErr.Type() {
		case "AmountConflict":
			return &payment.Error{Code: payment.ECONFLICT, Message: appErr.Message(), Err: err}
		case "OrderAlreadyPaid":
			return &payment.Error{Code: payment.EORDERPAID, Message: appErr.Message(), Err: err}
		case "PaymentFinishing":
			return &payment.Error{Code: payment.EFINISHING, Message: appErr.Message(), Err: err}
		case "ChannelRefused":
			return &payment.Error{Code: payment.ECHANNEL, Message: appErr.Message(), Err: err}
		case "PaymentUnavailable":
			return &payment.Error{Code: payment.EUNAVAILABLE, Message: "the payment could not be set up right now, retry", Err: err}
		case "InvalidPayment":
			return &payment.Error{Code: payment.EUNPROCESSABLE, Message: appErr.Message(), Err: err}
		}
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return &payment.Error{Code: payment.ENOTFOUND, Message: "workflow not found", Err: err}
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return &payment.Error{Code: payment.EUNAVAILABLE, Message: "workflow engine unavailable, retry later", Err: fmt.Errorf("%s: %w", op, err)}
}

// refundTiming is the timing given to new refund workflows: the refund defaults, with
// the merchant webhook's retries as for payments.
func (o *Orchestrator) refundTiming() workflows.RefundTiming {
	return workflows.RefundTiming{
		WebhookInitialInterval: o.timing.WebhookInitialInterval,
		WebhookMaxInterval:     o.timing.WebhookMaxInterval,
		WebhookMaxAttempts:     o.timing.WebhookMaxAttempts,
	}
}

// StartRefund makes sure a workflow is working on a pending refund, whose row (and
// reservation) the store has already written. A running workflow is joined; a closed
// one is followed by a new run, which reads the refund back and carries on from what the
// database holds, so calling this again for the same refund re-drives it and never
// refunds twice (Alipay is idempotent on the refund's out_request_no).
func (o *Orchestrator) StartRefund(ctx context.Context, r payment.Refund) error {
	if r.Status.Final() {
		return nil
	}
	in := workflows.RefundInput{TenantID: r.TenantID, RefundNo: r.RefundNo, Timing: o.refundTiming()}
	opts := client.StartWorkflowOptions{
		ID:                       payment.RefundWorkflowID(r.TenantID, r.RefundNo),
		TaskQueue:                o.taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.SATenantID.ValueSet(r.TenantID),
			workflows.SAPaymentNo.ValueSet(r.PaymentNo),
			workflows.SARefundNo.ValueSet(r.RefundNo),
			workflows.SARefundStatus.ValueSet(r.Status.String()),
			workflows.SAAmountFen.ValueSet(int64(r.Amount)),
		),
		StaticSummary: workflows.RefundSummary(r.TenantID, r.RefundNo, r.PaymentNo, r.Amount),
		StaticDetails: fmt.Sprintf("out_request_no: %s\n\nReason: %s", r.OutRequestNo, r.Reason),
	}
	if _, err := o.client.ExecuteWorkflow(ctx, opts, workflows.RefundWorkflowName, in); err != nil {
		return translate("start refund", err)
	}
	return nil
}

// RefundState queries a refund's workflow for its current state.
func (o *Orchestrator) RefundState(ctx context.Context, tenantID, refundNo string) (workflows.RefundState, error) {
	v, err := o.client.QueryWorkflow(ctx, payment.RefundWorkflowID(tenantID, refundNo), "", workflows.RefundStateQuery)
	if err != nil {
		return workflows.RefundState{}, translate("query refund", err)
	}
	var st workflows.RefundState
	if err := v.Get(&st); err != nil {
		return workflows.RefundState{}, fmt.Errorf("query refund: decode: %w", err)
	}
	return st, nil
}

// RedriveRefund starts a workflow for a pending refund whose workflow is not running. It
// reports whether it started one.
func (o *Orchestrator) RedriveRefund(ctx context.Context, r payment.Refund) (bool, error) {
	if r.Status.Final() {
		return false, nil
	}
	running, err := o.Running(ctx, payment.RefundWorkflowID(r.TenantID, r.RefundNo))
	if err != nil || running {
		return false, err
	}
	if err := o.StartRefund(ctx, r); err != nil {
		return false, err
	}
	return true, nil
}
