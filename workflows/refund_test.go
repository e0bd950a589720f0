package workflows_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
)

// refundFake keeps one refund in memory and scripts Alipay's answers: refundAnswers[i]
// is the answer to the i-th alipay.trade.refund (the last one repeats), and found says
// what alipay.trade.fastpay.refund.query answers.
type refundFake struct {
	r             payment.Refund
	refundAnswers []error // nil: success with fundChange
	fundChange    bool
	found         bool
	foundAt       int // if set, the query finds the refund from its foundAt-th call on
	// settle, if set, makes the query find the refund only that long after the last
	// refund request, as Alipay does while it is still processing one.
	settle      time.Duration
	queryErr    error
	refundCalls int
	queries     int
	succeeded   int
	failed      int
	released    int
	webhooks    []string
	callTimes   []time.Time
	anomalies   []string
}

func newRefundEnv(t *testing.T, f *refundFake) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Activities{})
	workflows.Register(env)
	if f.r.RefundNo == "" {
		f.r = payment.Refund{RefundNo: "rf1", TenantID: "t1", PaymentNo: "P1", OutRequestNo: payment.OutRequestNo("t1", "rf1"),
			Amount: 300, Status: payment.RefundPending}
	}
	env.OnActivity(a.GetRefund, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.RefundKey) (payment.Refund, error) { return f.r, nil })
	env.OnActivity(a.RefundAtChannel, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RefundChannelInput) (payment.RefundResult, error) {
			if in.OutRequestNo != f.r.OutRequestNo {
				t.Errorf("refund sent with out_request_no %s, want %s", in.OutRequestNo, f.r.OutRequestNo)
			}
			f.callTimes = append(f.callTimes, env.Now())
			i := min(f.refundCalls, len(f.refundAnswers)-1)
			f.refundCalls++
			if i >= 0 && f.refundAnswers[i] != nil {
				return payment.RefundResult{}, f.refundAnswers[i]
			}
			return payment.RefundResult{TradeNo: "T1", FundChange: f.fundChange, RefundAmount: in.Amount}, nil
		}).Maybe()
	env.OnActivity(a.QueryRefundAtChannel, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RefundQueryInput) (payment.RefundStatusAtChannel, error) {
			f.queries++
			if f.queryErr != nil {
				return payment.RefundStatusAtChannel{}, f.queryErr
			}
			found := f.found || (f.foundAt > 0 && f.queries >= f.foundAt)
			if f.settle > 0 {
				found = len(f.callTimes) > 0 && env.Now().Sub(f.callTimes[len(f.callTimes)-1]) >= f.settle
			}
			return payment.RefundStatusAtChannel{Found: found, TradeNo: "T1", OutRequestNo: in.OutRequestNo, RefundAmount: f.r.Amount}, nil
		}).Maybe()
	env.OnActivity(a.MarkRefundSucceeded, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.MarkRefundSucceededInput) (payment.RefundTransition, error) {
			if f.r.Status != payment.RefundPending {
				return payment.RefundTransition{Refund: f.r}, nil
			}
			f.succeeded++
			f.r.Status = payment.RefundSucceeded
			return payment.RefundTransition{Refund: f.r, Changed: true, EventID: "evt_" + f.r.OutRequestNo + "_refund_succeeded"}, nil
		}).Maybe()
	env.OnActivity(a.FailRefund, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.FailRefundInput) (payment.RefundTransition, error) {
			if f.r.Status != payment.RefundPending {
				return payment.RefundTransition{Refund: f.r}, nil
			}
			f.failed++
			f.released++
			f.r.Status, f.r.FailReason = payment.RefundFailed, in.Reason
			return payment.RefundTransition{Refund: f.r, Changed: true, EventID: "evt_" + f.r.OutRequestNo + "_refund_failed"}, nil
		}).Maybe()
	env.OnActivity(a.RecordAnomaly, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AnomalyInput) error {
			f.anomalies = append(f.anomalies, in.Kind)
			if in.Subject != f.r.OutRequestNo {
				// Each refund of a payment has anomalies of its own.
				t.Errorf("%s anomaly recorded about %q, want the refund's out_request_no %s", in.Kind, in.Subject, f.r.OutRequestNo)
			}
			return nil
		}).Maybe()
	env.OnActivity(a.DeliverWebhook, mock.Anything, mock.Anything).Return(
		func(_ context.Context, id string) error { f.webhooks = append(f.webhooks, id); return nil }).Maybe()
	return env
}

func refusal(subCode, errType string) error {
	return temporal.NewNonRetryableApplicationError("refund: alipay.trade.refund: "+subCode, errType, nil)
}

