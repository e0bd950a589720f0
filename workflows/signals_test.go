package workflows_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
)

// A paid notification that arrives while a closed payment's webhook is still being
// retried (the run is in afterFinal for up to an hour) is read before the run returns and
// recorded as paid_after_close: Temporal accepted it and Alipay was told success.
func TestPaymentWorkflow_PaidSignalDuringTheWebhookOfAClosedPaymentIsAnAnomaly(t *testing.T) {
	env, fs := newEnv(t)
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(payment.Trade{State: payment.TradeNotExist}, nil)
	env.OnActivity(a.CloseTrade, mock.Anything, mock.Anything).Return(payment.CloseDone, nil)
	fs.webhookErr = errors.New("merchant answered HTTP 503")
	env.RegisterDelayedCallback(func() {
		if fs.p.Status != payment.StatusClosed {
			t.Error("payment not closed yet when the late notification arrives")
		}
		env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "late-during-webhook"))
	}, 15*time.Minute+30*time.Second)
	in := input()
	in.Timing.WebhookMaxAttempts, in.Timing.WebhookMaxInterval = 10, time.Minute
	env.ExecuteWorkflow(workflows.PaymentWorkflow, in)
	st := result(t, env)
	if st.Status != payment.StatusClosed || fs.markPaid != 0 || len(fs.anomalies) != 1 || fs.anomalies[0] != "paid_after_close" {
		t.Fatalf("status %s markPaid=%d anomalies=%v, want CLOSED with one paid_after_close", st.Status, fs.markPaid, fs.anomalies)
	}
}

// A paid notification for the order's earlier payment that arrives while this run's PAID
// payment delivers its webhook is settled on that payment before the run returns.
func TestPaymentWorkflow_PaidSignalForAnotherPaymentDuringTheWebhookIsSettled(t *testing.T) {
	env, fs := newEnv(t)
	fs.others = map[string]payment.Payment{"PEARLIER": {PaymentNo: "PEARLIER", TenantID: "t1", OrderID: "o1", Amount: 990,
		Status: payment.StatusClosed}}
	fs.webhookErr = errors.New("merchant answered HTTP 503")
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "n1")) }, time.Second)
	env.RegisterDelayedCallback(func() {
		n := paidNotification(fs, "old-payment")
		n.PaymentNo = "PEARLIER"
		env.SignalWorkflow(workflows.NotificationSignal, n)
	}, 3*time.Second)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusPaid || fs.markPaid != 1 {
		t.Fatalf("this run's payment %s, markPaid=%d", st.Status, fs.markPaid)
	}
	if fs.otherMarks != 1 || len(fs.anomalies) != 1 || fs.anomalyNos[0] != "PEARLIER" {
		t.Fatalf("earlier payment: marks=%d anomalies=%v on %v, want it settled once as paid_after_close", fs.otherMarks, fs.anomalies, fs.anomalyNos)
	}
}

// A run that adopts a pending payment for a paid notification (the API's SignalWithStart)
// and cannot open its trade again for the whole retry window (Alipay 5xx, a keyring
// without the tenant's key) still reads the notification: the payment is PAID with its
// grant and webhook, not left pending for the sweeper.
func TestPaymentWorkflow_InitErrorStillReadsThePaidSignal(t *testing.T) {
	env, fs := newEnv(t)
	fs.p = payment.Payment{PaymentNo: "PADOPT", TenantID: "t1", OrderID: "o1", Amount: 990, Currency: "CNY",
		Status: payment.StatusPending, ExpireAt: env.Now().Add(10 * time.Minute)}
	fs.openErr = errors.New("alipay answered HTTP 502")
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "paid-while-gone"))
	}, 0)
	in := input()
	in.PaymentNo = "PADOPT"
	env.ExecuteWorkflow(workflows.PaymentWorkflow, in)
	st := result(t, env)
	if st.InitError == "" {
		t.Fatalf("want the run's init to have failed (OpenTrade), got %+v", st)
	}
	if st.Status != payment.StatusPaid || fs.markPaid != 1 || fs.grants != 1 || !st.WebhookSent {
		t.Fatalf("status %s markPaid=%d grants=%d webhook=%v, want PAID with its grant and webhook", st.Status, fs.markPaid, fs.grants, st.WebhookSent)
	}
}
