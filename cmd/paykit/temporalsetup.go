package main

import (
	"context"
	"flag"
	"log/slog"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/orchestrator"
	"github.com/paykit/paykit/workflows"
)

// runTemporalSetup prepares a Temporal server that is not the dev server (which does this
// itself from flags): it creates the namespace if it is missing and registers the payment
// search attributes, then waits until both are in effect. It is idempotent, so a
// deployment can run it before every rollout.
func runTemporalSetup(ctx context.Context, cfg config.Config, args []string, logger *slog.Logger) error {
	fs := flag.NewFlagSet("temporal-setup", flag.ContinueOnError)
	retention := fs.Duration("retention", 30*24*time.Hour, "history retention of closed workflows, for a namespace this command creates")
	timeout := fs.Duration("timeout", 3*time.Minute, "how long to wait for the server to be reachable and the setup to take effect")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	var conn client.Options
	if err := cfg.TemporalConn.Apply(&conn); err != nil {
		return err
	}
	if err := orchestrator.SetupTemporal(ctx, cfg.TemporalAddr, cfg.TemporalNamespace, conn, *retention, logger); err != nil {
		return err
	}
	logger.Info("temporal ready", "addr", cfg.TemporalAddr, "namespace", cfg.TemporalNamespace, "search_attributes", len(workflows.SearchAttributeTypes()))
	return nil
}
