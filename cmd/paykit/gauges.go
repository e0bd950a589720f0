package main

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paykit/paykit/audit"
	"github.com/paykit/paykit/gauges"
	"github.com/paykit/paykit/internal/system"
	"github.com/paykit/paykit/worker"
)

// runGauges keeps the worker's backlog and schedule gauges on reg until ctx ends. The
// pending grace is the audit's, so a payment the gauge counts is one `paykit audit`
// reports as stuck_pending if its workflow is gone.
func runGauges(ctx context.Context, sys *system.System, wcfg worker.Config, reg prometheus.Registerer, logger *slog.Logger) error {
	return gauges.New(reg).Run(ctx, gauges.Config{
		Store: sys.Store, Schedules: gauges.ScheduleClient{Client: sys.Temporal.ScheduleClient()}, List: worker.Schedules(wcfg),
		PendingGrace: audit.DefaultPendingGrace, Logger: logger.With("component", "gauges"),
	})
}