var errSystem = temporal.NewApplicationError("refund: alipay.trade.refund: ACQ.SYSTEM_ERROR", "")

func TestRefundWorkflow(t *testing.T) {
	timing := workflows.RefundTiming{AttemptsPerRound: 3, RoundInterval: time.Minute, MaxRounds: 3,
		BalanceRetryInterval: 10 * time.Minute, BalanceRetryFor: time.Hour}
	cases := []struct {
		name        string
		fake        refundFake
		wantStatus  payment.RefundStatus
		wantCalls   int
		wantQueries int
		wantFund    bool
		wantBy      string
		wantEvent   string // suffix of the delivered event
	}{
		{name: "first answer moves the money", fake: refundFake{refundAnswers: []error{nil}, fundChange: true},
			wantStatus: payment.RefundSucceeded, wantCalls: 1, wantFund: true, wantBy: "refund", wantEvent: "_refund_succeeded"},
		{name: "system errors then a replay with fund_change N, confirmed by the query",
			fake:       refundFake{refundAnswers: []error{errSystem, errSystem, nil}, fundChange: false, found: true},
			wantStatus: payment.RefundSucceeded, wantCalls: 3, wantQueries: 1, wantBy: "query", wantEvent: "_refund_succeeded"},
		// Alipay answers fund_change N to a refund it has accepted but not carried out: it
		// is not a success until the query says so. Before, N was success at once.
		{name: "fund_change N while Alipay is still processing: confirmed once it settles",
			fake:       refundFake{refundAnswers: []error{nil}, fundChange: false, settle: 30 * time.Second},
			wantStatus: payment.RefundSucceeded, wantCalls: 2, wantQueries: 2, wantBy: "query", wantEvent: "_refund_succeeded"},
		// The lost answer and the refusal fall in one round (one activity, retried): the
		// deciding query waits for Alipay to settle the lost attempt. Before, it was asked
		// at once, found nothing, and failed a refund whose money had moved.
		{name: "refusal in the round of a lost answer: the query waits for Alipay to settle",
			fake: refundFake{refundAnswers: []error{errSystem, refusal("ACQ.TRADE_HAS_CLOSE", activities.ErrTypeChannelRefused)},
				settle: 5 * time.Second},
			wantStatus: payment.RefundSucceeded, wantCalls: 2, wantQueries: 1, wantBy: "query", wantEvent: "_refund_succeeded"},
		{name: "unknown outcome confirmed by the refund query",
			fake:       refundFake{refundAnswers: []error{errSystem}, found: true},
			wantStatus: payment.RefundSucceeded, wantCalls: 3, wantQueries: 1, wantBy: "query", wantEvent: "_refund_succeeded"},
		{name: "unknown outcome, a later round succeeds",
			fake:       refundFake{refundAnswers: []error{errSystem, errSystem, errSystem, errSystem, nil}, fundChange: true},
			wantStatus: payment.RefundSucceeded, wantCalls: 5, wantQueries: 1, wantFund: true, wantBy: "refund", wantEvent: "_refund_succeeded"},
		{name: "unknown outcome and alipay has no such refund: failed after the last round",
			fake:       refundFake{refundAnswers: []error{errSystem}},
			wantStatus: payment.RefundFailed, wantCalls: 9, wantQueries: 3, wantEvent: "_refund_failed"},
		{name: "business refusal fails and releases",
			fake:       refundFake{refundAnswers: []error{refusal("ACQ.TRADE_NOT_ALLOW_REFUND", activities.ErrTypeChannelRefused)}},
			wantStatus: payment.RefundFailed, wantCalls: 1, wantQueries: 1, wantEvent: "_refund_failed"},
		{name: "refusal after a lost answer: the query finds the refund",
			fake: refundFake{refundAnswers: []error{errSystem, errSystem, errSystem,
				refusal("ACQ.TRADE_HAS_CLOSE", activities.ErrTypeChannelRefused)}, foundAt: 2},
			wantStatus: payment.RefundSucceeded, wantCalls: 4, wantQueries: 2, wantBy: "query", wantEvent: "_refund_succeeded"},
		{name: "balance shortfall retried on a timer, then success",
			fake: refundFake{refundAnswers: []error{refusal(activities.SubCodeSellerBalanceNotEnough, activities.ErrTypeBalanceShortfall),
				refusal(activities.SubCodeSellerBalanceNotEnough, activities.ErrTypeBalanceShortfall), nil}, fundChange: true},
			wantStatus: payment.RefundSucceeded, wantCalls: 3, wantFund: true, wantBy: "refund", wantEvent: "_refund_succeeded"},
		{name: "balance shortfall for longer than allowed fails",
			fake:       refundFake{refundAnswers: []error{refusal(activities.SubCodeSellerBalanceNotEnough, activities.ErrTypeBalanceShortfall)}},
			wantStatus: payment.RefundFailed, wantCalls: 7, wantQueries: 1, wantEvent: "_refund_failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.fake
			env := newRefundEnv(t, &f)
			env.ExecuteWorkflow(workflows.RefundWorkflow, workflows.RefundInput{TenantID: "t1", RefundNo: "rf1", Timing: timing})
			if !env.IsWorkflowCompleted() {
				t.Fatal("workflow did not complete")
			}
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			var st workflows.RefundState
			if err := env.GetWorkflowResult(&st); err != nil {
				t.Fatal(err)
			}
			if st.Status != tc.wantStatus || f.r.Status != tc.wantStatus {
				t.Fatalf("status = %s (store %s), want %s; state %+v", st.Status, f.r.Status, tc.wantStatus, st)
			}
			if f.refundCalls != tc.wantCalls || f.queries != tc.wantQueries {
				t.Fatalf("refund calls = %d, queries = %d; want %d, %d", f.refundCalls, f.queries, tc.wantCalls, tc.wantQueries)
			}
			if f.succeeded+f.failed != 1 {
				t.Fatalf("transitions = %d succeeded + %d failed, want exactly one", f.succeeded, f.failed)
			}
			if tc.wantStatus == payment.RefundFailed && f.released != 1 {
				t.Fatalf("released = %d, want 1", f.released)
			}
			if st.FundChange != tc.wantFund || st.ConfirmedBy != tc.wantBy {
				t.Fatalf("fund_change = %v, confirmed by %q; want %v, %q", st.FundChange, st.ConfirmedBy, tc.wantFund, tc.wantBy)
			}
			if len(f.webhooks) != 1 || f.webhooks[0] != "evt_"+f.r.OutRequestNo+tc.wantEvent || !st.WebhookSent {
				t.Fatalf("webhooks = %v, sent = %v; want one %s", f.webhooks, st.WebhookSent, tc.wantEvent)
			}
		})
	}
}

