package workflows_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
)

// alipayCalls records when the run called Alipay, by call.
type alipayCalls struct {
	queries, closes []time.Duration
}

func (c *alipayCalls) total() int { return len(c.queries) + len(c.closes) }

// recordAlipayCalls answers every query and close of the run as Alipay does for a trade
// nobody opened, and records when each came, counted from now.
func recordAlipayCalls(env *testsuite.TestWorkflowEnvironment) *alipayCalls {
	calls := &alipayCalls{}
	start := env.Now()
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(func(context.Context, string) (payment.Trade, error) {
		calls.queries = append(calls.queries, env.Now().Sub(start))
		return payment.Trade{State: payment.TradeNotExist}, nil
	})
	env.OnActivity(a.CloseTrade, mock.Anything, mock.Anything).Return(func(context.Context, string) (payment.CloseOutcome, error) {
		calls.closes = append(calls.closes, env.Now().Sub(start))
		return payment.CloseNotExist, nil
	})
	return calls
}

// An abandoned checkout, the common case on a real checkout page: Alipay is queried on a
// backoff (about 1, 3 and 7 minutes after creation) and once more by the close path at
// expiry, never once a minute for the whole TTL.
func TestPaymentWorkflow_AbandonedCheckoutCostsAtMostFiveAlipayCalls(t *testing.T) {
	env, fs := newEnv(t)
	calls := recordAlipayCalls(env)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusClosed || fs.closed != 1 {
		t.Fatalf("status %s closed=%d, want CLOSED once", st.Status, fs.closed)
	}
	if calls.total() > 5 {
		t.Fatalf("%d Alipay calls for an unpaid 15-minute payment (queries at %v, closes at %v), want at most 5",
			calls.total(), calls.queries, calls.closes)
	}
	// Three backoff queries (1, 2 and 4 minutes apart, each ±20%), then the close path's
	// close and query at expiry.
	if len(calls.queries) != 4 || len(calls.closes) != 1 {
		t.Fatalf("queries at %v, closes at %v; want 3 backoff queries, then close and query at expiry", calls.queries, calls.closes)
	}
	want := []time.Duration{time.Minute, 3 * time.Minute, 7 * time.Minute}
	gaps := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute}
	for i, w := range want {
		lo, hi := w-gapsUpTo(gaps, i)/5, w+gapsUpTo(gaps, i)/5
		if calls.queries[i] < lo || calls.queries[i] > hi {
			t.Fatalf("query %d at %v, want within [%v, %v] (all: %v)", i+1, calls.queries[i], lo, hi, calls.queries)
		}
	}
	if calls.closes[0] < 14*time.Minute+58*time.Second || calls.queries[3] < calls.closes[0] {
		t.Fatalf("closed at %v (queries %v), want at expiry (15m)", calls.closes, calls.queries)
	}
}

// gapsUpTo is the sum of the first i+1 gaps: the most jitter that can add up by query i.
func gapsUpTo(gaps []time.Duration, i int) time.Duration {
	var s time.Duration
	for _, g := range gaps[:i+1] {
		s += g
	}
	return s
}

// A notification that does not advance the payment (WAIT_BUYER_PAY, a wrong amount, a
// duplicate) must not push the next query back: a stream of them every 40 s used to reset
// a fixed one-minute timer forever.
func TestPaymentWorkflow_SignalsDoNotPostponeReconciliation(t *testing.T) {
	env, fs := newEnv(t)
	queries := 0
	var start time.Time
	var paidAfter time.Duration
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(func(_ context.Context, no string) (payment.Trade, error) {
		queries++
		if queries == 2 {
			paidAfter = env.Now().Sub(start)
			return payment.Trade{State: payment.TradePaid, TradeNo: "2026Q", Amount: 990, PaymentNo: no}, nil
		}
		return payment.Trade{State: payment.TradeWaiting}, nil
	})
	for i := 1; i <= 20; i++ {
		env.RegisterDelayedCallback(func() {
			n := paidNotification(fs, "wait")
			n.State, n.TradeStatus = payment.TradeWaiting, "WAIT_BUYER_PAY"
			env.SignalWorkflow(workflows.NotificationSignal, n)
		}, time.Duration(i)*40*time.Second)
	}
	start = env.Now()
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusPaid || st.TradeNo != "2026Q" || queries != 2 {
		t.Fatalf("status %s trade %q queries %d, want PAID by the second query", st.Status, st.TradeNo, queries)
	}
	if paidAfter > 4*time.Minute {
		t.Fatalf("second query %v after start, want about 3 minutes whatever the signals", paidAfter)
	}
}

