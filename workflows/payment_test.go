package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
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
	// reads counts ReadPayment calls.
	reads  int
	closed int
	failed int
	grants int
	// webhookErr is what the merchant webhook answers (nil: delivered).
	webhookErr error
	// openErr is what OpenTrade answers (nil: the trade opens).
	openErr error
	// opened is the last OpenTrade input.
	opened activities.OpenTradeInput
	// others are earlier payments of the order, by payment_no; otherMarks counts MarkPaid
	// calls on them.
	others     map[string]payment.Payment
	otherMarks int
	anomalyNos []string
	// anomalies lists the kinds recorded for an operator.
	anomalies []string
	// unbacked are notify_ids with no verified notification recorded: MarkPaid on a
	// signal naming one (or none) refuses, as activities.MarkPaid does.
	unbacked map[string]bool
	// markPaidDown, while set, makes MarkPaid fail as MySQL down does.
	markPaidDown atomic.Bool
	// scheduleQueries makes CreatePayment create the payment with a first query by the
	// scheduled reconciler when the run asks for one, as the store does.
	scheduleQueries bool
	// readTakes is how long ReadPayment takes on the workflow clock (a joining checkout's
	// update handler is running meanwhile).
	readTakes time.Duration
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
			scheduled := fs.scheduleQueries && in.QueryInterval > 0
			return activities.CreatePaymentResult{Payment: fs.p, QueryScheduled: scheduled}, nil
		}).Maybe()
	env.OnActivity(a.OpenTrade, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.OpenTradeInput) (activities.OpenTradeResult, error) {
			fs.opened = in
			if fs.openErr != nil {
				return activities.OpenTradeResult{}, fs.openErr
			}
			switch in.Method {
			case payment.MethodQR:
				return activities.OpenTradeResult{QRCode: "https://qr.sim/" + in.PaymentNo}, nil
			case payment.MethodApp:
				return activities.OpenTradeResult{OrderString: "method=alipay.trade.app.pay&out_trade_no=" + in.PaymentNo}, nil
			case payment.MethodWap:
				return activities.OpenTradeResult{PayURL: "http://sim/gateway.do?method=alipay.trade.wap.pay&out_trade_no=" + in.PaymentNo}, nil
			}
			return activities.OpenTradeResult{PayURL: "http://sim/gateway.do?out_trade_no=" + in.PaymentNo}, nil
		}).Maybe()
	env.OnActivity(a.ReadPayment, mock.Anything, mock.Anything).Return(
		func(context.Context, string) (payment.Payment, error) { fs.reads++; return fs.p, nil }).
		AfterFn(func() time.Duration { return fs.readTakes }).Maybe()
	env.OnActivity(a.MarkPaid, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.MarkPaidInput) (payment.Transition, error) {
			if fs.markPaidDown.Load() {
				return payment.Transition{}, errors.New("mysql: connection refused")
			}
			if in.Evidence == activities.EvidenceNotification && (in.NotifyID == "" || fs.unbacked[in.NotifyID]) {
				fs.anomalies = append(fs.anomalies, payment.AnomalyUnverifiedSignal)
				fs.anomalyNos = append(fs.anomalyNos, in.PaymentNo)
				return payment.Transition{Unverified: "no verified notification is recorded"}, nil
			}
			if other, ok := fs.others[in.PaymentNo]; ok {
				fs.otherMarks++
				if !in.NotOwned && other.Status == payment.StatusPending {
					other.Status, other.TradeNo = payment.StatusPaid, in.TradeNo
					fs.others[in.PaymentNo] = other
					return payment.Transition{Payment: other, Changed: true}, nil
				}
				return payment.Transition{Payment: other}, nil
			}
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
	env.OnActivity(a.FailPayment, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ClosePaymentInput) (payment.Transition, error) {
			if fs.p.Status != payment.StatusPending {
				return payment.Transition{Payment: fs.p}, nil
			}
			fs.failed++
			fs.p.Status, fs.p.CloseReason = payment.StatusFailed, in.Reason
			return payment.Transition{Payment: fs.p, Changed: true, EventID: "evt_" + fs.p.PaymentNo + "_failed"}, nil
		}).Maybe()
	env.OnActivity(a.DeliverWebhook, mock.Anything, mock.Anything).Return(
		func(context.Context, string) error { return fs.webhookErr }).Maybe()
	env.OnActivity(a.RecordAnomaly, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AnomalyInput) error {
			fs.anomalies = append(fs.anomalies, in.Kind)
			fs.anomalyNos = append(fs.anomalyNos, in.PaymentNo)
			if in.Subject != "" {
				// A payment's run records anomalies about the payment as a whole.
				t.Errorf("%s anomaly recorded about %q, want the payment as a whole", in.Kind, in.Subject)
			}
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
	env, fs := newEnv(t)
	fs.openErr = temporal.NewNonRetryableApplicationError("ACQ.ACCESS_FORBIDDEN", activities.ErrTypeChannelRefused, nil)
	env.OnActivity(a.CloseTrade, mock.Anything, mock.Anything).Return(payment.CloseNotExist, nil)
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(payment.Trade{State: payment.TradeNotExist}, nil)
	var checkoutErr error
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(workflows.CheckoutUpdate, "u1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { checkoutErr = err }, OnAccept: func() {},
			OnComplete: func(_ any, err error) { checkoutErr = err },
		}, workflows.CheckoutRequest{Amount: 990, Currency: "CNY", Subject: "Coffee", Method: payment.MethodPage})
	}, 0)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusClosed || fs.closed != 1 || st.OpenRefused == "" {
		t.Fatalf("status %s closed=%d open_refused=%q", st.Status, fs.closed, st.OpenRefused)
	}
	var appErr *temporal.ApplicationError
	if !errors.As(checkoutErr, &appErr) || appErr.Type() != activities.ErrTypeChannelRefused {
		t.Fatalf("checkout answered %v, want a ChannelRefused error (never a closed payment)", checkoutErr)
	}
}

