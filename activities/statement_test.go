package activities_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/statement"
)

type billsAnswer struct{ err error }

func (b billsAnswer) BillDownloadURL(context.Context, string) (string, error) { return "", b.err }

// TestReconcileStatementErrors: a bill not yet published is the workflow's
// BillNotAvailable (it waits and asks again), an app the worker does not know is a
// refusal, and any other failure is retried.
func TestReconcileStatementErrors(t *testing.T) {
	notYet := &payment.ChannelError{Op: "bill", SubCode: "isp.bill_not_exist", Err: payment.ErrBillNotAvailable}
	tests := []struct {
		name      string
		app       string
		bills     error
		wantType  string
		retryable bool
	}{
		{name: "not published", app: "a1", bills: notYet, wantType: activities.ErrTypeBillNotAvailable},
		{name: "unknown app", app: "other", wantType: activities.ErrTypeInvalid},
		{name: "transport failure", app: "a1", bills: fmt.Errorf("dial: %w", errors.New("refused")), retryable: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			acts := &activities.Activities{
				Statements: &statement.Reconciler{},
				StatementApps: func(context.Context) ([]statement.App, error) {
					return []statement.App{{ID: "a1", Bills: billsAnswer{tc.bills}}}, nil
				},
			}
			_, err := acts.ReconcileStatement(context.Background(), activities.StatementRequest{AppID: tc.app, BillDate: "2026-12-01"})
			var appErr *temporal.ApplicationError
			switch {
			case tc.retryable:
				if err == nil || errors.As(err, &appErr) {
					t.Fatalf("err %v, want a plain (retried) error", err)
				}
			case !errors.As(err, &appErr) || appErr.Type() != tc.wantType || !appErr.NonRetryable():
				t.Fatalf("err %v, want non-retryable %s", err, tc.wantType)
			}
		})
	}
}
