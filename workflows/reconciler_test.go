package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
)

// An abandoned checkout whose payment the scheduled reconciler queries keeps no timer of
// its own: its run makes no query before expiry, and at expiry closes it (close, then
// the close path's query), whether the run created the payment or the API did.
func TestPaymentWorkflow_ScheduledPaymentKeepsOnlyItsExpiryTimer(t *testing.T) {
	for _, opened := range []bool{false, true} {
		env, fs := newEnv(t)
		fs.scheduleQueries = true
		in := input()
		if opened {
			in = openedInput(fs, time.Now().Add(15*time.Minute).UTC().Truncate(time.Second))
			in.Opened.QueryScheduled = true
		}
		calls := recordAlipayCalls(env)
		env.ExecuteWorkflow(workflows.PaymentWorkflow, in)
		st := result(t, env)
		if st.Status != payment.StatusClosed || !st.QueryScheduled {
			t.Fatalf("opened=%v: status %s, query scheduled %v; want CLOSED by a run on the reconciler", opened, st.Status, st.QueryScheduled)
		}
		if len(calls.closes) != 1 || calls.closes[0] < 14*time.Minute+58*time.Second {
			t.Fatalf("opened=%v: closes at %v, want one at expiry", opened, calls.closes)
		}
		for _, q := range calls.queries {
			if q < calls.closes[0] {
				t.Fatalf("opened=%v: the run queried Alipay at %v, before expiry (queries %v); the reconciler does that", opened, q, calls.queries)
			}
		}
	}
}

// The reconciler's wake is no evidence: the run queries Alipay itself and is PAID only on
// Alipay's answer, once, however many wakes arrive together; a wake for a payment Alipay
// does not report paid changes nothing.
func TestPaymentWorkflow_ReconcilerWakeQueriesAlipayItself(t *testing.T) {
	env, fs := newEnv(t)
	fs.scheduleQueries = true
	paid := false
	queries := 0
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(func(_ context.Context, no string) (payment.Trade, error) {
		queries++
		if !paid {
			return payment.Trade{State: payment.TradeWaiting}, nil
		}
		return payment.Trade{State: payment.TradePaid, TradeNo: "2026W", Amount: 990, PaymentNo: no, PaidAt: time.Now()}, nil
	})
	var localActivities []string
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []interface{}) {
		localActivities = append(localActivities, info.ActivityType.Name)
	})
	// A wake while Alipay says the buyer has not paid: one query, still pending.
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.ReconcileSignal, "x") }, 2*time.Minute)
	// Then the buyer pays and five wakes arrive together (a forged flood included).
	env.RegisterDelayedCallback(func() {
		paid = true
		for range 5 {
			env.SignalWorkflow(workflows.ReconcileSignal, nil)
		}
	}, 4*time.Minute)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusPaid || st.TradeNo != "2026W" || fs.markPaid != 1 {
		t.Fatalf("status %s trade %q markPaid %d; want PAID once on Alipay's answer", st.Status, st.TradeNo, fs.markPaid)
	}
	if queries != 2 {
		t.Fatalf("%d queries (local activities %v); want one per wake moment, two in all", queries, localActivities)
	}
}

// Wakes closer together than half an interval cost one query, and one that comes sooner
// is kept for half an interval after the last query: a flood sent straight to Temporal
// costs one query per half interval, never a loop.
func TestPaymentWorkflow_ReconcilerWakesAreThrottled(t *testing.T) {
	env, fs := newEnv(t)
	fs.scheduleQueries = true
	var start time.Time
	var queries []time.Duration
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(func(context.Context, string) (payment.Trade, error) {
		queries = append(queries, env.Now().Sub(start))
		return payment.Trade{State: payment.TradeWaiting}, nil
	})
	env.OnActivity(a.CloseTrade, mock.Anything, mock.Anything).Return(payment.CloseDone, nil)
	for i := range 20 {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.ReconcileSignal, nil) }, time.Minute+time.Duration(i)*time.Second)
	}
	start = env.Now()
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusClosed {
		t.Fatalf("status %s, want CLOSED at expiry", st.Status)
	}
	if len(queries) != 2 || queries[1]-queries[0] < 29*time.Second || queries[1]-queries[0] > 31*time.Second {
		t.Fatalf("queries at %v for 20 wakes within 20 s, want one at the first and one half an interval later", queries)
	}
}

// A wake right after another (a forged one, then the reconciler's after the buyer paid)
// is kept, not dropped: the payment is PAID half an interval after the first query, not
// left pending until its expiry.
func TestPaymentWorkflow_AWakeSoonAfterAnotherIsKept(t *testing.T) {
	env, fs := newEnv(t)
	fs.scheduleQueries = true
	paid := false
	var start time.Time
	var paidAt time.Duration
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(func(_ context.Context, no string) (payment.Trade, error) {
		if !paid {
			return payment.Trade{State: payment.TradeWaiting}, nil
		}
		paidAt = env.Now().Sub(start)
		return payment.Trade{State: payment.TradePaid, TradeNo: "2026K", Amount: 990, PaymentNo: no}, nil
	})
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.ReconcileSignal, nil) }, 2*time.Minute)
	env.RegisterDelayedCallback(func() { paid = true }, 2*time.Minute+5*time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.ReconcileSignal, nil) }, 2*time.Minute+10*time.Second)
	start = env.Now()
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusPaid || fs.markPaid != 1 {
		t.Fatalf("status %s markPaid %d, want PAID once", st.Status, fs.markPaid)
	}
	if paidAt < 2*time.Minute+29*time.Second || paidAt > 2*time.Minute+31*time.Second {
		t.Fatalf("paid on a query at %v, want half an interval after the first wake's (2m30s)", paidAt)
	}
}
