package system

import (
	"time"

	"github.com/paykit/paykit/audit"
	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/worker"
)

// WorkerConfig is the worker's configuration from cfg, with a daily reconciliation
// scheduled for each of statementAppIDs.
func WorkerConfig(cfg config.Config, statementAppIDs []string) worker.Config {
	return worker.Config{
		TaskQueue: cfg.TaskQueue, SweepEvery: cfg.SweepEvery, SweepStaleAfter: cfg.SweepStaleAfter,
		SweepGrantGrace: cfg.SweepGrantGrace, PurgeEvery: cfg.PurgeEvery,
		AuditEvery: cfg.AuditEvery, AuditLag: audit.Lag(cfg.Timing.PaymentTTL),
		MaxConcurrentActivities: 200, MaxConcurrentLocalActivities: 200, ShutdownGrace: 20 * time.Second,
		WorkflowTaskPollers: cfg.WorkflowTaskPollers, ActivityTaskPollers: cfg.ActivityTaskPollers,
		WorkflowCacheSize: cfg.WorkflowCacheSize,
		Statements:        statementSchedule(cfg, statementAppIDs),
	}
}

// statementSchedule is the worker's schedule of the daily reconciliation, one per app
// listed when the worker starts (a tenant app added later gets its schedule at the next
// worker start; `paykit statement -run` reconciles it by hand meanwhile).
func statementSchedule(cfg config.Config, appIDs []string) worker.StatementConfig {
	return worker.StatementConfig{
		Apps: appIDs, At: cfg.Statement.At,
		RetryEvery: cfg.Statement.RetryEvery, GiveUpAfter: cfg.Statement.GiveUpAfter,
	}
}
