package workflows_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
)

var a *activities.Activities

// fakeStore keeps the one payment of a test in memory, so mocked activities behave like
// the real compare-and-set: only the first transition wins.
type fakeStore struct {
	p        payment.Payment
	markPaid int
	closed   int
	grants   int
	// anomalies lists the kinds recorded for an operator.
	anomalies []string
}

func newEnv(t *testing.T) (*testsuite.TestWorkflowEnvironment, *fakeStore) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Activities{})
	workflows.Register(env)
	fs := &fakeStore{}
	env.OnActivity(a.CreatePayment, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CreatePaymentInput) (activities.CreatePaymentResult, error) {
			if fs.p.PaymentNo != "" {
				return activities.CreatePaymentResult{Payment: fs.p, Existed: true}, nil
			}
			fs.p = payment.Payment{PaymentNo: in.PaymentNo, TenantID: in.TenantID, OrderID: in.OrderID, Amount: in.Amount,
				Currency: in.Currency, Subject: in.Subject, Method: in.Method, ExpireAt: in.ExpireAt, Status: payment.StatusPending, WorkflowID: in.WorkflowID}
			return activities.CreatePaymentResult{Payment: fs.p}, nil
		}).Maybe()
	env.OnActivity(a.OpenTrade, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.OpenTradeInput) (activities.OpenTradeResult, error) {
			if in.Method == payment.MethodQR {
				return activities.OpenTradeResult{QRCode: "https://qr.sim/" + in.PaymentNo}, nil
			}
			return activities.OpenTradeResult{PayURL: "http://sim/gateway.do?out_trade_no=" + in.PaymentNo}, nil
		}).Maybe()
	env.OnActivity(a.MarkPaid, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.MarkPaidInput) (payment.Transition, error) {
			if fs.p.Status != payment.StatusPending {
				return payment.Transition{Payment: fs.p}, nil
			}
			fs.markPaid++
			fs.p.Status, fs.p.TradeNo, fs.p.PaidAt = payment.StatusPaid, in.TradeNo, in.PaidAt
			return payment.Transition{Payment: fs.p, Changed: true, EventID: "evt_" + fs.p.PaymentNo + "_paid"}, nil
		}).Maybe()
	env.OnActivity(a.ClosePayment, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ClosePaymentInput) (payment.Transition, error) {
			if fs.p.Status != payment.StatusPending {
				return payment.Transition{Payment: fs.p}, nil
			}
			fs.closed++
			fs.p.Status = payment.StatusClosed
			return payment.Transition{Payment: fs.p, Changed: true, EventID: "evt_" + fs.p.PaymentNo + "_closed"}, nil
		}).Maybe()
	env.OnActivity(a.GrantBenefit, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.GrantBenefitInput) (bool, error) {
			fs.grants++
			return fs.grants == 1, nil
		}).Maybe()
	env.OnActivity(a.DeliverWebhook, mock.Anything, mock.Anything).Return(nil).Maybe()
	env.OnActivity(a.RecordAnomaly, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AnomalyInput) error {
			fs.anomalies = append(fs.anomalies, in.Kind)
			return nil
		}).Maybe()
	return env, fs
}

func input() workflows.PaymentInput {
	return workflows.PaymentInput{
		TenantID: "t1", OrderID: "o1", Amount: 990, Currency: "CNY", Subject: "Coffee", Method: payment.MethodPage,
		Timing: workflows.Timing{PaymentTTL: 15 * time.Minute, ReconcileInterval: time.Minute,
			WebhookInitialInterval: time.Second, WebhookMaxInterval: time.Second, WebhookMaxAttempts: 3},
	}
}

