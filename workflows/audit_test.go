package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/workflows"
)

// TestAuditWorkflow checks the window the scheduled audit asks for: it ends Lag before
// the run was due (or started, for a run started by hand) and is Window long (a day when
// unset), with the thresholds passed through.
func TestAuditWorkflow(t *testing.T) {
	start := time.Date(2026, 3, 2, 3, 7, 0, 0, time.UTC)
	due := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		in        workflows.AuditInput
		due       time.Time
		wantSince time.Time
		wantUntil time.Time
	}{
		{name: "window and lag", in: workflows.AuditInput{Window: 12 * time.Hour, Lag: time.Hour, GrantSLA: time.Minute},
			wantSince: start.Add(-13 * time.Hour), wantUntil: start.Add(-time.Hour)},
		{name: "default window", in: workflows.AuditInput{},
			wantSince: start.Add(-24 * time.Hour), wantUntil: start},
		{name: "scheduled run that started late", in: workflows.AuditInput{Window: 24 * time.Hour, Lag: time.Hour}, due: due,
			wantSince: due.Add(-25 * time.Hour), wantUntil: due.Add(-time.Hour)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.SetStartTime(start)
			if !tc.due.IsZero() {
				sa := temporal.NewSearchAttributes(temporal.NewSearchAttributeKeyTime("TemporalScheduledStartTime").ValueSet(tc.due))
				if err := env.SetTypedSearchAttributesOnStart(sa); err != nil {
					t.Fatal(err)
				}
			}
			env.RegisterActivity(&activities.Activities{})
			workflows.Register(env)
			var got activities.AuditRequest
			env.OnActivity(a.Audit, mock.Anything, mock.Anything).Return(
				func(_ context.Context, req activities.AuditRequest) (activities.AuditResult, error) {
					got = req
					return activities.AuditResult{Payments: 3, Findings: 1, ByKind: map[string]int{"lost": 1}}, nil
				}).Once()
			env.ExecuteWorkflow(workflows.AuditWorkflowName, tc.in)
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			var res activities.AuditResult
			if err := env.GetWorkflowResult(&res); err != nil || res.Findings != 1 || res.ByKind["lost"] != 1 {
				t.Fatalf("result %+v, %v", res, err)
			}
			if !got.Since.Equal(tc.wantSince) || !got.Until.Equal(tc.wantUntil) || got.GrantSLA != tc.in.GrantSLA {
				t.Fatalf("request %+v, want [%s, %s) with grant SLA %s", got, tc.wantSince, tc.wantUntil, tc.in.GrantSLA)
			}
			env.AssertExpectations(t)
		})
	}
}
