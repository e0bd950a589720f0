package workflows_test

import (
	"errors"
	"strings"
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

// A signal sent straight to Temporal that claims the payment paid (the right amount, any
// trade_no, a notify_id no verified notification backs, or none) moves nothing: MarkPaid
// refuses it and records unverified_signal, and the run goes on to close the unpaid
// payment at expiry, with no grant.
func TestPaymentWorkflow_AForgedPaidSignalMovesNothing(t *testing.T) {
	env, fs := newEnv(t)
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(payment.Trade{State: payment.TradeWaiting}, nil)
	env.OnActivity(a.CloseTrade, mock.Anything, mock.Anything).Return(payment.CloseDone, nil)
	fs.unbacked = map[string]bool{"forged-1": true}
	env.RegisterDelayedCallback(func() {
		forged := paidNotification(fs, "forged-1")
		forged.TradeNo = "FORGED"
		env.SignalWorkflow(workflows.NotificationSignal, forged)
		forged.NotifyID = ""
		env.SignalWorkflow(workflows.NotificationSignal, forged)
	}, 10*time.Second)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusClosed || st.TradeNo != "" || fs.markPaid != 0 || fs.grants != 0 {
		t.Fatalf("status %s trade %q markPaid=%d grants=%d, want CLOSED with no trade, no paid transition, no grant",
			st.Status, st.TradeNo, fs.markPaid, fs.grants)
	}
	if len(fs.anomalies) != 2 || fs.anomalies[0] != payment.AnomalyUnverifiedSignal || !strings.HasPrefix(st.Anomaly, payment.AnomalyUnverifiedSignal) {
		t.Fatalf("anomalies %v, run's %q; want unverified_signal for each forged signal", fs.anomalies, st.Anomaly)
	}
}

// A signal whose payload does not decode is recorded as unverified_signal and ignored; it
// neither fails the workflow task nor blocks the run, which still closes the payment at
// expiry (the SDK alone drops it and, inside the selector, waits for the next signal, so
// the expiry timer is never handled).
func TestPaymentWorkflow_ASignalThatDoesNotDecodeIsRecordedAndTheRunGoesOn(t *testing.T) {
	env, fs := newEnv(t)
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(payment.Trade{State: payment.TradeWaiting}, nil)
	env.OnActivity(a.CloseTrade, mock.Anything, mock.Anything).Return(payment.CloseDone, nil)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.NotificationSignal, "state=paid&amount_fen=990")
	}, 10*time.Second)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusClosed || fs.markPaid != 0 || fs.closed != 1 {
		t.Fatalf("status %s markPaid=%d closed=%d, want CLOSED at expiry", st.Status, fs.markPaid, fs.closed)
	}
	if len(fs.anomalies) != 1 || fs.anomalies[0] != payment.AnomalyUnverifiedSignal {
		t.Fatalf("anomalies %v, want one unverified_signal", fs.anomalies)
	}
}

// A genuine notification whose MarkPaid fails for the local activity's whole window
// (MySQL down) is acted on when the inbox hands it over again, not ignored as a
// duplicate of the notify_id already seen.
func TestPaymentWorkflow_ANotificationWhoseMarkPaidFailedIsActedOnWhenHandedOverAgain(t *testing.T) {
	env, fs := newEnv(t)
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(payment.Trade{State: payment.TradeWaiting}, nil)
	env.OnActivity(a.CloseTrade, mock.Anything, mock.Anything).Return(payment.CloseDone, nil)
	fs.markPaidDown.Store(true)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "n1")) }, time.Second)
	env.RegisterDelayedCallback(func() {
		fs.markPaidDown.Store(false)
		env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "n1"))
	}, 30*time.Minute)
	in := input()
	in.Timing.PaymentTTL = 2 * time.Hour
	env.ExecuteWorkflow(workflows.PaymentWorkflow, in)
	st := result(t, env)
	if st.Status != payment.StatusPaid || fs.markPaid != 1 || fs.grants != 1 || st.TradeNo != "2026Tn1" {
		t.Fatalf("status %s trade %q markPaid=%d grants=%d, want PAID by the handed-over notification", st.Status, st.TradeNo, fs.markPaid, fs.grants)
	}
}

// A paid notification for a newer payment of the order, which a direct checkout opened
// while this run still delivers its webhook, is not this run's to mark: the payment stays
// pending for its own run (which marks it PAID with its grant and webhook when the inbox
// hands the notification over again), and nothing is recorded as an anomaly.
func TestPaymentWorkflow_APaidSignalForAPendingPaymentOfAnotherRunIsLeftToIt(t *testing.T) {
	env, fs := newEnv(t)
	fs.others = map[string]payment.Payment{"PNEWER": {PaymentNo: "PNEWER", TenantID: "t1", OrderID: "o1", Amount: 990,
		Status: payment.StatusPending}}
	fs.webhookErr = errors.New("merchant answered HTTP 503")
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "n1")) }, time.Second)
	env.RegisterDelayedCallback(func() {
		n := paidNotification(fs, "newer-payment")
		n.PaymentNo = "PNEWER"
		env.SignalWorkflow(workflows.NotificationSignal, n)
	}, 3*time.Second)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusPaid || fs.markPaid != 1 || fs.grants != 1 {
		t.Fatalf("this run's payment %s, markPaid=%d grants=%d", st.Status, fs.markPaid, fs.grants)
	}
	if newer := fs.others["PNEWER"]; newer.Status != payment.StatusPending || fs.otherMarks != 1 || len(fs.anomalies) != 0 {
		t.Fatalf("newer payment %s after %d reads, anomalies %v; want it left pending to its own run, no anomaly",
			newer.Status, fs.otherMarks, fs.anomalies)
	}
}
