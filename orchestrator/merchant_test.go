package orchestrator_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"
	"go.temporal.io/sdk/workflow"

	"github.com/paykit/paykit/orchestrator"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
)

func runningRun(runID string) *client.WorkflowExecutionDescription {
	return &client.WorkflowExecutionDescription{WorkflowExecutionMetadata: client.WorkflowExecutionMetadata{
		WorkflowExecution: workflow.Execution{ID: "payment:t1:o1", RunID: runID},
		Status:            enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
	}}
}

func stateOf(paymentNo string) *mocks.Value {
	return state(workflows.PaymentState{PaymentNo: paymentNo, Initialized: true})
}

func state(st workflows.PaymentState) *mocks.Value {
	v := &mocks.Value{}
	v.On("Get", mock.Anything).Run(func(args mock.Arguments) {
		*args.Get(0).(*workflows.PaymentState) = st
	}).Return(nil)
	return v
}

// The cancel goes to the run that holds the payment, by run id: after a continue-as-new
// it finds the new run, and it never cancels a run that holds another payment of the
// order.
func TestCancelPaymentTargetsTheRunHoldingThePayment(t *testing.T) {
	p := payment.Payment{PaymentNo: "P1", TenantID: "t1", OrderID: "o1", Status: payment.StatusPending, WorkflowID: "payment:t1:o1"}
	t.Run("continued as new in between", func(t *testing.T) {
		c := &mocks.Client{}
		c.On("DescribeWorkflow", mock.Anything, "payment:t1:o1", "").Return(runningRun("run-1"), nil).Once()
		c.On("DescribeWorkflow", mock.Anything, "payment:t1:o1", "").Return(runningRun("run-2"), nil).Once()
		c.On("QueryWorkflow", mock.Anything, "payment:t1:o1", mock.Anything, workflows.StateQuery).Return(stateOf("P1"), nil)
		c.On("CancelWorkflow", mock.Anything, "payment:t1:o1", "run-1").Return(serviceerror.NewNotFound("workflow execution already completed")).Once()
		c.On("CancelWorkflow", mock.Anything, "payment:t1:o1", "run-2").Return(nil).Once()
		o := orchestrator.New(c, "payments", workflows.DefaultTiming())
		if err := o.CancelPayment(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		c.AssertExpectations(t)
	})
	t.Run("the run holds another payment", func(t *testing.T) {
		c := &mocks.Client{}
		c.On("DescribeWorkflow", mock.Anything, "payment:t1:o1", "").Return(runningRun("run-9"), nil)
		c.On("QueryWorkflow", mock.Anything, "payment:t1:o1", "run-9", workflows.StateQuery).Return(stateOf("P2"), nil)
		o := orchestrator.New(c, "payments", workflows.DefaultTiming())
		if err := o.CancelPayment(context.Background(), p); payment.ErrorCode(err) != payment.EUNAVAILABLE {
			t.Fatalf("err %v, want %s", err, payment.EUNAVAILABLE)
		}
		c.AssertNotCalled(t, "CancelWorkflow", mock.Anything, mock.Anything, mock.Anything)
	})
	t.Run("the run is still setting the payment up", func(t *testing.T) {
		c := &mocks.Client{}
		c.On("DescribeWorkflow", mock.Anything, "payment:t1:o1", "").Return(runningRun("run-1"), nil)
		c.On("QueryWorkflow", mock.Anything, "payment:t1:o1", "run-1", workflows.StateQuery).Return(state(workflows.PaymentState{PaymentNo: "P1"}), nil)
		o := orchestrator.New(c, "payments", workflows.DefaultTiming())
		if err := o.CancelPayment(context.Background(), p); payment.ErrorCode(err) != payment.EUNAVAILABLE {
			t.Fatalf("err %v, want %s", err, payment.EUNAVAILABLE)
		}
		c.AssertNotCalled(t, "CancelWorkflow", mock.Anything, mock.Anything, mock.Anything)
	})
	t.Run("already requested", func(t *testing.T) {
		c := &mocks.Client{}
		c.On("DescribeWorkflow", mock.Anything, "payment:t1:o1", "").Return(runningRun("run-1"), nil)
		c.On("QueryWorkflow", mock.Anything, "payment:t1:o1", "run-1", workflows.StateQuery).Return(stateOf("P1"), nil)
		c.On("CancelWorkflow", mock.Anything, "payment:t1:o1", "run-1").Return(serviceerror.NewCancellationAlreadyRequested("already"))
		o := orchestrator.New(c, "payments", workflows.DefaultTiming())
		if err := o.CancelPayment(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	})
}
