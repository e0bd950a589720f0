package orchestrator_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"

	"github.com/paykit/paykit/orchestrator"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
)

func TestRunning(t *testing.T) {
	described := func(s enumspb.WorkflowExecutionStatus) *client.WorkflowExecutionDescription {
		return &client.WorkflowExecutionDescription{WorkflowExecutionMetadata: client.WorkflowExecutionMetadata{Status: s}}
	}
	tests := []struct {
		name        string
		resp        *client.WorkflowExecutionDescription
		err         error
		wantRunning bool
		wantCode    string
	}{
		{name: "running", resp: described(enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING), wantRunning: true},
		{name: "completed", resp: described(enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED)},
		{name: "terminated", resp: described(enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED)},
		{name: "not found", err: serviceerror.NewNotFound("workflow not found")},
		{name: "temporal down", err: serviceerror.NewUnavailable("connection refused"), wantCode: payment.EUNAVAILABLE},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &mocks.Client{}
			c.On("DescribeWorkflow", mock.Anything, "payment:t1:o1", "").Return(tc.resp, tc.err)
			o := orchestrator.New(c, "payments", workflows.DefaultTiming())
			running, err := o.Running(context.Background(), "payment:t1:o1")
			if running != tc.wantRunning || payment.ErrorCode(err) != tc.wantCode {
				t.Fatalf("Running = %v, %v; want %v and error code %q", running, err, tc.wantRunning, tc.wantCode)
			}
			c.AssertExpectations(t)
		})
	}
}

// A checkout whose update reached a run that completed before taking it (the run was
// making way for the order's next payment) is retryable, never a 404 that the
// Idempotency-Key layer would store.
func TestCheckoutOnARunThatJustCompletedIsRetryable(t *testing.T) {
	c := &mocks.Client{}
	c.On("NewWithStartWorkflowOperation", mock.Anything, mock.Anything, mock.Anything).Return(nil)
	c.On("UpdateWithStartWorkflow", mock.Anything, mock.Anything).
		Return(nil, serviceerror.NewNotFound("workflow execution already completed"))
	o := orchestrator.New(c, "payments", workflows.DefaultTiming())
	_, err := o.Checkout(context.Background(), workflows.PaymentInput{TenantID: "t1", OrderID: "o1", Amount: 990, Currency: "CNY"}, "checkout-1")
	if payment.ErrorCode(err) != payment.EFINISHING {
		t.Fatalf("checkout error %v (code %q), want %s", err, payment.ErrorCode(err), payment.EFINISHING)
	}
}

// A checkout whose update the server dropped (it cleared the run's update registry, or
// the workflow task carrying it failed when its worker died) is sent again with the same
// update ID inside the request, and answers with the result; it is not a 503.
func TestCheckoutAbortedByTheServerIsSentAgainWithTheSameUpdateID(t *testing.T) {
	c := &mocks.Client{}
	c.On("NewWithStartWorkflowOperation", mock.Anything, mock.Anything, mock.Anything).Return(nil)
	var ids []string
	handle := answeredP1()
	c.On("UpdateWithStartWorkflow", mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		ids = append(ids, args.Get(1).(client.UpdateWithStartWorkflowOptions).UpdateOptions.UpdateID)
	}).Return(nil, serviceerror.NewUnavailable("workflow update was aborted")).Once()
	c.On("UpdateWithStartWorkflow", mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		ids = append(ids, args.Get(1).(client.UpdateWithStartWorkflowOptions).UpdateOptions.UpdateID)
	}).Return(nil, serviceerror.NewWorkflowNotReady("Unable to perform workflow execution update due to unexpected workflow task failure.")).Once()
	c.On("UpdateWithStartWorkflow", mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		ids = append(ids, args.Get(1).(client.UpdateWithStartWorkflowOptions).UpdateOptions.UpdateID)
	}).Return(handle, nil).Once()
	o := orchestrator.New(c, "payments", workflows.DefaultTiming())
	res, err := o.Checkout(context.Background(), workflows.PaymentInput{TenantID: "t1", OrderID: "o1", Amount: 990, Currency: "CNY"}, "checkout-1")
	if err != nil || res.PaymentNo != "P1" {
		t.Fatalf("checkout = %+v, %v; want P1", res, err)
	}
	if len(ids) != 3 || ids[0] != "checkout-1" || ids[1] != "checkout-1" || ids[2] != "checkout-1" {
		t.Fatalf("update ids %v, want checkout-1 three times", ids)
	}

	// Any other Unavailable is not retried here: it is the caller's 503.
	c2 := &mocks.Client{}
	c2.On("NewWithStartWorkflowOperation", mock.Anything, mock.Anything, mock.Anything).Return(nil)
	c2.On("UpdateWithStartWorkflow", mock.Anything, mock.Anything).Return(nil, serviceerror.NewUnavailable("frontend down")).Once()
	o2 := orchestrator.New(c2, "payments", workflows.DefaultTiming())
	if _, err := o2.Checkout(context.Background(), workflows.PaymentInput{TenantID: "t1", OrderID: "o1", Amount: 990, Currency: "CNY"}, "checkout-1"); payment.ErrorCode(err) != payment.EUNAVAILABLE {
		t.Fatalf("error %v, want %s", err, payment.EUNAVAILABLE)
	}
}

