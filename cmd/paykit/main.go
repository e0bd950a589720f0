// Command paykit runs the payment system: the HTTP API, the Temporal worker, the
// migrations, tenant administration, the operator's anomaly list and audit, and `dev`,
// which runs everything locally.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/audit"
	"github.com/paykit/paykit/migrations"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/redis"
	"github.com/paykit/paykit/worker"
)

const usage = `usage: paykit <command> [flags]

commands:
  dev       run the whole system locally: Temporal dev server + UI, migrations, Redis,
            the Alipay simulator, the worker and the API
  api       run the HTTP API
  worker    run the Temporal worker (workflows, activities, schedules)
  migrate   create the database if missing and apply the migrations
  tenant    create or update a tenant (see: paykit tenant -h)
  anomalies list payments an operator must resolve (see: paykit anomalies -h)
  audit     compare a window of payments with Alipay and report broken invariants;
            exits 1 on findings, 2 if it cannot audit (see: paykit audit -h)

Configuration comes from the environment; see README.md.`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := LoadConfig(os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "paykit:", err)
		os.Exit(2)
	}
	logger := newLogger(cfg)
	slog.SetDefault(logger)
	goredis.SetLogger(redis.SlogLogger{Logger: logger})
	cmd, args := os.Args[1], os.Args[2:]
	switch cmd {
	case "api":
		err = runAPI(ctx, cfg, logger)
	case "worker":
		err = runWorker(ctx, cfg, logger)
	case "migrate":
		err = runMigrate(ctx, cfg, logger)
	case "tenant":
		err = runTenant(ctx, cfg, args)
	case "anomalies":
		err = runAnomalies(ctx, cfg, args, os.Stdout)
	case "audit":
		code := runAudit(ctx, cfg, args, os.Stdout, os.Stderr, logger)
		stop()
		os.Exit(code)
	case "dev":
		err = runDev(ctx, cfg, args)
	case "-h", "--help", "help":
		fmt.Println(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "paykit: unknown command %q\n\n%s\n", cmd, usage)
		os.Exit(2)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		logger.Error("paykit "+cmd+" failed", "err", err)
		os.Exit(1)
	}
}

// runMigrate creates the database if it is missing (CREATE DATABASE IF NOT EXISTS, so a
// user without that privilege on an existing database loses nothing) and applies the
// migrations.
func runMigrate(ctx context.Context, cfg Config, logger *slog.Logger) error {
	if err := ensureDatabase(ctx, cfg.MySQLDSN); err != nil {
		logger.Warn("could not create the database; migrating it if it exists", "err", err)
	}
	store, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = store.Close(); _ = store.DB().Close() }()
	if err := migrations.Up(ctx, store.DB()); err != nil {
		return err
	}
	v, err := migrations.Version(ctx, store.DB())
	if err != nil {
		return err
	}
	logger.Info("migrations applied", "version", v)
	return nil
}

func runAPI(ctx context.Context, cfg Config, logger *slog.Logger) error {
	reg := newRegistry()
	sys, err := openSystem(ctx, cfg, logger, reg)
	if err != nil {
		return err
	}
	defer sys.close()
	startPprof(ctx, cfg, logger)
	logger.Info("api listening", "addr", cfg.HTTPAddr, "notify_url", cfg.PublicURL+"/callbacks/alipay")
	return sys.apiServer(cfg, logger, api.NewMetrics(reg)).ListenAndServe(ctx, cfg.HTTPAddr, 20*time.Second)
}

func runWorker(ctx context.Context, cfg Config, logger *slog.Logger) error {
	reg := newRegistry()
	sys, err := openSystem(ctx, cfg, logger, reg)
	if err != nil {
		return err
	}
	defer sys.close()
	startPprof(ctx, cfg, logger)
	acts := sys.activities(cfg, logger)
	acts.Metrics = activities.NewMetrics(reg)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return worker.Run(gctx, sys.tc, workerConfig(cfg), acts, logger) })
	g.Go(func() error {
		logger.Info("worker admin listening", "addr", cfg.WorkerAdminAddr, "endpoints", "/healthz /readyz /metrics")
		return serve(gctx, cfg.WorkerAdminAddr, worker.AdminHandler(reg, sys.ping, logger))
	})
	return g.Wait()
}

func workerConfig(cfg Config) worker.Config {
	return worker.Config{
		TaskQueue: cfg.TaskQueue, SweepEvery: cfg.SweepEvery, SweepStaleAfter: cfg.SweepStaleAfter,
		SweepGrantGrace: cfg.SweepGrantGrace, PurgeEvery: cfg.PurgeEvery,
		AuditEvery: cfg.AuditEvery, AuditLag: auditLag(cfg),
		MaxConcurrentActivities: 200, MaxConcurrentLocalActivities: 200, ShutdownGrace: 20 * time.Second,
		WorkflowTaskPollers: cfg.WorkflowTaskPollers, ActivityTaskPollers: cfg.ActivityTaskPollers,
	}
}

// auditLag is how long before a scheduled audit its window ends: long enough that every
// payment in it is past the grant and webhook SLAs, and expired plus the pending grace.
func auditLag(cfg Config) time.Duration {
	return max(audit.DefaultGrantSLA, audit.DefaultWebhookSLA, cfg.Timing.PaymentTTL+audit.DefaultPendingGrace)
}

func runTenant(ctx context.Context, cfg Config, args []string) error {
	fs := flag.NewFlagSet("tenant", flag.ContinueOnError)
	id := fs.String("id", "", "tenant id (A-Z a-z 0-9 _ -)")
	name := fs.String("name", "", "display name")
	apiKey := fs.String("api-key", "", "API key the tenant authenticates with (stored only as a hash)")
	notifyURL := fs.String("notify-url", "", "merchant webhook URL")
	secret := fs.String("webhook-secret", "", "HMAC-SHA256 secret for webhook signatures")
	appID := fs.String("alipay-app-id", cfg.AlipayAppID, "Alipay app_id for this tenant")
	seller := fs.String("alipay-seller-id", cfg.AlipaySellerID, "Alipay seller_id (PID) for this tenant")
	autoRefund := fs.Bool("auto-refund-paid-after-close", false, "refund money Alipay takes for a payment closed locally as soon as it is detected")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := payment.ValidateTenantID(*id); err != nil {
		return err
	}
	if len(*apiKey) < 16 {
		return errors.New("tenant: -api-key must be at least 16 characters")
	}
	if *name == "" {
		*name = *id
	}
	store, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = store.Close(); _ = store.DB().Close() }()
	return store.UpsertTenant(ctx, payment.Tenant{
		ID: *id, Name: *name, APIKeyHash: api.HashAPIKey(*apiKey), NotifyURL: *notifyURL, WebhookSecret: *secret,
		AlipayAppID: *appID, AlipaySeller: *seller, AutoRefundPaidAfterClose: *autoRefund,
	})
}