// A run that adopts a payment Alipay already holds the money for (the buyer paid while
// the previous run was terminated) is refused when it opens the trade again. It must take
// the success path, never close the payment locally.
func TestPaymentWorkflow_AdoptedPaidTradeRefusedAtOpenIsPaidNotClosed(t *testing.T) {
	for _, method := range []payment.Method{payment.MethodQR, payment.MethodPage} {
		t.Run(string(method), func(t *testing.T) {
			env, fs := newEnv(t)
			fs.p = payment.Payment{PaymentNo: "PADOPT", TenantID: "t1", OrderID: "o1", Amount: 990, Currency: "CNY",
				Method: method, Status: payment.StatusPending, ExpireAt: time.Now().Add(-time.Minute)}
			fs.openErr = temporal.NewNonRetryableApplicationError("ACQ.TRADE_HAS_SUCCESS", activities.ErrTypeChannelRefused, nil)
			env.OnActivity(a.CloseTrade, mock.Anything, mock.Anything).Return(payment.CloseAlreadyPaid, nil)
			env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(
				payment.Trade{State: payment.TradePaid, TradeNo: "2026ADOPT", Amount: 990, PaymentNo: "PADOPT"}, nil)
			in := input()
			in.PaymentNo, in.Method = "PADOPT", method
			env.ExecuteWorkflow(workflows.PaymentWorkflow, in)
			st := result(t, env)
			if st.Status != payment.StatusPaid || fs.closed != 0 || fs.markPaid != 1 || st.TradeNo != "2026ADOPT" || fs.grants != 1 {
				t.Fatalf("status %s closed=%d markPaid=%d trade=%q grants=%d; want PAID and never closed",
					st.Status, fs.closed, fs.markPaid, st.TradeNo, fs.grants)
			}
		})
	}
}

// While Alipay cannot confirm the trade's state, a refused open leaves the payment pending:
// it is never closed locally on a guess.
func TestPaymentWorkflow_RefusedOpenWaitsForAlipayBeforeClosing(t *testing.T) {
	env, fs := newEnv(t)
	fs.p = payment.Payment{PaymentNo: "PWAIT", TenantID: "t1", OrderID: "o1", Amount: 990, Currency: "CNY",
		Method: payment.MethodPage, Status: payment.StatusPending, ExpireAt: time.Now().Add(-time.Minute)}
	fs.openErr = temporal.NewNonRetryableApplicationError("payment expired", activities.ErrTypeInvalid, nil)
	down := true
	env.OnActivity(a.CloseTrade, mock.Anything, mock.Anything).Return(func(context.Context, string) (payment.CloseOutcome, error) {
		if down {
			return 0, errors.New("connection refused")
		}
		return payment.CloseNotExist, nil
	})
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(func(context.Context, string) (payment.Trade, error) {
		if down {
			return payment.Trade{}, errors.New("connection refused")
		}
		return payment.Trade{State: payment.TradeNotExist}, nil
	})
	env.RegisterDelayedCallback(func() {
		if fs.closed != 0 || fs.p.Status != payment.StatusPending {
			t.Errorf("closed locally while alipay was unreachable: closed=%d status=%s", fs.closed, fs.p.Status)
		}
		down = false
	}, 30*time.Minute)
	in := input()
	in.PaymentNo = "PWAIT"
	env.ExecuteWorkflow(workflows.PaymentWorkflow, in)
	st := result(t, env)
	if st.Status != payment.StatusClosed || fs.closed != 1 {
		t.Fatalf("status %s closed=%d, want closed once alipay confirmed", st.Status, fs.closed)
	}
}

// A page or wap payment whose cashier was never opened has no trade at Alipay yet, nor has
// an app payment whose order string the buyer's Alipay app has not submitted, and a QR
// code that was never scanned may have none either, but the buyer could still create one
// until the pay link expires: "not exist" closes such a payment only after expiry.
func TestPaymentWorkflow_CancelOfUnusedPayLinkClosesAtExpiry(t *testing.T) {
	for _, method := range []payment.Method{payment.MethodPage, payment.MethodQR, payment.MethodWap, payment.MethodApp} {
		t.Run(string(method), func(t *testing.T) {
			env, fs := newEnv(t)
			env.OnActivity(a.CloseTrade, mock.Anything, mock.Anything).Return(payment.CloseNotExist, nil)
			env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(payment.Trade{State: payment.TradeNotExist}, nil)
			var start time.Time
			env.RegisterDelayedCallback(func() {
				start = env.Now()
				env.CancelWorkflow()
			}, 30*time.Second)
			env.RegisterDelayedCallback(func() {
				if fs.closed != 0 {
					t.Error("closed before the pay link expired")
				}
			}, 10*time.Minute)
			in := input()
			in.Method = method
			env.ExecuteWorkflow(workflows.PaymentWorkflow, in)
			st := result(t, env)
			if st.Status != payment.StatusClosed || fs.closed != 1 || env.Now().Sub(start) < 14*time.Minute {
				t.Fatalf("status %s closed=%d after %s", st.Status, fs.closed, env.Now().Sub(start))
			}
		})
	}
}