func paidNotification(fs *fakeStore, notifyID string) workflows.NotificationPayload {
	return workflows.NotificationPayload{NotifyID: notifyID, TradeNo: "2026T" + notifyID, PaymentNo: fs.p.PaymentNo,
		TradeStatus: "TRADE_SUCCESS", State: payment.TradePaid, Amount: 990, PaidAt: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
}

func result(t *testing.T, env *testsuite.TestWorkflowEnvironment) workflows.PaymentState {
	t.Helper()
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow error: %v", err)
	}
	var st workflows.PaymentState
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestPaymentWorkflow_CallbackSignalPaysOnceDespiteDuplicates(t *testing.T) {
	env, fs := newEnv(t)
	env.RegisterDelayedCallback(func() {
		n := paidNotification(fs, "n1")
		for range 5 { // Alipay redelivers; the API may signal the same notify_id again
			env.SignalWorkflow(workflows.NotificationSignal, n)
		}
		env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "n2"))
	}, 10*time.Second)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusPaid || st.TradeNo != "2026Tn1" {
		t.Fatalf("status %s trade %q, want PAID 2026Tn1", st.Status, st.TradeNo)
	}
	if fs.markPaid != 1 || fs.grants != 1 || fs.closed != 0 {
		t.Fatalf("markPaid=%d grants=%d closed=%d, want 1 1 0", fs.markPaid, fs.grants, fs.closed)
	}
	if !st.BenefitGranted || !st.WebhookSent || st.EventID == "" {
		t.Fatalf("side effects not done: %+v", st)
	}
}

func TestPaymentWorkflow_IgnoresSignalsThatDoNotAdvance(t *testing.T) {
	env, fs := newEnv(t)
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(payment.Trade{State: payment.TradeWaiting}, nil)
	env.OnActivity(a.CloseTrade, mock.Anything, mock.Anything).Return(payment.CloseDone, nil)
	env.RegisterDelayedCallback(func() {
		waiting := paidNotification(fs, "w1")
		waiting.State, waiting.TradeStatus = payment.TradeWaiting, "WAIT_BUYER_PAY"
		env.SignalWorkflow(workflows.NotificationSignal, waiting)
		wrongAmount := paidNotification(fs, "w2")
		wrongAmount.Amount = 1
		env.SignalWorkflow(workflows.NotificationSignal, wrongAmount)
	}, time.Second)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusClosed || fs.markPaid != 0 || fs.closed != 1 {
		t.Fatalf("status %s markPaid=%d closed=%d, want CLOSED 0 1", st.Status, fs.markPaid, fs.closed)
	}
}

func TestPaymentWorkflow_ReconciliationFindsPaymentWhenCallbacksAreLost(t *testing.T) {
	env, fs := newEnv(t)
	queries := 0
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(func(_ context.Context, no string) (payment.Trade, error) {
		queries++
		switch queries {
		case 1:
			return payment.Trade{State: payment.TradeNotExist}, nil // cashier not opened yet: keep waiting
		case 2:
			return payment.Trade{}, &payment.ChannelError{Op: "query", SubCode: "ACQ.SYSTEM_ERROR", Retryable: true}
		case 3, 4, 5:
			return payment.Trade{State: payment.TradeWaiting}, nil
		}
		return payment.Trade{State: payment.TradePaid, TradeNo: "2026R", Amount: 990, PaymentNo: no}, nil
	})
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusPaid || st.TradeNo != "2026R" || fs.markPaid != 1 {
		t.Fatalf("status %s trade %q markPaid=%d", st.Status, st.TradeNo, fs.markPaid)
	}
	if st.Reconciliations < 4 {
		t.Fatalf("reconciliations = %d, want >= 4", st.Reconciliations)
	}
}

func TestPaymentWorkflow_ExpiryClosesAtAlipayThenLocally(t *testing.T) {
	env, fs := newEnv(t)
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(payment.Trade{State: payment.TradeNotExist}, nil)
	closes := 0
	env.OnActivity(a.CloseTrade, mock.Anything, mock.Anything).Return(func(_ context.Context, _ string) (payment.CloseOutcome, error) {
		closes++
		if fs.closed != 0 {
			t.Error("payment closed locally before alipay")
		}
		return payment.CloseNotExist, nil
	})
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusClosed || fs.closed != 1 || closes != 1 || fs.markPaid != 0 {
		t.Fatalf("status %s closed=%d closes=%d markPaid=%d", st.Status, fs.closed, closes, fs.markPaid)
	}
}