// A checkout the server refused for load (ResourceExhausted: the run already has as many
// updates in flight as it takes, as when many checkouts of one order arrive at once) is
// sent again with the same update ID inside the request and answers with the result,
// rather than a 503; while the refusals last past the request's context, it is the 503.
func TestCheckoutRefusedForInFlightUpdatesIsSentAgain(t *testing.T) {
	inFlight := func() error {
		return serviceerror.NewResourceExhausted(enumspb.RESOURCE_EXHAUSTED_CAUSE_CONCURRENT_LIMIT,
			"limit on number of concurrent in-flight updates has been reached (10)")
	}
	c := &mocks.Client{}
	c.On("NewWithStartWorkflowOperation", mock.Anything, mock.Anything, mock.Anything).Return(nil)
	var ids []string
	handle := answeredP1()
	record := func(args mock.Arguments) {
		ids = append(ids, args.Get(1).(client.UpdateWithStartWorkflowOptions).UpdateOptions.UpdateID)
	}
	c.On("UpdateWithStartWorkflow", mock.Anything, mock.Anything).Run(record).Return(nil, inFlight()).Times(3)
	c.On("UpdateWithStartWorkflow", mock.Anything, mock.Anything).Run(record).Return(handle, nil).Once()
	o := orchestrator.New(c, "payments", workflows.DefaultTiming())
	res, err := o.Checkout(context.Background(), workflows.PaymentInput{TenantID: "t1", OrderID: "o1", Amount: 990, Currency: "CNY"}, "checkout-1")
	if err != nil || res.PaymentNo != "P1" {
		t.Fatalf("checkout = %+v, %v; want P1", res, err)
	}
	if len(ids) != 4 || ids[0] != "checkout-1" || ids[3] != "checkout-1" {
		t.Fatalf("update ids %v, want checkout-1 four times", ids)
	}

	c2 := &mocks.Client{}
	c2.On("NewWithStartWorkflowOperation", mock.Anything, mock.Anything, mock.Anything).Return(nil)
	c2.On("UpdateWithStartWorkflow", mock.Anything, mock.Anything).Return(nil, inFlight())
	o2 := orchestrator.New(c2, "payments", workflows.DefaultTiming())
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	started := time.Now()
	_, err = o2.Checkout(ctx, workflows.PaymentInput{TenantID: "t1", OrderID: "o1", Amount: 990, Currency: "CNY"}, "checkout-1")
	if payment.ErrorCode(err) != payment.EUNAVAILABLE || time.Since(started) > 2*time.Second {
		t.Fatalf("error %v after %s, want %s once the request's context ends", err, time.Since(started), payment.EUNAVAILABLE)
	}
}

// Many checkouts of one order at once on a loaded server get their updates aborted again
// and again: eight aborts in a row are still sent again within the request (a fixed five
// retries answered 503 to 200 checkouts of one order in CI).
func TestCheckoutAbortedManyTimesIsSentAgainWithinTheRequest(t *testing.T) {
	c := &mocks.Client{}
	c.On("NewWithStartWorkflowOperation", mock.Anything, mock.Anything, mock.Anything).Return(nil)
	handle := answeredP1()
	c.On("UpdateWithStartWorkflow", mock.Anything, mock.Anything).Return(nil, serviceerror.NewUnavailable("workflow update was aborted")).Times(8)
	c.On("UpdateWithStartWorkflow", mock.Anything, mock.Anything).Return(handle, nil).Once()
	o := orchestrator.New(c, "payments", workflows.DefaultTiming())
	res, err := o.Checkout(context.Background(), workflows.PaymentInput{TenantID: "t1", OrderID: "o1", Amount: 990, Currency: "CNY"}, "checkout-1")
	if err != nil || res.PaymentNo != "P1" {
		t.Fatalf("checkout = %+v, %v; want P1", res, err)
	}
	c.AssertExpectations(t)
}

// answeredP1 is an update handle whose checkout answers payment P1.
func answeredP1() *mocks.WorkflowUpdateHandle {
	handle := &mocks.WorkflowUpdateHandle{}
	handle.On("Get", mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		*(args.Get(1).(*workflows.CheckoutResult)) = workflows.CheckoutResult{PaymentNo: "P1"}
	}).Return(nil)
	return handle
}