func TestRefundWorkflow_BalanceShortfallWaitsOnATimer(t *testing.T) {
	short := refusal(activities.SubCodeSellerBalanceNotEnough, activities.ErrTypeBalanceShortfall)
	f := refundFake{refundAnswers: []error{short, short, nil}, fundChange: true}
	env := newRefundEnv(t, &f)
	env.ExecuteWorkflow(workflows.RefundWorkflow, workflows.RefundInput{TenantID: "t1", RefundNo: "rf1",
		Timing: workflows.RefundTiming{BalanceRetryInterval: 30 * time.Minute, BalanceRetryFor: 24 * time.Hour}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(f.callTimes) != 3 {
		t.Fatalf("calls = %d", len(f.callTimes))
	}
	for i := 1; i < 3; i++ {
		if gap := f.callTimes[i].Sub(f.callTimes[i-1]); gap < 30*time.Minute {
			t.Fatalf("call %d came %s after the previous one, want at least 30m", i, gap)
		}
	}
}

func TestRefundWorkflow_FinalRefundIsNotSentAgain(t *testing.T) {
	f := refundFake{}
	f.r = payment.Refund{RefundNo: "rf1", TenantID: "t1", PaymentNo: "P1", OutRequestNo: "R1", Amount: 300, Status: payment.RefundSucceeded}
	env := newRefundEnv(t, &f)
	env.ExecuteWorkflow(workflows.RefundWorkflow, workflows.RefundInput{TenantID: "t1", RefundNo: "rf1"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if f.refundCalls != 0 || f.queries != 0 || f.succeeded != 0 {
		t.Fatalf("calls = %d, queries = %d, transitions = %d; want none", f.refundCalls, f.queries, f.succeeded)
	}
}

func TestRefundWorkflow_QueryUnavailableNeverFails(t *testing.T) {
	f := refundFake{refundAnswers: []error{errSystem, errSystem, errSystem, errSystem, errSystem, errSystem,
		errSystem, errSystem, errSystem, errSystem, errSystem, errSystem, nil}, fundChange: true,
		queryErr: errors.New("dial tcp: connection refused")}
	env := newRefundEnv(t, &f)
	env.ExecuteWorkflow(workflows.RefundWorkflow, workflows.RefundInput{TenantID: "t1", RefundNo: "rf1",
		Timing: workflows.RefundTiming{AttemptsPerRound: 3, MaxRounds: 2}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	// Past MaxRounds, but no query ever answered: the refund is never failed blind.
	if f.r.Status != payment.RefundSucceeded || f.failed != 0 || f.refundCalls != 13 {
		t.Fatalf("status = %s, failed = %d, calls = %d", f.r.Status, f.failed, f.refundCalls)
	}
}

// Alipay answers a refund query reliably only some seconds after the refund request: a
// query sent at once after a timed-out attempt may find nothing while the money is still
// moving. The run waits before it asks, so that answer can never fail the refund.
func TestRefundWorkflow_QueriesOnlyAfterAlipayHadTimeToSettle(t *testing.T) {
	f := refundFake{refundAnswers: []error{errSystem}, settle: 10 * time.Second}
	env := newRefundEnv(t, &f)
	env.ExecuteWorkflow(workflows.RefundWorkflow, workflows.RefundInput{TenantID: "t1", RefundNo: "rf1",
		Timing: workflows.RefundTiming{AttemptsPerRound: 1, RoundInterval: time.Minute, MaxRounds: 1}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if f.r.Status != payment.RefundSucceeded || f.failed != 0 || f.released != 0 {
		t.Fatalf("status = %s, failed = %d, released = %d; want the refund confirmed, never failed", f.r.Status, f.failed, f.released)
	}
}

// Only rounds whose query found no refund count towards giving up: hours of balance
// shortfall first do not leave a single unknown round to fail the refund.
func TestRefundWorkflow_ShortfallRoundsDoNotCountTowardsGivingUp(t *testing.T) {
	short := refusal(activities.SubCodeSellerBalanceNotEnough, activities.ErrTypeBalanceShortfall)
	f := refundFake{refundAnswers: []error{short, short, short, short, short, errSystem, nil}, fundChange: true}
	env := newRefundEnv(t, &f)
	env.ExecuteWorkflow(workflows.RefundWorkflow, workflows.RefundInput{TenantID: "t1", RefundNo: "rf1",
		Timing: workflows.RefundTiming{AttemptsPerRound: 1, RoundInterval: time.Minute, MaxRounds: 2,
			BalanceRetryInterval: 30 * time.Minute, BalanceRetryFor: 72 * time.Hour}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if f.r.Status != payment.RefundSucceeded || f.failed != 0 || f.refundCalls != 7 {
		t.Fatalf("status = %s, failed = %d, calls = %d", f.r.Status, f.failed, f.refundCalls)
	}
}

// TestRefundWorkflow_ContinuesAsNewWhenItsHistoryIsLong: a refund retried for want of
// balance continues as new once its history passes MaxHistoryEvents, carrying its rounds
// and the start of its shortfall, so that the 72 h balance window is not restarted and
// the history never grows large. Before, one run looped for the whole window.
func TestRefundWorkflow_ContinuesAsNewWhenItsHistoryIsLong(t *testing.T) {
	short := refusal(activities.SubCodeSellerBalanceNotEnough, activities.ErrTypeBalanceShortfall)
	f := refundFake{refundAnswers: []error{short}}
	env := newRefundEnv(t, &f)
	// Five hours of retries in, the history has grown past the bound.
	env.RegisterDelayedCallback(func() { env.SetCurrentHistoryLength(41) }, 5*time.Hour)
	env.ExecuteWorkflow(workflows.RefundWorkflow, workflows.RefundInput{TenantID: "t1", RefundNo: "rf1",
		Timing: workflows.RefundTiming{BalanceRetryInterval: 30 * time.Minute, BalanceRetryFor: 72 * time.Hour, MaxHistoryEvents: 40}})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("workflow error %v, want it to continue as new", err)
	}
	var next workflows.RefundInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.State == nil || next.State.ShortfallSince.IsZero() || next.State.Rounds < 2 || next.RefundNo != "rf1" || next.Timing.MaxHistoryEvents != 40 {
		t.Fatalf("continued with %+v (state %+v), want the shortfall's start and the rounds carried", next, next.State)
	}
	if f.r.Status != payment.RefundPending || f.failed+f.succeeded != 0 {
		t.Fatalf("refund %s after continuing, want still pending", f.r.Status)
	}

	// The next run carries on from there, at the time the first one ended: its shortfall
	// window is the first run's.
	f2 := refundFake{refundAnswers: []error{short}}
	env2 := newRefundEnv(t, &f2)
	env2.SetStartTime(env.Now())
	next.Timing.MaxHistoryEvents = 100000
	env2.ExecuteWorkflow(workflows.RefundWorkflow, next)
	if err := env2.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var st workflows.RefundState
	if err := env2.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	if st.Status != payment.RefundFailed || st.Rounds <= next.State.Rounds {
		t.Fatalf("second run: %+v, want failed once the carried 72 h window ended, rounds counted on", st)
	}
	if calls := f.refundCalls + f2.refundCalls; calls > 72*2+3 {
		t.Fatalf("%d refund calls over both runs, want one per 30 min of the 72 h window", calls)
	}
}

// TestRefundWorkflow_FundChangeNIsNeverFailed: Alipay answers fund_change "N" and its
// query never confirms the refund. Alipay holds the request, so the money may still move:
// the run never fails the refund (before, it did after MaxRounds, releasing the amount
// while Alipay could still pay it out). It keeps asking a round apart, tells an operator
// once, and continues as new when its history is long.
func TestRefundWorkflow_FundChangeNIsNeverFailed(t *testing.T) {
	f := refundFake{refundAnswers: []error{nil}, fundChange: false}
	env := newRefundEnv(t, &f)
	env.RegisterDelayedCallback(func() { env.SetCurrentHistoryLength(100) }, 2*time.Hour)
	env.ExecuteWorkflow(workflows.RefundWorkflow, workflows.RefundInput{TenantID: "t1", RefundNo: "rf1",
		Timing: workflows.RefundTiming{AttemptsPerRound: 3, RoundInterval: time.Minute, MaxRounds: 3, MaxHistoryEvents: 50}})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("workflow error %v, want it to continue as new, still asking", err)
	}
	if f.r.Status != payment.RefundPending || f.failed != 0 || f.succeeded != 0 {
		t.Fatalf("refund %s (failed %d, succeeded %d), want still pending", f.r.Status, f.failed, f.succeeded)
	}
	if len(f.anomalies) != 1 || f.anomalies[0] != "refund_unconfirmed" {
		t.Fatalf("anomalies %v, want one refund_unconfirmed", f.anomalies)
	}
	// A round apart (the first after the 10 s confirm delay): about 120 in two hours.
	if f.refundCalls < 100 || f.refundCalls > 125 {
		t.Fatalf("%d refund calls in two hours, want one a minute", f.refundCalls)
	}
}

// TestRefundWorkflow_StuckRefundIsReportedAndSlowed: Alipay's refund answers are lost
// and its refund query keeps failing, so the outcome stays unknown for good. The run
// never fails the refund (money may have moved), but a refund has an overall bound:
// past StuckAfter it is reported once as a refund_stuck anomaly, and from then on asks
// Alipay SlowInterval apart rather than a round apart. Before, it asked every minute
// for as long as it lasted and no operator heard of it.
func TestRefundWorkflow_StuckRefundIsReportedAndSlowed(t *testing.T) {
	f := refundFake{refundAnswers: []error{errors.New("read tcp: i/o timeout")}, queryErr: errors.New("alipay: 502")}
	env := newRefundEnv(t, &f)
	var callsAtBound int
	env.RegisterDelayedCallback(func() { callsAtBound = f.refundCalls }, 24*time.Hour+time.Minute)
	env.RegisterDelayedCallback(func() { env.SetCurrentHistoryLength(1_000_000) }, 34*time.Hour)
	env.ExecuteWorkflow(workflows.RefundWorkflow, workflows.RefundInput{TenantID: "t1", RefundNo: "rf1",
		Timing: workflows.RefundTiming{AttemptsPerRound: 1, RoundInterval: 10 * time.Minute, MaxRounds: 3,
			MaxHistoryEvents: 500_000, StuckAfter: 24 * time.Hour, SlowInterval: time.Hour}})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("workflow error %v, want it to continue as new, still asking", err)
	}
	if f.r.Status != payment.RefundPending || f.failed != 0 {
		t.Fatalf("refund %s (failed %d), want still pending", f.r.Status, f.failed)
	}
	if len(f.anomalies) != 1 || f.anomalies[0] != "refund_stuck" {
		t.Fatalf("anomalies %v, want one refund_stuck", f.anomalies)
	}
	// A round (the refund, 10 min, the query) every 10 min for 24 h: about 144 refund
	// calls; then about 10 more in the 10 h past the bound, an hour apart.
	if callsAtBound < 135 || callsAtBound > 150 {
		t.Fatalf("%d refund calls in the first 24 h, want a round every 10 min", callsAtBound)
	}
	if after := f.refundCalls - callsAtBound; after < 8 || after > 12 {
		t.Fatalf("%d refund calls in the 10 h past the bound, want about one an hour", after)
	}
	var next workflows.RefundInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.State == nil || next.State.StartedAt.IsZero() || !next.State.StuckReported {
		t.Fatalf("continued with state %+v, want the refund's start and its report carried", next.State)
	}
}