func TestPaymentWorkflow_CloseRefusedBecausePaidTakesSuccessPath(t *testing.T) {
	env, fs := newEnv(t)
	queries := 0
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(func(_ context.Context, no string) (payment.Trade, error) {
		queries++
		if fs.p.Status == payment.StatusPending && queries > 15 {
			return payment.Trade{State: payment.TradePaid, TradeNo: "2026C", Amount: 990, PaymentNo: no}, nil
		}
		return payment.Trade{State: payment.TradeWaiting}, nil
	})
	env.OnActivity(a.CloseTrade, mock.Anything, mock.Anything).Return(func(_ context.Context, _ string) (payment.CloseOutcome, error) {
		queries = 100 // the buyer paid at the moment of closing
		return payment.CloseAlreadyPaid, nil
	})
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusPaid || fs.closed != 0 || fs.markPaid != 1 || st.TradeNo != "2026C" {
		t.Fatalf("status %s closed=%d markPaid=%d trade=%q; want PAID, never closed", st.Status, fs.closed, fs.markPaid, st.TradeNo)
	}
}

func TestPaymentWorkflow_AlipayCloseFailureRetriesOnNextTick(t *testing.T) {
	env, fs := newEnv(t)
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(payment.Trade{State: payment.TradeWaiting}, nil)
	closes := 0
	env.OnActivity(a.CloseTrade, mock.Anything, mock.Anything).Return(func(_ context.Context, _ string) (payment.CloseOutcome, error) {
		closes++
		if closes <= 5 { // one whole activity's attempts fail
			return 0, errors.New("connection refused")
		}
		return payment.CloseDone, nil
	})
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusClosed || fs.closed != 1 || closes != 6 {
		t.Fatalf("status %s closed=%d closes=%d", st.Status, fs.closed, closes)
	}
}

func TestPaymentWorkflow_PaidAfterLocalCloseIsRecordedAsAnomaly(t *testing.T) {
	env, fs := newEnv(t)
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(payment.Trade{State: payment.TradeWaiting}, nil)
	env.RegisterDelayedCallback(func() {
		fs.p.Status = payment.StatusClosed // an operator closed it behind the workflow's back
		env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "late"))
	}, 30*time.Second)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusClosed || len(fs.anomalies) != 1 || fs.anomalies[0] != "paid_after_close" || fs.grants != 0 || st.Anomaly == "" {
		t.Fatalf("status %s anomalies=%v grants=%d anomaly=%q", st.Status, fs.anomalies, fs.grants, st.Anomaly)
	}
}

func TestPaymentWorkflow_CheckoutUpdateAnswersAndRejectsOtherAmounts(t *testing.T) {
	env, fs := newEnv(t)
	var got workflows.CheckoutResult
	var rejected error
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(workflows.CheckoutUpdate, "u1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("rejected: %v", err) },
			OnAccept: func() {},
			OnComplete: func(res any, err error) {
				if err != nil {
					t.Errorf("checkout: %v", err)
					return
				}
				got = res.(workflows.CheckoutResult)
			},
		}, workflows.CheckoutRequest{Amount: 990, Currency: "CNY", Subject: "Coffee", Method: payment.MethodPage})
		env.UpdateWorkflow(workflows.CheckoutUpdate, "u2", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { rejected = err },
			OnAccept:   func() { t.Error("different amount accepted") },
			OnComplete: func(any, error) {},
		}, workflows.CheckoutRequest{Amount: 1000, Currency: "CNY", Subject: "Coffee", Method: payment.MethodPage})
	}, 0)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "n1")) }, time.Minute/2)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if got.PaymentNo == "" || got.PaymentNo != st.PaymentNo || got.PayURL == "" || got.Status != payment.StatusPending {
		t.Fatalf("checkout result %+v, state %+v", got, st)
	}
	var appErr *temporal.ApplicationError
	if !errors.As(rejected, &appErr) || appErr.Type() != "AmountConflict" {
		t.Fatalf("want AmountConflict rejection, got %v", rejected)
	}
}

func TestPaymentWorkflow_AdoptsExistingPendingPayment(t *testing.T) {
	env, fs := newEnv(t)
	fs.p = payment.Payment{PaymentNo: "PEXISTING", TenantID: "t1", OrderID: "o1", Amount: 990, Currency: "CNY",
		Status: payment.StatusPending, ExpireAt: time.Now().Add(time.Hour)}
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "n1")) }, time.Second)
	in := input()
	in.PaymentNo = "PEXISTING"
	env.ExecuteWorkflow(workflows.PaymentWorkflow, in)
	st := result(t, env)
	if st.PaymentNo != "PEXISTING" || st.Status != payment.StatusPaid || fs.markPaid != 1 {
		t.Fatalf("state %+v markPaid=%d", st, fs.markPaid)
	}
}