// A new checkout that starts a run adopting a payment which can no longer be paid (its
// run was terminated and it expired) is answered as retryable while that payment is
// closed, never refused for good: the order's next payment follows.
func TestPaymentWorkflow_CheckoutOnAdoptedDeadPaymentIsRetryable(t *testing.T) {
	env, fs := newEnv(t)
	fs.p = payment.Payment{PaymentNo: "PDEAD", TenantID: "t1", OrderID: "o1", Amount: 990, Currency: "CNY",
		Method: payment.MethodPage, Status: payment.StatusPending, ExpireAt: time.Now().Add(-time.Minute)}
	fs.openErr = temporal.NewNonRetryableApplicationError("payment expired", activities.ErrTypeInvalid, nil)
	env.OnActivity(a.CloseTrade, mock.Anything, mock.Anything).Return(payment.CloseNotExist, nil)
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(payment.Trade{State: payment.TradeNotExist}, nil)
	var res workflows.CheckoutResult
	var err error
	env.RegisterDelayedCallback(func() {
		checkoutOn(env, "new", workflows.CheckoutRequest{Amount: 990, Currency: "CNY", Subject: "Coffee"}, &res, &err)
	}, 0)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusClosed || errType(err) != activities.ErrTypeFinishing {
		t.Fatalf("status %s, checkout answered %v; want the dead payment closed and a retryable answer", st.Status, err)
	}
}

// A run that cannot set up its payment because MySQL stayed down for longer than the
// retries answers its checkouts as unavailable (retryable), not as an invalid request.
func TestPaymentWorkflow_InitOutageIsRetryableForTheCheckout(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Activities{})
	workflows.Register(env)
	env.OnActivity(a.CreatePayment, mock.Anything, mock.Anything).Return(activities.CreatePaymentResult{},
		temporal.NewNonRetryableApplicationError("dial tcp 127.0.0.1:3306: connection refused", "", nil))
	var res workflows.CheckoutResult
	var err error
	env.RegisterDelayedCallback(func() {
		checkoutOn(env, "u1", workflows.CheckoutRequest{Amount: 990, Currency: "CNY", Subject: "Coffee"}, &res, &err)
	}, 0)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	if errType(err) != activities.ErrTypeUnavailable {
		t.Fatalf("checkout answered %v, want %s", err, activities.ErrTypeUnavailable)
	}
}

// An operator's cancel while Alipay's close keeps failing must not end the run with the
// payment pending and nothing watching it: the run keeps closing until Alipay answers.
func TestPaymentWorkflow_CancelKeepsClosingUntilAlipayConfirms(t *testing.T) {
	env, fs := newEnv(t)
	// Each failure ends its activity at once (no retries), so the count is of close paths.
	down := temporal.NewNonRetryableApplicationError("connection refused", "Unavailable", nil)
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(func(context.Context, string) (payment.Trade, error) {
		return payment.Trade{}, down
	})
	closes := 0
	env.OnActivity(a.CloseTrade, mock.Anything, mock.Anything).Return(func(context.Context, string) (payment.CloseOutcome, error) {
		closes++
		if closes <= 3 {
			return 0, down
		}
		return payment.CloseDone, nil
	})
	env.RegisterDelayedCallback(env.CancelWorkflow, 30*time.Second)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusClosed || fs.closed != 1 || closes != 4 || !st.CancelRequested {
		t.Fatalf("status %s closed=%d closes=%d cancel=%v", st.Status, fs.closed, closes, st.CancelRequested)
	}
	if p := fs.p; p.Status != payment.StatusClosed {
		t.Fatalf("stored status %s", p.Status)
	}
}

// A paid notification that reaches a run whose payment is already closed (the API saw it
// pending and re-drove it; the run found it closed) is recorded as an anomaly, not dropped.
func TestPaymentWorkflow_PaidSignalForClosedPaymentIsAnAnomaly(t *testing.T) {
	env, fs := newEnv(t)
	fs.p = payment.Payment{PaymentNo: "PCLOSED", TenantID: "t1", OrderID: "o1", Amount: 990, Currency: "CNY",
		Status: payment.StatusClosed, ExpireAt: time.Now()}
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "late"))
	}, 0)
	in := input()
	in.PaymentNo = "PCLOSED"
	env.ExecuteWorkflow(workflows.PaymentWorkflow, in)
	st := result(t, env)
	if st.Status != payment.StatusClosed || len(fs.anomalies) != 1 || fs.anomalies[0] != "paid_after_close" || fs.markPaid != 0 {
		t.Fatalf("status %s anomalies=%v markPaid=%d", st.Status, fs.anomalies, fs.markPaid)
	}
}

