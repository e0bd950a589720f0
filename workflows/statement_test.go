package workflows_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
)

// TestStatementWorkflow: the scheduled run reconciles the China-time day before it was
// due; a bill not yet published is asked for again on a timer, not failed; a bill never
// published is, after the give-up time, reconciled as an empty day.
func TestStatementWorkflow(t *testing.T) {
	// 2026-12-02 01:30 UTC is 09:30 in China: the run is for 2026-12-01.
	due := time.Date(2026, 12, 2, 1, 30, 0, 0, time.UTC)
	notYet := temporal.NewNonRetryableApplicationError("no bill yet", activities.ErrTypeBillNotAvailable, nil)
	tests := []struct {
		name       string
		in         workflows.StatementInput
		notYet     int // answers "not available" this many times (-1: always, until no_bill)
		wantDate   string
		wantNoBill bool
		wantTries  int
	}{
		{name: "published", in: workflows.StatementInput{AppID: "app1"}, wantDate: "2026-12-01", wantTries: 1},
		{name: "published late", in: workflows.StatementInput{AppID: "app1", RetryEvery: time.Hour}, notYet: 3, wantDate: "2026-12-01", wantTries: 4},
		{name: "never published", in: workflows.StatementInput{AppID: "app1", RetryEvery: 6 * time.Hour, GiveUpAfter: 24 * time.Hour},
			notYet: -1, wantDate: "2026-12-01", wantNoBill: true},
		{name: "a day by hand", in: workflows.StatementInput{AppID: "app1", BillDate: "2026-11-20"}, wantDate: "2026-11-20", wantTries: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.SetStartTime(due.Add(3 * time.Minute))
			sa := temporal.NewSearchAttributes(temporal.NewSearchAttributeKeyTime("TemporalScheduledStartTime").ValueSet(due))
			if err := env.SetTypedSearchAttributesOnStart(sa); err != nil {
				t.Fatal(err)
			}
			env.RegisterActivity(&activities.Activities{})
			workflows.Register(env)
			var reqs []activities.StatementRequest
			env.OnActivity(a.ReconcileStatement, mock.Anything, mock.Anything).Return(
				func(_ context.Context, req activities.StatementRequest) (payment.StatementReport, error) {
					reqs = append(reqs, req)
					if !req.NoBill && (tc.notYet < 0 || len(reqs) <= tc.notYet) {
						return payment.StatementReport{}, notYet
					}
					st := payment.StatementReconciled
					if req.NoBill {
						st = payment.StatementNoBill
					}
					return payment.StatementReport{AppID: req.AppID, BillDate: req.BillDate, Status: st}, nil
				})
			env.ExecuteWorkflow(workflows.StatementWorkflowName, tc.in)
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			var rep payment.StatementReport
			if err := env.GetWorkflowResult(&rep); err != nil {
				t.Fatal(err)
			}
			last := reqs[len(reqs)-1]
			if rep.BillDate != tc.wantDate || last.BillDate != tc.wantDate || last.NoBill != tc.wantNoBill {
				t.Fatalf("report %+v after %+v, want day %s no_bill=%v", rep, reqs, tc.wantDate, tc.wantNoBill)
			}
			if tc.wantTries > 0 && len(reqs) != tc.wantTries {
				t.Fatalf("%d attempts, want %d", len(reqs), tc.wantTries)
			}
			if tc.wantNoBill && len(reqs) < 3 {
				t.Fatalf("gave up after %d attempts", len(reqs))
			}
		})
	}
}