// A run that adopts a QR payment while its own input says page (an older re-drive, or a
// new checkout after a terminated run) must precreate the QR trade again, not hand out a
// cashier URL for a trade Alipay knows as a QR one. The fake OpenTrade answers a QR code
// only when asked for one.
func TestPaymentWorkflow_AdoptedPaymentKeepsItsMethod(t *testing.T) {
	env, fs := newEnv(t)
	fs.p = payment.Payment{PaymentNo: "PQR", TenantID: "t1", OrderID: "o1", Amount: 990, Currency: "CNY",
		Method: payment.MethodQR, Status: payment.StatusPending, ExpireAt: time.Now().Add(time.Hour)}
	env.RegisterDelayedCallback(func() {
		res, err := env.QueryWorkflow(workflows.StateQuery)
		if err != nil {
			t.Errorf("query: %v", err)
		} else {
			var st workflows.PaymentState
			if err := res.Get(&st); err != nil || st.QRCode == "" || st.PayURL != "" {
				t.Errorf("adopted QR payment state: qr=%q pay_url=%q err=%v", st.QRCode, st.PayURL, err)
			}
		}
		env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "n1"))
	}, time.Second)
	in := input()
	in.PaymentNo = "PQR"
	in.Method = payment.MethodPage
	env.ExecuteWorkflow(workflows.PaymentWorkflow, in)
	if st := result(t, env); st.Status != payment.StatusPaid {
		t.Fatalf("state %+v", st)
	}
}

func TestPaymentWorkflow_StateQueryWhilePending(t *testing.T) {
	env, fs := newEnv(t)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(workflows.StateQuery)
		if err != nil {
			t.Errorf("query: %v", err)
			return
		}
		var st workflows.PaymentState
		if err := v.Get(&st); err != nil {
			t.Error(err)
		}
		if st.Status != payment.StatusPending || !st.Initialized || st.PaymentNo == "" || st.PayURL == "" {
			t.Errorf("pending state %+v", st)
		}
		env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "n1"))
	}, time.Second)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	if st := result(t, env); st.Status != payment.StatusPaid {
		t.Fatalf("status %s", st.Status)
	}
}

func TestPaymentWorkflow_ChannelRefusalClosesPaymentAndFailsCheckout(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Activities{})
	workflows.Register(env)
	var closed int
	env.OnActivity(a.CreatePayment, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CreatePaymentInput) (activities.CreatePaymentResult, error) {
			return activities.CreatePaymentResult{Payment: payment.Payment{PaymentNo: in.PaymentNo, TenantID: in.TenantID,
				OrderID: in.OrderID, Amount: in.Amount, Currency: in.Currency, Status: payment.StatusPending, ExpireAt: in.ExpireAt}}, nil
		})
	env.OnActivity(a.OpenTrade, mock.Anything, mock.Anything).Return(activities.OpenTradeResult{},
		temporal.NewNonRetryableApplicationError("ACQ.ACCESS_FORBIDDEN", activities.ErrTypeChannelRefused, nil))
	env.OnActivity(a.ClosePayment, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ClosePaymentInput) (payment.Transition, error) {
			closed++
			if in.Reason != "channel_refused" {
				t.Errorf("reason %q", in.Reason)
			}
			return payment.Transition{Payment: payment.Payment{PaymentNo: in.PaymentNo, Status: payment.StatusClosed}, Changed: true}, nil
		})
	env.OnActivity(a.DeliverWebhook, mock.Anything, mock.Anything).Return(nil).Maybe()
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusClosed || closed != 1 {
		t.Fatalf("status %s closed=%d", st.Status, closed)
	}
}

