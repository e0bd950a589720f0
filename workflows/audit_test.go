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

// TestAuditWorkflow checks the window the first scheduled audit of a scope (no watermark
// yet) asks for: it ends Lag before the run was due (or started, for a run started by
// hand) and is Window long (a day when unset), with the thresholds passed through.
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
			env.OnActivity(a.AuditWatermark, mock.Anything, mock.Anything).Return(time.Time{}, nil).Once()
			var got activities.AuditRequest
			env.OnActivity(a.Audit, mock.Anything, mock.Anything).Return(
				func(_ context.Context, req activities.AuditRequest) (activities.AuditResult, error) {
					got = req
					return activities.AuditResult{Payments: 3, Findings: 1, ByKind: map[string]int{"lost": 1}}, nil
				}).Once()
			env.OnActivity(a.AuditRecheck, mock.Anything, mock.Anything).Return(activities.AuditRecheckResult{}, nil).Once()
			env.ExecuteWorkflow(workflows.AuditWorkflowName, tc.in)
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			var res activities.AuditResult
			if err := env.GetWorkflowResult(&res); err != nil || res.Findings != 1 || res.ByKind["lost"] != 1 {
				t.Fatalf("result %+v, %v", res, err)
			}
			if !got.Since.Equal(tc.wantSince) || !got.Until.Equal(tc.wantUntil) || got.GrantSLA != tc.in.GrantSLA ||
				!got.WatermarkFrom.IsZero() || got.Scope == "" {
				t.Fatalf("request %+v, want [%s, %s) with grant SLA %s", got, tc.wantSince, tc.wantUntil, tc.in.GrantSLA)
			}
			env.AssertExpectations(t)
		})
	}
}

// TestAuditWorkflow_CatchesUpFromItsWatermark: a run whose scope's watermark is two and
// a half windows behind (two runs skipped while the schedule was paused) audits three
// contiguous windows, each moving the watermark from where the previous one ended; a
// watermark already at the end audits nothing; one far behind is caught up
// MaxAuditWindowsPerRun windows at a time.
func TestAuditWorkflow_CatchesUpFromItsWatermark(t *testing.T) {
	start := time.Date(2026, 3, 2, 3, 0, 0, 0, time.UTC)
	until := start.Add(-time.Hour)
	tests := []struct {
		name      string
		mark      time.Time
		tenant    string
		wantCalls int
		wantScope string
	}{
		{name: "two runs skipped", mark: until.Add(-60 * time.Hour), wantCalls: 3, wantScope: "paykit-audit-default-test-taskqueue"},
		{name: "up to date", mark: until, wantCalls: 0, wantScope: "paykit-audit-default-test-taskqueue"},
		{name: "far behind", mark: until.Add(-100 * 24 * time.Hour), tenant: "shop1", wantCalls: workflows.MaxAuditWindowsPerRun,
			wantScope: "paykit-audit-default-test-taskqueue/shop1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.SetStartTime(start)
			env.RegisterActivity(&activities.Activities{})
			workflows.Register(env)
			var scope string
			env.OnActivity(a.AuditWatermark, mock.Anything, mock.Anything).Return(
				func(_ context.Context, sc string) (time.Time, error) { scope = sc; return tc.mark, nil }).Once()
			var got []activities.AuditRequest
			env.OnActivity(a.Audit, mock.Anything, mock.Anything).Return(
				func(_ context.Context, req activities.AuditRequest) (activities.AuditResult, error) {
					got = append(got, req)
					return activities.AuditResult{Payments: 2, Windows: 1, AuditedUntil: req.Until}, nil
				}).Maybe()
			// After the windows, the payments earlier windows could not verify.
			var recheckScope string
			env.OnActivity(a.AuditRecheck, mock.Anything, mock.Anything).Return(
				func(_ context.Context, req activities.AuditRecheckRequest) (activities.AuditRecheckResult, error) {
					if len(got) != tc.wantCalls {
						t.Errorf("checked again after %d windows, want after all %d", len(got), tc.wantCalls)
					}
					recheckScope = req.Scope
					return activities.AuditRecheckResult{Checked: 3, Verified: 2, GaveUp: 1, Findings: 1}, nil
				}).Once()
			env.ExecuteWorkflow(workflows.AuditWorkflowName, workflows.AuditInput{Window: 24 * time.Hour, Lag: time.Hour, TenantID: tc.tenant})
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if scope != tc.wantScope || len(got) != tc.wantCalls {
				t.Fatalf("scope %q, %d windows; want %q, %d", scope, len(got), tc.wantScope, tc.wantCalls)
			}
			from := tc.mark
			for i, req := range got {
				if !req.Since.Equal(from) || !req.WatermarkFrom.Equal(from) || req.Until.Sub(req.Since) > 24*time.Hour ||
					req.Until.After(until) || req.Scope != tc.wantScope || req.TenantID != tc.tenant {
					t.Fatalf("window %d: %+v; want it to start at %s, at most a day long, ending by %s", i, req, from, until)
				}
				from = req.Until
			}
			var res activities.AuditResult
			if err := env.GetWorkflowResult(&res); err != nil || res.Windows != tc.wantCalls || res.Payments != 2*tc.wantCalls ||
				res.Rechecked != 3 || res.RecheckGaveUp != 1 || recheckScope != tc.wantScope {
				t.Fatalf("result %+v, %v (rechecked scope %q); want the windows and 3 payments checked again in scope %s", res, err, recheckScope, tc.wantScope)
			}
			if tc.wantCalls > 0 && tc.wantCalls < workflows.MaxAuditWindowsPerRun && !from.Equal(until) {
				t.Fatalf("the last window ends at %s, want %s", from, until)
			}
		})
	}
}
