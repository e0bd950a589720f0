package system

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paykit/paykit/audit"
	"github.com/paykit/paykit/gauges"
	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/worker"
)

// WorkerConfig is the worker's configuration from cfg, with a daily reconciliation
// scheduled for each of statementAppIDs.
func WorkerConfig(cfg config.Config, statementAppIDs []string) worker.Config {
	return worker.Config{
		TaskQueue: cfg.TaskQueue, SweepEvery: cfg.SweepEvery, SweepStaleAfter: cfg.SweepStaleAfter,
		ReconcilerEvery: cfg.ReconcilerEvery, ReconcileInterval: cfg.Timing.ReconcileInterval,
		SweepGrantGrace: cfg.SweepGrantGrace, PurgeEvery: cfg.PurgeEvery,
		AuditEvery: cfg.AuditEvery, AuditLag: audit.Lag(cfg.Timing.PaymentTTL),
		MaxConcurrentActivities: 200, MaxConcurrentLocalActivities: 200, ShutdownGrace: 20 * time.Second,
		WorkflowTaskPollers: cfg.WorkflowTaskPollers, ActivityTaskPollers: cfg.ActivityTaskPollers,
		WorkflowCacheSize: cfg.WorkflowCacheSize, EachPaymentChange: cfg.EachPaymentChange, Versioning: cfg.WorkerVersioning,
		Statements: statementSchedule(cfg, statementAppIDs),
	}
}

// statementSchedule is the worker's schedule of the daily reconciliation, one per app
// listed when the worker starts; a tenant app added later gets its schedule from the
// default app's next daily run (activities.StatementCatchUp), and its days from then on
// and the ones it missed are reconciled by its own runs' catch-up.
func statementSchedule(cfg config.Config, appIDs []string) worker.StatementConfig {
	return worker.StatementConfig{
		Apps: appIDs, At: cfg.Statement.At,
		RetryEvery: cfg.Statement.RetryEvery, GiveUpAfter: cfg.Statement.GiveUpAfter,
	}
}

// RunGauges keeps the worker's backlog and schedule gauges on reg until ctx ends. The
// pending grace is the audit's, so a payment the gauge counts is one `paykit audit`
// reports as stuck_pending if its workflow is gone.
func (s *System) RunGauges(ctx context.Context, wcfg worker.Config, reg prometheus.Registerer, logger *slog.Logger) error {
	return gauges.New(reg).Run(ctx, gauges.Config{
		Store: s.Store, Schedules: gauges.ScheduleClient{Client: s.Temporal.ScheduleClient()}, List: worker.Schedules(wcfg),
		PendingGrace: audit.DefaultPendingGrace, Logger: logger.With("component", "gauges"),
	})
}