func checkoutOn(env *testsuite.TestWorkflowEnvironment, id string, req workflows.CheckoutRequest, res *workflows.CheckoutResult, errp *error) {
	env.UpdateWorkflow(workflows.CheckoutUpdate, id, &testsuite.TestUpdateCallback{
		OnReject: func(err error) { *errp = err }, OnAccept: func() {},
		OnComplete: func(v any, err error) {
			*errp = err
			if err == nil {
				*res = v.(workflows.CheckoutResult)
			}
		},
	}, req)
}

func errType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}

// A run whose payment is no longer pending answers a checkout by status: a paid order is
// final, and a closed one makes way for a new run instead of handing out a dead payment.
func TestPaymentWorkflow_FinishedRunAnswersCheckoutByStatus(t *testing.T) {
	coffee := workflows.CheckoutRequest{Amount: 990, Currency: "CNY", Subject: "Coffee", Method: payment.MethodPage}
	t.Run("paid", func(t *testing.T) {
		env, fs := newEnv(t)
		fs.webhookErr = errors.New("merchant answered HTTP 503") // keeps the paid run open
		var res workflows.CheckoutResult
		var err, repurchaseErr error
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "n1")) }, time.Second)
		env.RegisterDelayedCallback(func() {
			checkoutOn(env, "again", coffee, &res, &err)
			again := coffee
			again.Repurchase = true
			checkoutOn(env, "repurchase", again, &res, &repurchaseErr)
		}, 2*time.Second)
		in := input()
		in.Timing.WebhookMaxAttempts, in.Timing.WebhookInitialInterval, in.Timing.WebhookMaxInterval = 50, time.Minute, time.Hour
		env.ExecuteWorkflow(workflows.PaymentWorkflow, in)
		if st := result(t, env); st.Status != payment.StatusPaid || st.WebhookSent {
			t.Fatalf("state %+v", st)
		}
		if errType(err) != activities.ErrTypeOrderPaid || res.PaymentNo != "" {
			t.Fatalf("checkout of a paid order: %v %+v, want OrderAlreadyPaid", err, res)
		}
		if errType(repurchaseErr) != activities.ErrTypeFinishing {
			t.Fatalf("re-purchase on the paid run: %v, want PaymentFinishing", repurchaseErr)
		}
	})
	t.Run("closed", func(t *testing.T) {
		env, fs := newEnv(t)
		env.OnActivity(a.CloseTrade, mock.Anything, mock.Anything).Return(payment.CloseDone, nil)
		env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(payment.Trade{State: payment.TradeWaiting}, nil)
		// The merchant is down: the webhook would keep the run open for its whole backoff.
		fs.webhookErr = errors.New("merchant answered HTTP 503")
		var res workflows.CheckoutResult
		var err error
		var closedAt time.Time
		env.RegisterDelayedCallback(func() {
			closedAt = env.Now()
			if fs.p.Status != payment.StatusClosed {
				t.Errorf("status %s at 16m", fs.p.Status)
			}
			checkoutOn(env, "after-close", coffee, &res, &err)
		}, 16*time.Minute)
		in := input()
		in.Timing.WebhookMaxAttempts, in.Timing.WebhookInitialInterval, in.Timing.WebhookMaxInterval = 50, time.Minute, time.Hour
		env.ExecuteWorkflow(workflows.PaymentWorkflow, in)
		st := result(t, env)
		if errType(err) != activities.ErrTypeFinishing || res.PaymentNo != "" {
			t.Fatalf("checkout of a closed run: %v %+v, want PaymentFinishing", err, res)
		}
		if st.WebhookSent || env.Now().Sub(closedAt) > time.Minute {
			t.Fatalf("run did not make way: ended %s after the checkout, webhook_sent=%v", env.Now().Sub(closedAt), st.WebhookSent)
		}
	})
}

// The validator and the handler judge a checkout against the payment the run holds. An
// adopting run's input may carry another amount (the new checkout's), and the adopted
// payment's amount is the one that counts.
func TestPaymentWorkflow_AdoptingRunJudgesCheckoutsByTheAdoptedPayment(t *testing.T) {
	env, fs := newEnv(t)
	fs.p = payment.Payment{PaymentNo: "PAMT", TenantID: "t1", OrderID: "o1", Amount: 990, Currency: "CNY",
		Status: payment.StatusPending, ExpireAt: time.Now().Add(time.Hour)}
	var res workflows.CheckoutResult
	var sameErr, otherErr error
	var other workflows.CheckoutResult
	env.RegisterDelayedCallback(func() {
		checkoutOn(env, "same", workflows.CheckoutRequest{Amount: 990, Currency: "CNY", Subject: "Coffee"}, &res, &sameErr)
		checkoutOn(env, "other", workflows.CheckoutRequest{Amount: 1000, Currency: "CNY", Subject: "Coffee"}, &other, &otherErr)
	}, time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "n1")) }, time.Minute/2)
	in := input()
	in.Amount = 1000 // the checkout that started this run asked for 1000 fen
	env.ExecuteWorkflow(workflows.PaymentWorkflow, in)
	result(t, env)
	if sameErr != nil || res.PaymentNo != "PAMT" || res.Amount != 990 {
		t.Fatalf("checkout for the adopted amount: %v %+v", sameErr, res)
	}
	var appErr *temporal.ApplicationError
	if !errors.As(otherErr, &appErr) || appErr.Type() != "AmountConflict" || !strings.Contains(appErr.Message(), "990 fen") {
		t.Fatalf("checkout for another amount: %v, want AmountConflict naming 990 fen", otherErr)
	}
}

