package activities_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/temporal"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/statement"
)

type billsAnswer struct{ err error }

func (b billsAnswer) BillDownloadURL(context.Context, string) (string, error) { return "", b.err }

// TestReconcileStatementErrors: a bill not yet published is the workflow's
// BillNotAvailable (it waits and asks again), an app the worker does not know is a
// refusal, and any other failure is retried.
func TestReconcileStatementErrors(t *testing.T) {
	notYet := &payment.ChannelError{Op: "bill", SubCode: "isp.bill_not_exist", Err: payment.ErrBillNotAvailable}
	tests := []struct {
		name      string
		app       string
		bills     error
		wantType  string
		retryable bool
	}{
		{name: "not published", app: "a1", bills: notYet, wantType: activities.ErrTypeBillNotAvailable},
		{name: "unknown app", app: "other", wantType: activities.ErrTypeInvalid},
		{name: "transport failure", app: "a1", bills: fmt.Errorf("dial: %w", errors.New("refused")), retryable: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			acts := &activities.Activities{
				Statements: &statement.Reconciler{},
				StatementApps: func(context.Context) ([]statement.App, error) {
					return []statement.App{{ID: "a1", Bills: billsAnswer{tc.bills}}}, nil
				},
			}
			_, err := acts.ReconcileStatement(context.Background(), activities.StatementRequest{AppID: tc.app, BillDate: "2026-12-01"})
			var appErr *temporal.ApplicationError
			switch {
			case tc.retryable:
				if err == nil || errors.As(err, &appErr) {
					t.Fatalf("err %v, want a plain (retried) error", err)
				}
			case !errors.As(err, &appErr) || appErr.Type() != tc.wantType || !appErr.NonRetryable():
				t.Fatalf("err %v, want non-retryable %s", err, tc.wantType)
			}
		})
	}
}

// TestReconcileStatementCountsOutcomes: every outcome of an expected app is there at 0
// before any run; a failure counts as error, and a day reconciled without a bill as
// no_bill, not reconciled.
func TestReconcileStatementCountsOutcomes(t *testing.T) {
	db, _ := testenv.MySQL(t)
	st := mysql.NewStore(db)
	reg := prometheus.NewRegistry()
	bills := &billsAnswer{err: errors.New("refused")}
	acts := &activities.Activities{
		Store: storesOf(st), Statements: &statement.Reconciler{Store: st, Anomalies: st, Retention: st},
		StatementApps: func(context.Context) ([]statement.App, error) {
			return []statement.App{{ID: "a1", Default: true, Bills: bills}}, nil
		},
		Metrics: activities.NewMetrics(reg), StatementMetrics: activities.NewStatementMetrics(reg),
	}
	acts.StatementMetrics.Expect([]string{"a1"})
	runs := func() map[string]float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() != "paykit_statement_runs_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				got[labels["app_id"]+" "+labels["outcome"]] = m.GetCounter().GetValue()
			}
		}
		return got
	}
	want := map[string]float64{"a1 reconciled": 0, "a1 quiet": 0, "a1 no_bill": 0, "a1 not_available": 0, "a1 error": 0}
	if got := runs(); !maps.Equal(got, want) {
		t.Fatalf("before any run: %v, want %v", got, want)
	}
	ctx := context.Background()
	if _, err := acts.ReconcileStatement(ctx, activities.StatementRequest{AppID: "a1", BillDate: "2026-12-01"}); err == nil {
		t.Fatal("a refused download reconciled")
	}
	rep, err := acts.ReconcileStatement(ctx, activities.StatementRequest{AppID: "a1", BillDate: "2026-12-01", NoBill: true})
	if err != nil || rep.Status != payment.StatementNoBill {
		t.Fatalf("no-bill day: %+v %v", rep, err)
	}
	want["a1 error"], want["a1 no_bill"] = 1, 1
	if got := runs(); !maps.Equal(got, want) {
		t.Fatalf("after a failure and a no-bill day: %v, want %v", got, want)
	}
}

// The catch-up lists the days of its app in the lookback window, up to two days before
// its own, that have no report; only the default app's run gives every app listed now
// its schedule.
func TestStatementCatchUp_ListsTheDaysWithoutAReport(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.acts.StatementApps = func(context.Context) ([]statement.App, error) {
		return []statement.App{{ID: "appD", Default: true}, {ID: "appT"}}, nil
	}
	f.acts.StatementReports = f.store
	var scheduled [][]string
	f.acts.EnsureStatementSchedules = func(_ context.Context, ids []string) error {
		scheduled = append(scheduled, ids)
		return nil
	}
	for _, day := range []string{"2026-11-25", "2026-11-27", "2026-11-30"} {
		if _, err := f.store.SaveStatementReport(ctx, payment.StatementReport{AppID: "appT", BillDate: day, Status: payment.StatementReconciled,
			StartedAt: time.Now(), FinishedAt: time.Now(), ByKind: map[string]int{}}); err != nil {
			t.Fatal(err)
		}
	}
	var res activities.StatementCatchUpResult
	if err := f.remote(t, &res, f.acts.StatementCatchUp, activities.StatementCatchUpRequest{AppID: "appT", BillDate: "2026-12-01", Lookback: 7}); err != nil {
		t.Fatal(err)
	}
	// The window is 2026-11-24 to 2026-11-29 (two days before 12-01); 11-25 and 11-27
	// have reports, and 11-30's is outside it.
	if want := []string{"2026-11-24", "2026-11-26", "2026-11-28", "2026-11-29"}; fmt.Sprint(res.Missing) != fmt.Sprint(want) || len(scheduled) != 0 {
		t.Fatalf("tenant app: missing %v, schedules %v; want %v and no schedule change", res.Missing, scheduled, want)
	}
	if err := f.remote(t, &res, f.acts.StatementCatchUp, activities.StatementCatchUpRequest{AppID: "appD", BillDate: "2026-12-01", Lookback: 3}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"2026-11-28", "2026-11-29"}; fmt.Sprint(res.Missing) != fmt.Sprint(want) || fmt.Sprint(scheduled) != "[[appD appT]]" || res.Scheduled != 2 {
		t.Fatalf("default app: missing %v, schedules %v; want %v and every app scheduled", res.Missing, scheduled, want)
	}
}