// TestStatementWorkflowRetrySignal: a run waiting for its bill asks again as soon as it
// is signalled, not at its next timer.
func TestStatementWorkflowRetrySignal(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	start := time.Date(2026, 12, 2, 1, 30, 0, 0, time.UTC)
	env.SetStartTime(start)
	env.RegisterActivity(&activities.Activities{})
	workflows.Register(env)
	calls := 0
	var secondAt time.Time
	env.OnActivity(a.ReconcileStatement, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req activities.StatementRequest) (payment.StatementReport, error) {
			calls++
			if calls == 1 {
				return payment.StatementReport{}, temporal.NewNonRetryableApplicationError("no bill yet", activities.ErrTypeBillNotAvailable, nil)
			}
			secondAt = env.Now()
			return payment.StatementReport{AppID: req.AppID, BillDate: req.BillDate, Status: payment.StatementReconciled}, nil
		})
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.StatementRetrySignal, nil) }, 5*time.Minute)
	env.ExecuteWorkflow(workflows.StatementWorkflowName, workflows.StatementInput{AppID: "app1", BillDate: "2026-12-01", RetryEvery: 6 * time.Hour})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if calls != 2 || secondAt.Sub(start) > time.Hour {
		t.Fatalf("%d calls, second at %s after start; want 2, right after the signal", calls, secondAt.Sub(start))
	}
}

// TestStatementWorkflowCatchesUp: after its own day, the run reconciles the days of its
// app that have no report (the catch-up activity lists them), each once; a day with no
// bill, two days old or more, is reconciled as having none at once. A catch-up that
// fails does not fail the run: its own day's report stands.
func TestStatementWorkflowCatchesUp(t *testing.T) {
	due := time.Date(2026, 12, 2, 1, 30, 0, 0, time.UTC)
	notYet := temporal.NewNonRetryableApplicationError("no bill", activities.ErrTypeBillNotAvailable, nil)
	for _, failing := range []bool{false, true} {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		env.SetStartTime(due)
		env.RegisterActivity(&activities.Activities{})
		workflows.Register(env)
		var asked activities.StatementCatchUpRequest
		env.OnActivity(a.StatementCatchUp, mock.Anything, mock.Anything).Return(
			func(_ context.Context, req activities.StatementCatchUpRequest) (activities.StatementCatchUpResult, error) {
				asked = req
				if failing {
					return activities.StatementCatchUpResult{}, temporal.NewNonRetryableApplicationError("mysql down", activities.ErrTypeInvalid, nil)
				}
				return activities.StatementCatchUpResult{Missing: []string{"2026-11-05", "2026-11-20"}}, nil
			})
		var reqs []activities.StatementRequest
		env.OnActivity(a.ReconcileStatement, mock.Anything, mock.Anything).Return(
			func(_ context.Context, req activities.StatementRequest) (payment.StatementReport, error) {
				reqs = append(reqs, req)
				if req.BillDate == "2026-11-05" && !req.NoBill {
					return payment.StatementReport{}, notYet
				}
				return payment.StatementReport{AppID: req.AppID, BillDate: req.BillDate, Status: payment.StatementReconciled}, nil
			})
		env.ExecuteWorkflow(workflows.StatementWorkflowName, workflows.StatementInput{AppID: "app1", BillDate: "2026-12-01"})
		var rep payment.StatementReport
		if err := env.GetWorkflowResult(&rep); err != nil || rep.BillDate != "2026-12-01" {
			t.Fatalf("failing=%v: result %+v, %v; want the day's own report", failing, rep, err)
		}
		if asked.AppID != "app1" || asked.BillDate != "2026-12-01" || asked.Lookback != workflows.StatementCatchUpDays {
			t.Fatalf("catch-up asked with %+v", asked)
		}
		want := []activities.StatementRequest{{AppID: "app1", BillDate: "2026-12-01"}}
		if !failing {
			want = append(want, activities.StatementRequest{AppID: "app1", BillDate: "2026-11-05"},
				activities.StatementRequest{AppID: "app1", BillDate: "2026-11-05", NoBill: true},
				activities.StatementRequest{AppID: "app1", BillDate: "2026-11-20"})
		}
		if fmt.Sprint(reqs) != fmt.Sprint(want) {
			t.Fatalf("failing=%v: reconciled %+v, want %+v", failing, reqs, want)
		}
	}
}