func TestPaymentWorkflow_ReconciledAmountMismatchIsNeverPaid(t *testing.T) {
	env, fs := newEnv(t)
	queries := 0
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(func(context.Context, string) (payment.Trade, error) {
		queries++
		return payment.Trade{State: payment.TradePaid, TradeNo: "2026X", Amount: 1}, nil
	})
	env.OnActivity(a.CloseTrade, mock.Anything, mock.Anything).Return(payment.CloseAlreadyPaid, nil)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if fs.markPaid != 0 || st.Status != payment.StatusFailed || fs.failed != 1 {
		t.Fatalf("markPaid=%d status=%s failed=%d, want never paid and FAILED once", fs.markPaid, st.Status, fs.failed)
	}
	if len(fs.anomalies) != 1 || fs.anomalies[0] != "amount_mismatch" || queries != 1 {
		t.Fatalf("anomalies=%v queries=%d, want one amount_mismatch and no reconciling forever", fs.anomalies, queries)
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

// A signal that arrives while a run about to continue as new waits for its handlers (a
// joining checkout reading the payment's row) is read before the run goes on, never
// dropped with the run: a paid notification pays the payment in this run, a notification
// that does not advance it is carried over as seen, and a reconciler's wake is carried
// over as a kept one, which the next run acts on at once. Only then is the change id of
// that reading asked; a run that continues as new with nothing late asks none.
func TestPaymentWorkflow_ASignalWhileHandlersFinishBeforeContinueAsNewIsNotDropped(t *testing.T) {
	const (
		joinAt = 20 * time.Second
		canAt  = 21 * time.Second
		lateAt = 22 * time.Second
		// readTakes keeps the joining checkout's handler running past lateAt.
		readTakes = 4 * time.Second
	)
	for _, tc := range []struct {
		name      string
		scheduled bool
		// versions chooses the versions recorded (nil: the newest).
		versions worker.PreferredVersionProvider
		late     func(fs *fakeStore) (string, any)
		// paid: the run ends PAID; otherwise it continues as new and check judges what
		// it carries.
		paid      bool
		check     func(next workflows.PaymentState) string
		wantAsked []string
	}{
		{
			name: "a paid notification",
			late: func(fs *fakeStore) (string, any) {
				return workflows.NotificationSignal, paidNotification(fs, "late-paid")
			},
			paid:      true,
			wantAsked: []string{paymentChanges, signalsBeforeCAN},
		},
		{
			name: "a notification that does not advance the payment",
			late: func(fs *fakeStore) (string, any) {
				return workflows.NotificationSignal, workflows.NotificationPayload{NotifyID: "late-wait",
					PaymentNo: fs.p.PaymentNo, State: payment.TradeWaiting, TradeStatus: "WAIT_BUYER_PAY"}
			},
			check: func(next workflows.PaymentState) string {
				if !slices.Contains(next.SeenNotifyIDs, "late-wait") {
					return fmt.Sprintf("seen notify_ids %v, want late-wait among them", next.SeenNotifyIDs)
				}
				return ""
			},
			wantAsked: []string{paymentChanges, signalsBeforeCAN},
		},
		{
			name:      "a reconciler's wake",
			scheduled: true,
			late:      func(*fakeStore) (string, any) { return workflows.ReconcileSignal, nil },
			check: func(next workflows.PaymentState) string {
				if next.NextReconcileAt.IsZero() {
					return "no kept wake carried over (NextReconcileAt zero): the wake was dropped"
				}
				return ""
			},
			wantAsked: []string{paymentChanges, signalsBeforeCAN},
		},
		{
			// What a replay of a run recorded before the change answers: DefaultVersion.
			name: "a paid notification, on a run from before the change",
			versions: func(in worker.PreferredVersionProviderInput) *worker.VersionPreference {
				if in.ChangeID == signalsBeforeCAN {
					return &worker.VersionPreference{Version: workflow.DefaultVersion}
				}
				return nil
			},
			late: func(fs *fakeStore) (string, any) {
				return workflows.NotificationSignal, paidNotification(fs, "late-paid")
			},
			check: func(next workflows.PaymentState) string {
				if slices.Contains(next.SeenNotifyIDs, "late-paid") {
					return fmt.Sprintf("seen notify_ids %v: the run read the late signal, as it was not recorded doing", next.SeenNotifyIDs)
				}
				return ""
			},
			wantAsked: []string{paymentChanges, signalsBeforeCAN},
		},
		{
			name:      "nothing",
			check:     func(workflows.PaymentState) string { return "" },
			wantAsked: []string{paymentChanges},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, fs := newEnv(t)
			asked, _ := askedChangeIDs(env, tc.versions)
			fs.readTakes = readTakes
			in := openedInput(fs, env.Now().Add(15*time.Minute).UTC().Truncate(time.Second))
			in.Opened.QueryScheduled = tc.scheduled
			var joined workflows.CheckoutResult
			var joinErr error
			env.RegisterDelayedCallback(func() {
				env.UpdateWorkflow(workflows.CheckoutUpdate, "join", &testsuite.TestUpdateCallback{
					OnAccept: func() {}, OnReject: func(err error) { joinErr = err },
					OnComplete: func(v interface{}, err error) {
						joinErr = err
						if err == nil {
							joined = v.(workflows.CheckoutResult)
						}
					},
				}, workflows.CheckoutRequest{Amount: 990, Currency: "CNY", Subject: "Coffee", Method: payment.MethodPage})
			}, joinAt)
			env.RegisterDelayedCallback(func() {
				env.SetContinueAsNewSuggested(true)
				// A notification that changes nothing wakes the run's loop, which then
				// continues as new and waits for the checkout's handler.
				env.SignalWorkflow(workflows.NotificationSignal, workflows.NotificationPayload{NotifyID: "wake-loop",
					PaymentNo: fs.p.PaymentNo, State: payment.TradeWaiting, TradeStatus: "WAIT_BUYER_PAY"})
			}, canAt)
			if tc.late != nil {
				env.RegisterDelayedCallback(func() {
					if joined.PaymentNo != "" || joinErr != nil {
						t.Errorf("the checkout was answered (%+v, %v) before the late signal, want its handler still running", joined, joinErr)
					}
					env.SignalWorkflow(tc.late(fs))
				}, lateAt)
			}
			env.ExecuteWorkflow(workflows.PaymentWorkflow, in)
			if joinErr != nil || joined.PaymentNo != in.PaymentNo {
				t.Fatalf("joining checkout answered %+v, %v; want payment %s", joined, joinErr, in.PaymentNo)
			}
			if tc.paid {
				st := result(t, env)
				if st.Status != payment.StatusPaid || fs.markPaid != 1 || fs.grants != 1 || !st.WebhookSent {
					t.Fatalf("state %s markPaid=%d, want PAID once by the late notification", st.Status, fs.markPaid)
				}
			} else {
				var can *workflow.ContinueAsNewError
				if !errors.As(env.GetWorkflowError(), &can) {
					t.Fatalf("want continue-as-new, got %v", env.GetWorkflowError())
				}
				var next workflows.PaymentInput
				if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
					t.Fatal(err)
				}
				if next.State == nil || next.State.Status != payment.StatusPending {
					t.Fatalf("carried state %+v, want the pending payment", next.State)
				}
				if msg := tc.check(*next.State); msg != "" {
					t.Fatal(msg)
				}
			}
			if !slices.Equal(*asked, tc.wantAsked) {
				t.Fatalf("change ids asked: %v, want %v", *asked, tc.wantAsked)
			}
		})
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

// A paid notification for an earlier payment of the order reaches this run (the API saw
// that payment pending just before it closed and this run began). It is settled on that
// payment: closed, it records paid_after_close for it; this run's payment is untouched.
func TestPaymentWorkflow_PaidNotificationForAnEarlierPaymentIsNotDropped(t *testing.T) {
	env, fs := newEnv(t)
	fs.others = map[string]payment.Payment{"PEARLIER": {PaymentNo: "PEARLIER", TenantID: "t1", OrderID: "o1", Amount: 990,
		Status: payment.StatusClosed}}
	env.RegisterDelayedCallback(func() {
		n := paidNotification(fs, "old-payment")
		n.PaymentNo = "PEARLIER"
		env.SignalWorkflow(workflows.NotificationSignal, n)
	}, time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "n1")) }, time.Minute/2)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if fs.otherMarks != 1 || len(fs.anomalies) != 1 || fs.anomalies[0] != "paid_after_close" || fs.anomalyNos[0] != "PEARLIER" {
		t.Fatalf("otherMarks=%d anomalies=%v on %v", fs.otherMarks, fs.anomalies, fs.anomalyNos)
	}
	if st.Status != payment.StatusPaid || fs.markPaid != 1 {
		t.Fatalf("this run's payment: %s, markPaid=%d", st.Status, fs.markPaid)
	}
}