func TestPaymentWorkflow_ReconciledAmountMismatchIsNeverPaid(t *testing.T) {
	env, fs := newEnv(t)
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(
		payment.Trade{State: payment.TradePaid, TradeNo: "2026X", Amount: 1}, nil)
	env.OnActivity(a.CloseTrade, mock.Anything, mock.Anything).Return(payment.CloseAlreadyPaid, nil)
	env.RegisterDelayedCallback(func() {
		if fs.markPaid != 0 || len(fs.anomalies) == 0 || fs.anomalies[0] != "amount_mismatch" {
			t.Errorf("markPaid=%d anomalies=%v", fs.markPaid, fs.anomalies)
		}
		if fs.p.Status != payment.StatusPending {
			t.Errorf("status %s", fs.p.Status)
		}
		env.CancelWorkflow()
	}, 20*time.Minute)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	if !env.IsWorkflowCompleted() || !temporal.IsCanceledError(env.GetWorkflowError()) {
		t.Fatalf("want a cancelled, still pending workflow; got %v", env.GetWorkflowError())
	}
	if fs.markPaid != 0 || fs.p.Status != payment.StatusPending {
		t.Fatalf("a mismatched amount was marked paid: markPaid=%d status=%s", fs.markPaid, fs.p.Status)
	}
}

func TestPaymentWorkflow_OperatorCancelClosesThePayment(t *testing.T) {
	env, fs := newEnv(t)
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(payment.Trade{State: payment.TradeWaiting}, nil)
	env.OnActivity(a.CloseTrade, mock.Anything, mock.Anything).Return(payment.CloseDone, nil)
	env.RegisterDelayedCallback(env.CancelWorkflow, 3*time.Minute)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusClosed || fs.closed != 1 || !st.WebhookSent {
		t.Fatalf("status %s closed=%d webhook=%v", st.Status, fs.closed, st.WebhookSent)
	}
}

func TestPaymentWorkflow_ContinuesAsNewWithItsStateWhenSuggested(t *testing.T) {
	env, fs := newEnv(t)
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(payment.Trade{State: payment.TradeWaiting}, nil)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.NotificationSignal, workflows.NotificationPayload{
			NotifyID: "wait-1", PaymentNo: fs.p.PaymentNo, State: payment.TradeWaiting, TradeStatus: "WAIT_BUYER_PAY"})
	}, 30*time.Second)
	env.RegisterDelayedCallback(func() { env.SetContinueAsNewSuggested(true) }, 90*time.Second)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	var can *workflow.ContinueAsNewError
	if !errors.As(env.GetWorkflowError(), &can) {
		t.Fatalf("want continue-as-new, got %v", env.GetWorkflowError())
	}
	var next workflows.PaymentInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.State == nil || !next.State.Initialized || next.PaymentNo != fs.p.PaymentNo || next.State.PayURL == "" ||
		len(next.State.SeenNotifyIDs) != 1 || next.Timing != input().Timing {
		t.Fatalf("carried input %+v state %+v", next, next.State)
	}
}

func TestPaymentWorkflow_ResumedRunDoesNotCreateAgain(t *testing.T) {
	env, fs := newEnv(t)
	fs.p = payment.Payment{PaymentNo: "PRESUMED", TenantID: "t1", OrderID: "o1", Amount: 990, Currency: "CNY", Status: payment.StatusPending}
	in := input()
	in.PaymentNo = "PRESUMED"
	in.State = &workflows.PaymentState{PaymentNo: "PRESUMED", TenantID: "t1", OrderID: "o1", Amount: 990, Currency: "CNY",
		Status: payment.StatusPending, Initialized: true, ExpireAt: time.Now().Add(time.Hour), SeenNotifyIDs: []string{"old"}}
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(payment.Trade{State: payment.TradeWaiting}, nil)
	created := 0
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []interface{}) {
		if info.ActivityType.Name == "CreatePayment" {
			created++
		}
	})
	env.RegisterDelayedCallback(func() {
		old := paidNotification(fs, "old") // already applied before continue-as-new: ignored
		env.SignalWorkflow(workflows.NotificationSignal, old)
	}, time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "new")) }, 2*time.Minute)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, in)
	st := result(t, env)
	if created != 0 || st.Status != payment.StatusPaid || st.TradeNo != "2026Tnew" || fs.markPaid != 1 {
		t.Fatalf("created=%d state %+v markPaid=%d", created, st, fs.markPaid)
	}
}
