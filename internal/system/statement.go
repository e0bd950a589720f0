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
)

// NewReconciler is the statement reconciler on store, downloading bills into
// PAYKIT_STATEMENT_DIR.
func NewReconciler(cfg config.Config, store *mysql.Store, logger *slog.Logger) *statement.Reconciler {
	return &statement.Reconciler{
		Store: store, Anomalies: store, HTTP: &http.Client{Timeout: 10 * time.Minute}, TempDir: cfg.Statement.TempDir,
		Logger: logger.With("component", "statement"),
	}
}

// withStatements gives the worker's activities the reconciler and the app list.
func (s *System) withStatements(acts *activities.Activities, cfg config.Config, logger *slog.Logger) {
	acts.Statements = NewReconciler(cfg, s.Store, logger)
	acts.StatementApps = func(ctx context.Context) ([]statement.App, error) {
		return statement.Apps(ctx, cfg.AlipayAppID, s.Store, s.Gateways)
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