// A checkout for wap answers the cashier URL and one for app the order string, and
// nothing else; each is a pay link the buyer may use until expiry.
func TestPaymentWorkflow_CheckoutAnswersWapAndAppPayLinks(t *testing.T) {
	for _, tc := range []struct {
		method       payment.Method
		wantURL      bool
		wantOrderStr bool
	}{
		{payment.MethodWap, true, false},
		{payment.MethodApp, false, true},
	} {
		t.Run(string(tc.method), func(t *testing.T) {
			env, fs := newEnv(t)
			var res workflows.CheckoutResult
			var err error
			env.RegisterDelayedCallback(func() {
				checkoutOn(env, "c1", workflows.CheckoutRequest{Amount: 990, Currency: "CNY", Subject: "Coffee", Method: tc.method}, &res, &err)
			}, 0)
			env.RegisterDelayedCallback(func() {
				env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "n1"))
			}, time.Minute)
			in := input()
			in.Method, in.QuitURL = tc.method, "https://shop.example/cart"
			env.ExecuteWorkflow(workflows.PaymentWorkflow, in)
			st := result(t, env)
			if err != nil || (res.PayURL != "") != tc.wantURL || (res.OrderString != "") != tc.wantOrderStr || res.QRCode != "" {
				t.Fatalf("checkout answered %+v, %v", res, err)
			}
			if !st.PayLinkIssued || st.OrderString != res.OrderString || st.Status != payment.StatusPaid {
				t.Fatalf("state %+v", st)
			}
			if fs.opened.Method != tc.method || fs.opened.QuitURL != "https://shop.example/cart" {
				t.Fatalf("OpenTrade got %+v", fs.opened)
			}
		})
	}
}

