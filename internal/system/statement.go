package system

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/statement"
	"github.com/paykit/paykit/worker"
	"github.com/paykit/paykit/workflows"
)

// NewReconciler is the statement reconciler on store, downloading bills into
// PAYKIT_STATEMENT_DIR.
func NewReconciler(cfg config.Config, store *mysql.Store, logger *slog.Logger) *statement.Reconciler {
	return &statement.Reconciler{
		Store: store, Anomalies: store, Retention: store, HTTP: &http.Client{Timeout: 10 * time.Minute}, TempDir: cfg.Statement.TempDir,
		Logger: logger.With("component", "statement"),
	}
}

// withStatements gives the worker's activities the reconciler and the app list.
func (s *System) withStatements(acts *activities.Activities, cfg config.Config, logger *slog.Logger) {
	acts.Statements = NewReconciler(cfg, s.Store, logger)
	acts.StatementApps = func(ctx context.Context) ([]statement.App, error) {
		return statement.Apps(ctx, cfg.AlipayAppID, s.Store, s.Alipay)
	}
	acts.StatementReports = s.Store
	acts.EnsureStatementSchedules = func(ctx context.Context, appIDs []string) error {
		return worker.EnsureStatementSchedules(ctx, s.Temporal, cfg.TaskQueue, statementSchedule(cfg, appIDs))
	}
}

// StatementAppIDs lists the apps the worker schedules a daily reconciliation for. A
// failure to list the tenants' apps is logged and leaves the default app alone scheduled:
// a worker does not refuse to start over it.
func (s *System) StatementAppIDs(ctx context.Context, cfg config.Config, logger *slog.Logger) []string {
	apps, err := statement.Apps(ctx, cfg.AlipayAppID, s.Store, nil)
	if err != nil {
		logger.Error("listing the Alipay apps to reconcile failed; scheduling the default app only", "err", err)
		return []string{cfg.AlipayAppID}
	}
	return statement.AppIDs(apps)
}

// ReconcileInProcess reconciles the day of apps in this process, without a worker: each
// app gets its bill source, its gateway, first.
func ReconcileInProcess(ctx context.Context, cfg config.Config, store *mysql.Store, apps []statement.App, billDate string, logger *slog.Logger) error {
	gws, err := NewAlipayApps(cfg, store, nil)
	if err != nil {
		return err
	}
	withBills, err := statement.Apps(ctx, cfg.AlipayAppID, store, gws)
	if err != nil {
		return err
	}
	return NewReconciler(cfg, store, logger).RunDay(ctx, statement.WithBills(apps, withBills), billDate)
}

// ReconcileThroughTemporal starts, or joins, the statement workflow of the day of each
// app in turn and waits at most wait for each; one still running then ends the turn as
// an *orchestrator.StatementPending.
func ReconcileThroughTemporal(ctx context.Context, cfg config.Config, apps []statement.App, billDate string, wait time.Duration, logger *slog.Logger) error {
	orch, closeTemporal, err := DialOrchestrator(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer closeTemporal()
	for _, app := range apps {
		if _, err := orch.ReconcileStatement(ctx, workflows.StatementInput{
			AppID: app.ID, BillDate: billDate, RetryEvery: cfg.Statement.RetryEvery, GiveUpAfter: cfg.Statement.GiveUpAfter,
		}, "statement of "+billDate+" for app "+app.ID+" (paykit statement -run)", wait); err != nil {
			return err
		}
	}
	return nil
}
