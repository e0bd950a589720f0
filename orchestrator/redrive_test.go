package orchestrator_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/mocks"

	"github.com/paykit/paykit/orchestrator"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
)

// A re-driven run, by the sweeper or by a late notification, is started with the
// payment's own method, so a wap or app payment opens the same kind of trade again.
func TestRedriveKeepsTheMethod(t *testing.T) {
	for _, m := range []payment.Method{payment.MethodWap, payment.MethodApp, payment.MethodQR, payment.MethodPage} {
		t.Run(string(m), func(t *testing.T) {
			p := payment.Payment{PaymentNo: "P1", TenantID: "t1", OrderID: "o1", Amount: 990, Currency: "CNY", Subject: "s",
				Method: m, Status: payment.StatusPending, WorkflowID: "payment:t1:o1"}
			keeps := mock.MatchedBy(func(in workflows.PaymentInput) bool { return in.Method == m && in.PaymentNo == "P1" })
			c := &mocks.Client{}
			c.On("DescribeWorkflow", mock.Anything, "payment:t1:o1", "").Return(nil, serviceerror.NewNotFound("gone"))
			c.On("ExecuteWorkflow", mock.Anything, mock.Anything, workflows.PaymentWorkflowName, keeps).Return(&mocks.WorkflowRun{}, nil).Once()
			c.On("SignalWithStartWorkflow", mock.Anything, "payment:t1:o1", workflows.NotificationSignal, mock.Anything,
				mock.Anything, workflows.PaymentWorkflowName, keeps).Return(&mocks.WorkflowRun{}, nil).Once()
			o := orchestrator.New(c, "payments", workflows.DefaultTiming())
			if started, err := o.Redrive(context.Background(), p); err != nil || !started {
				t.Fatalf("redrive: %v %v", started, err)
			}
			if err := o.NotifyOrRedrive(context.Background(), p, workflows.NotificationPayload{NotifyID: "n1"}); err != nil {
				t.Fatal(err)
			}
			c.AssertExpectations(t)
		})
	}
}