// A run that adopts a pending wap or app payment while its own input says page (an older
// re-drive input) opens the same kind of trade again.
func TestPaymentWorkflow_AdoptedWapAndAppPaymentsKeepTheirMethod(t *testing.T) {
	for _, m := range []payment.Method{payment.MethodWap, payment.MethodApp} {
		t.Run(string(m), func(t *testing.T) {
			env, fs := newEnv(t)
			fs.p = payment.Payment{PaymentNo: "PADOPT", TenantID: "t1", OrderID: "o1", Amount: 990, Currency: "CNY",
				Method: m, Status: payment.StatusPending, ExpireAt: time.Now().Add(time.Hour)}
			var st workflows.PaymentState
			env.RegisterDelayedCallback(func() {
				if res, err := env.QueryWorkflow(workflows.StateQuery); err != nil || res.Get(&st) != nil {
					t.Errorf("query: %v", err)
				}
				env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "n1"))
			}, time.Second)
			in := input()
			in.PaymentNo, in.Method = "PADOPT", payment.MethodPage
			env.ExecuteWorkflow(workflows.PaymentWorkflow, in)
			if final := result(t, env); final.Status != payment.StatusPaid {
				t.Fatalf("state %+v", final)
			}
			switch m {
			case payment.MethodApp:
				if st.OrderString == "" || st.PayURL != "" {
					t.Fatalf("adopted app payment: %+v", st)
				}
			case payment.MethodWap:
				if !strings.Contains(st.PayURL, "alipay.trade.wap.pay") || st.OrderString != "" {
					t.Fatalf("adopted wap payment: %+v", st)
				}
			}
		})
	}
}

// openedInput is the input of a run the API started for a payment it created and opened
// itself.
func openedInput(fs *fakeStore, expireAt time.Time) workflows.PaymentInput {
	fs.p = payment.Payment{PaymentNo: "P20261202API", TenantID: "t1", OrderID: "o1", Amount: 990, Currency: "CNY",
		Subject: "Coffee", Method: payment.MethodPage, ExpireAt: expireAt, Status: payment.StatusPending}
	in := input()
	in.PaymentNo = fs.p.PaymentNo
	in.Opened = &workflows.OpenedPayment{ExpireAt: expireAt, PayURL: "http://sim/gateway.do?out_trade_no=" + fs.p.PaymentNo}
	return in
}

// A run the API started for a payment it created and opened runs no activity in its
// first workflow task, answers a joining checkout with the API's payment and pay link once
// it has read the row (one read, whatever the number of joining checkouts), and pays on
// the notification exactly once.
func TestPaymentWorkflow_OpenedByTheAPIStartsWithoutActivities(t *testing.T) {
	env, fs := newEnv(t)
	in := openedInput(fs, time.Now().Add(15*time.Minute).UTC().Truncate(time.Second))
	var activitiesRun []string
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []interface{}) {
		activitiesRun = append(activitiesRun, info.ActivityType.Name)
	})
	var joined workflows.CheckoutResult
	var joinErr error
	for i, at := range []time.Duration{time.Second, 2 * time.Second} {
		env.RegisterDelayedCallback(func() {
			if i == 0 && len(activitiesRun) != 0 {
				t.Errorf("activities in the first workflow task: %v, want none", activitiesRun)
			}
			env.UpdateWorkflow(workflows.CheckoutUpdate, fmt.Sprintf("join%d", i), &testsuite.TestUpdateCallback{
				OnAccept: func() {}, OnReject: func(err error) { joinErr = err },
				OnComplete: func(v interface{}, err error) {
					joinErr = err
					if err == nil {
						joined = v.(workflows.CheckoutResult)
					}
				},
			}, workflows.CheckoutRequest{Amount: 990, Currency: "CNY", Subject: "Coffee", Method: payment.MethodPage})
		}, at)
	}
	env.RegisterDelayedCallback(func() {
		if len(activitiesRun) != 1 || activitiesRun[0] != "ReadPayment" {
			t.Errorf("activities before the notification: %v, want one ReadPayment", activitiesRun)
		}
		env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "n1"))
		env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "n1"))
	}, 10*time.Second)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, in)
	st := result(t, env)
	if joinErr != nil || joined.PaymentNo != in.PaymentNo || joined.PayURL != in.Opened.PayURL || !joined.ExpireAt.Equal(in.Opened.ExpireAt) {
		t.Fatalf("joining checkout answered %+v, %v; want payment %s with the API's pay link", joined, joinErr, in.PaymentNo)
	}
	if st.Status != payment.StatusPaid || fs.markPaid != 1 || fs.grants != 1 || !st.WebhookSent {
		t.Fatalf("state %+v markPaid=%d grants=%d, want PAID once with its grant and webhook", st, fs.markPaid, fs.grants)
	}
	if fs.opened.PaymentNo != "" {
		t.Fatalf("the run opened the trade again (%+v); the API had opened it", fs.opened)
	}
}