// A close at expiry that Alipay does not answer is retried on the backoff, from the
// interval again, until Alipay confirms.
func TestPaymentWorkflow_CloseRetriesBackOffFromTheInterval(t *testing.T) {
	env, fs := newEnv(t)
	var start time.Time
	var closes []time.Duration
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(payment.Trade{}, errors.New("connection refused"))
	env.OnActivity(a.CloseTrade, mock.Anything, mock.Anything).Return(func(context.Context, string) (payment.CloseOutcome, error) {
		closes = append(closes, env.Now().Sub(start))
		if len(closes) <= 15 { // three whole close paths fail (5 attempts each)
			return 0, errors.New("connection refused")
		}
		return payment.CloseDone, nil
	})
	start = env.Now()
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusClosed || fs.closed != 1 {
		t.Fatalf("status %s closed=%d", st.Status, fs.closed)
	}
	// Close paths start at expiry, then about 1, 2 and 4 minutes after the one before ended
	// (each takes its activity's retries, under a minute).
	firsts := []time.Duration{closes[0], closes[5], closes[10], closes[15]}
	if firsts[0] < 14*time.Minute || firsts[0] > 15*time.Minute+time.Second {
		t.Fatalf("first close path at %v, want at expiry (15m)", firsts[0])
	}
	for i, g := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute} {
		gap := firsts[i+1] - firsts[i]
		if gap < g*8/10 || gap > g*12/10+time.Minute {
			t.Fatalf("close path %d began %v after the one before, want about %v (all %v)", i+2, gap, g, firsts)
		}
	}
}

// The schedule survives continue-as-new: the next run keeps the count and the next tick.
func TestPaymentWorkflow_BackoffCarriesOverContinueAsNew(t *testing.T) {
	env, _ := newEnv(t)
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(payment.Trade{State: payment.TradeWaiting}, nil)
	env.RegisterDelayedCallback(func() { env.SetContinueAsNewSuggested(true) }, 4*time.Minute)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.NotificationSignal, workflows.NotificationPayload{NotifyID: "w", State: payment.TradeWaiting})
	}, 4*time.Minute+time.Second)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	var can *workflow.ContinueAsNewError
	if !errors.As(env.GetWorkflowError(), &can) {
		t.Fatalf("want continue-as-new, got %v", env.GetWorkflowError())
	}
	var next workflows.PaymentInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.State.Queries != 2 || next.State.NextReconcileAt.IsZero() {
		t.Fatalf("carried queries %d next %v, want 2 and the third query's time", next.State.Queries, next.State.NextReconcileAt)
	}
}

// An abandoned checkout's whole life, reconciliation and the close at expiry included,
// runs in local activities: no activity task, so each wake-up is one workflow task.
func TestPaymentWorkflow_AbandonedCheckoutCostsNoActivityTask(t *testing.T) {
	env, fs := newEnv(t)
	env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(payment.Trade{State: payment.TradeNotExist}, nil)
	env.OnActivity(a.CloseTrade, mock.Anything, mock.Anything).Return(payment.CloseNotExist, nil)
	var regular []string
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		regular = append(regular, info.ActivityType.Name)
	})
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusClosed || fs.closed != 1 {
		t.Fatalf("status %s closed=%d", st.Status, fs.closed)
	}
	if len(regular) != 0 {
		t.Fatalf("regular activities %v, want none", regular)
	}
}
