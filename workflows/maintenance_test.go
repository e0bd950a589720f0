package workflows_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
)

// The scheduled purge deletes expired Idempotency-Keys, then delivered events past their
// retention, then resolved anomalies past theirs (whether or not the events' purge
// failed); a failing key purge ends the run before the others, and the run answers with
// the keys it deleted.
func TestPurgeWorkflow_KeysThenDeliveredEvents(t *testing.T) {
	tests := []struct {
		name       string
		keysErr    error
		eventsErr  bool
		wantEvents bool
	}{
		{name: "both purged", wantEvents: true},
		{name: "the events' purge fails, the anomalies' runs", eventsErr: true, wantEvents: true},
		{name: "the key purge fails", keysErr: temporal.NewNonRetryableApplicationError("down", "test", errors.New("down"))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.RegisterActivity(&activities.Activities{})
			workflows.Register(env)
			env.OnActivity(a.PurgeIdempotencyKeys, mock.Anything).Return(int64(7), tc.keysErr).Once()
			events, anomalies := 0, 0
			env.OnActivity(a.PurgeDeliveredEvents, mock.Anything).Return(func(context.Context) (int64, error) {
				events++
				if tc.eventsErr {
					return 0, temporal.NewNonRetryableApplicationError("db", "test", errors.New("db"))
				}
				return 1000, nil
			}).Maybe()
			env.OnActivity(a.PurgeResolvedAnomalies, mock.Anything).Return(func(context.Context) (int64, error) {
				anomalies++
				return 3, nil
			}).Maybe()
			env.ExecuteWorkflow(workflows.PurgeWorkflowName)
			failed := tc.keysErr != nil || tc.eventsErr
			if err := env.GetWorkflowError(); (err != nil) != failed {
				t.Fatalf("workflow error %v, want one: %v", err, failed)
			}
			if want := map[bool]int{true: 1, false: 0}[tc.wantEvents]; events != want || anomalies != want {
				t.Fatalf("delivered events purged %d times and resolved anomalies %d times, want %d each", events, anomalies, want)
			}
			if !failed {
				var n int64
				if err := env.GetWorkflowResult(&n); err != nil || n != 7 {
					t.Fatalf("result %d, %v; want the 7 keys", n, err)
				}
			}
		})
	}
}

// A scheduled sweep goes on where the last one that completed stopped: the schedule hands
// each run that run's result, and its cursor reaches the sweep. The first run, or one
// whose last result came from a sweeper without the cursor, starts from the oldest.
func TestSweeperWorkflow_GoesOnWhereTheLastRunStopped(t *testing.T) {
	cursor := payment.Cursor{At: time.Date(2026, 12, 7, 1, 2, 3, 0, time.UTC), ID: 42}
	tests := []struct {
		name string
		last any
		want payment.Cursor
	}{
		{name: "first run"},
		{name: "after a run that stopped mid-walk", last: activities.SweepResult{Checked: 500, Cursor: cursor}, want: cursor},
		{name: "after a run recorded before the cursor", last: map[string]int{"checked": 500}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.RegisterActivity(&activities.Activities{})
			workflows.Register(env)
			if tc.last != nil {
				env.SetLastCompletionResult(tc.last)
			}
			var got payment.Cursor
			env.OnActivity(a.SweepStalePayments, mock.Anything, time.Minute, 500, mock.Anything).Return(
				func(_ context.Context, _ time.Duration, _ int, opts activities.SweepOptions) (activities.SweepResult, error) {
					got = opts.After
					return activities.SweepResult{}, nil
				}).Once()
			env.ExecuteWorkflow(workflows.SweeperWorkflowName, workflows.SweepInput{StaleAfter: time.Minute, Limit: 500})
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("sweep after %+v, want %+v", got, tc.want)
			}
		})
	}
}