// A run for an opened payment whose row is no longer pending (paid by a notification its
// signal has not brought yet) never answers a joining checkout with it as pending and its
// pay link: the checkout is told to retry, and the retry gets the final answer.
func TestPaymentWorkflow_AnOpenedRunReadsTheRowBeforeAnsweringAJoiningCheckout(t *testing.T) {
	env, fs := newEnv(t)
	in := openedInput(fs, time.Now().Add(15*time.Minute).UTC().Truncate(time.Second))
	fs.p.Status = payment.StatusPaid
	var joined workflows.CheckoutResult
	var joinErr error
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(workflows.CheckoutUpdate, "join", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { joinErr = err },
			OnComplete: func(v interface{}, err error) {
				joinErr = err
				if err == nil {
					joined = v.(workflows.CheckoutResult)
				}
			},
		}, workflows.CheckoutRequest{Amount: 990, Currency: "CNY", Subject: "Coffee", Method: payment.MethodPage})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		fs.p.Status = payment.StatusPending
		env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "n1"))
	}, 10*time.Second)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, in)
	st := result(t, env)
	var appErr *temporal.ApplicationError
	if !errors.As(joinErr, &appErr) || appErr.Type() != activities.ErrTypeFinishing || joined.PayURL != "" {
		t.Fatalf("joining checkout of a paid row answered %+v, %v; want %s (retry) and no pay link", joined, joinErr, activities.ErrTypeFinishing)
	}
	if fs.reads != 1 || st.Status != payment.StatusPaid || fs.markPaid != 1 {
		t.Fatalf("reads=%d state %s markPaid=%d, want one read and PAID once", fs.reads, st.Status, fs.markPaid)
	}
}

// An opened payment nobody pays is closed at its expiry, at Alipay first; its pay link is
// in the buyer's hands, so "trade not exist" before expiry does not close it.
func TestPaymentWorkflow_OpenedPaymentUnpaidIsClosedAtExpiry(t *testing.T) {
	env, fs := newEnv(t)
	expireAt := env.Now().Add(15 * time.Minute).UTC().Truncate(time.Second)
	in := openedInput(fs, expireAt)
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(payment.Trade{State: payment.TradeNotExist}, nil)
	closedAtAlipay := time.Time{}
	env.OnActivity(a.CloseTrade, mock.Anything, mock.Anything).Return(
		func(context.Context, string) (payment.CloseOutcome, error) {
			closedAtAlipay = env.Now()
			return payment.CloseNotExist, nil
		})
	env.ExecuteWorkflow(workflows.PaymentWorkflow, in)
	st := result(t, env)
	if st.Status != payment.StatusClosed || fs.closed != 1 {
		t.Fatalf("state %s closed=%d, want CLOSED once", st.Status, fs.closed)
	}
	if closedAtAlipay.Before(expireAt) {
		t.Fatalf("closed at Alipay at %v, before the pay link's expiry %v", closedAtAlipay, expireAt)
	}
}

// A checkout of another method than the payment's does not join it: it is told which
// method the order is being paid by, never handed that method's link.
func TestPaymentWorkflow_CheckoutOfAnotherMethodIsToldWhy(t *testing.T) {
	env, fs := newEnv(t)
	var refusal error
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(workflows.CheckoutUpdate, "qr", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { refusal = err },
			OnAccept:   func() {},
			OnComplete: func(res any, err error) { refusal = err },
		}, workflows.CheckoutRequest{Amount: 990, Currency: "CNY", Subject: "Coffee", Method: payment.MethodQR})
	}, time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "n1")) }, time.Minute)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	if st := result(t, env); st.Status != payment.StatusPaid || st.Method != payment.MethodPage {
		t.Fatalf("state %+v", st)
	}
	var appErr *temporal.ApplicationError
	if !errors.As(refusal, &appErr) || appErr.Type() != "AmountConflict" || !strings.Contains(appErr.Message(), "by a page payment") {
		t.Fatalf("a qr checkout of a page payment: %v, want a conflict naming the page payment", refusal)
	}
}

// A WeChat Pay payment's run opens its trade with the payer the checkout sent, under a
// payment number WeChat Pay takes (at most 32 characters).
func TestPaymentWorkflow_WechatPayTradeGetsItsPayerAndAShortNumber(t *testing.T) {
	env, fs := newEnv(t)
	in := input()
	in.Method, in.Payer = payment.MethodWechatJSAPI, payment.Payer{OpenID: "o-buyer"}
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "n1")) }, 10*time.Second)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, in)
	st := result(t, env)
	if st.Status != payment.StatusPaid {
		t.Fatalf("status %s, want PAID", st.Status)
	}
	if fs.opened.Method != payment.MethodWechatJSAPI || fs.opened.Payer != in.Payer {
		t.Fatalf("trade opened with %+v, want the JSAPI method and payer %+v", fs.opened, in.Payer)
	}
	// The test environment's run id is not a UUID; e2e/TestWechatPayNativePaidByItsNotification
	// opens real runs' payments at the simulator, which refuses a number over 32.
	if no := fs.opened.PaymentNo; len(no) > 32 || !strings.HasPrefix(no, "P") {
		t.Fatalf("payment number %q (%d characters), want at most 32", no, len(no))
	}
}
