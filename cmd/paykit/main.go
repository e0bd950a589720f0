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
	"github.com/paykit/paykit/internal/buildinfo"
	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/internal/system"
	"github.com/paykit/paykit/redis"
	"github.com/paykit/paykit/worker"
)

const usage = `usage: paykit <command> [flags]

commands:
  dev       run the whole system locally: Temporal dev server + UI, migrations, Redis,
            the Alipay simulator, the worker and the API
  api       run the HTTP API
  worker    run the Temporal worker (workflows, activities, schedules)
  migrate   create the database if missing and apply the migrations (-down-to N [-force]: roll back)
  temporal-setup
            create the Temporal namespace if missing and register the payment search
            attributes (a real Temporal server; the dev server does it itself)
  tenant    create or update a tenant (see: paykit tenant -h)
  anomalies list payments an operator must resolve (see: paykit anomalies -h)
  apps      list the deployment's default apps, current and earlier; -keep records the
            current one with its keys before ALIPAY_APP_ID changes (see: paykit apps -h)
  audit     compare a window of payments with Alipay and report broken invariants;
            exits 1 on findings, 2 if it cannot audit (see: paykit audit -h)
  statement show (with -run: reconcile) a day's Alipay bill against the local records;
            exits 1 on discrepancies, 2 if there is no report (see: paykit statement -h)
  probe     GET a URL (probe http://127.0.0.1:8084/readyz) and exit 1 unless it answers
            2xx within 3 s: the health check of an image without curl
  version   print the build: release, module version, commit and Go version (also the
            paykit_build_info metric)
  trace     print a payment's spans as a tree from a PAYKIT_TRACE_FILE (see: paykit trace -h)

Configuration comes from the environment; see docs/operate/configuration.md.`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if runWithoutConfig(os.Args[1], os.Args[2:]) {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := config.Load(os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "paykit:", err)
		os.Exit(2)
	}
	logger := system.NewLogger(cfg)
	slog.SetDefault(logger)
	goredis.SetLogger(redis.SlogLogger{Logger: logger})
	cmd, args := os.Args[1], os.Args[2:]
	if run, ok := reportCommands()[cmd]; ok {
		code := run(ctx, cfg, args, logger)
		stop()
		os.Exit(code)
	}
	run, ok := commands()[cmd]
	switch {
	case ok:
	case cmd == "-h" || cmd == "--help" || cmd == "help":
		fmt.Println(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "paykit: unknown command %q\n\n%s\n", cmd, usage)
		os.Exit(2)
	}
	if code := exitCode(logger, cmd, run(ctx, cfg, args, logger)); code != 0 {
		os.Exit(code)
	}
}

// runWithoutConfig runs cmd if it needs no configuration, and reports whether it did:
// version, the build being what to know when the configuration fails, and probe, a
// health check.
func runWithoutConfig(cmd string, args []string) bool {
	switch cmd {
	case "version", "-version", "--version":
		fmt.Println(buildinfo.Read())
		return true
	case "probe":
		if len(args) != 1 {
			fmt.Fprintln(os.Stderr, "usage: paykit probe <url>")
			os.Exit(2)
		}
		if err := runProbe(context.Background(), args[0], 3*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "paykit probe:", err)
			os.Exit(1)
		}
		return true
	}
	return false
}

// command runs one subcommand with the configuration and its arguments; exitCode turns
// its error into the exit code.
type command func(ctx context.Context, cfg config.Config, args []string, logger *slog.Logger) error

// commands is the table of the subcommands that run with the configuration, by name.
func commands() map[string]command {
	return map[string]command{
		"api": func(ctx context.Context, cfg config.Config, _ []string, logger *slog.Logger) error {
			return runAPI(ctx, cfg, logger)
		},
		"worker": func(ctx context.Context, cfg config.Config, _ []string, logger *slog.Logger) error {
			return runWorker(ctx, cfg, logger)
		},
		"migrate":        runMigrate,
		"temporal-setup": runTemporalSetup,
		"tenant": func(ctx context.Context, cfg config.Config, args []string, _ *slog.Logger) error {
			return runTenant(ctx, cfg, args)
		},
		"anomalies": func(ctx context.Context, cfg config.Config, args []string, _ *slog.Logger) error {
			return runAnomalies(ctx, cfg, args, os.Stdout)
		},
		"apps": func(ctx context.Context, cfg config.Config, args []string, _ *slog.Logger) error {
			return runApps(ctx, cfg, args, os.Stdout)
		},
		"dev": func(ctx context.Context, cfg config.Config, args []string, _ *slog.Logger) error {
			return runDev(ctx, cfg, args)
		},
		"trace": func(_ context.Context, cfg config.Config, args []string, _ *slog.Logger) error {
			return runTrace(cfg, args, os.Stdout)
		},
	}
}

// reportCommand runs one subcommand whose exit code tells what it found: the process
// exits with the code it returns.
type reportCommand func(ctx context.Context, cfg config.Config, args []string, logger *slog.Logger) int

// reportCommands is the table of the subcommands with exit codes of their own (audit,
// statement), by name.
func reportCommands() map[string]reportCommand {
	return map[string]reportCommand{
		"audit": func(ctx context.Context, cfg config.Config, args []string, logger *slog.Logger) int {
			return runAudit(ctx, cfg, args, os.Stdout, os.Stderr, logger)
		},
		"statement": func(ctx context.Context, cfg config.Config, args []string, logger *slog.Logger) int {
			return runStatement(ctx, cfg, args, os.Stdout, os.Stderr, logger)
		},
	}
}

// exitCode logs a command's failure and returns the exit code. Asking for help (-h),
// which the flag package returns as flag.ErrHelp after printing the usage, is not a
// failure, nor is an interrupt.
func exitCode(logger *slog.Logger, cmd string, err error) int {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	logger.Error("paykit "+cmd+" failed", "err", err)
	return 1
}

// runMigrate is `paykit migrate`: up to the latest version, or with -down-to back to
// a version, which refuses to drop tables holding payments, refunds or credentials
// unless -force.
func runMigrate(ctx context.Context, cfg config.Config, args []string, logger *slog.Logger) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	downTo := fs.Int64("down-to", -1, "roll back to this version (0: an empty schema) instead of migrating up")
	force := fs.Bool("force", false, "with -down-to: drop tables and columns even if they hold records")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *downTo < 0 {
		if *force {
			return errors.New("migrate: -force goes with -down-to")
		}
		return system.Migrate(ctx, cfg, logger)
	}
	return system.MigrateDown(ctx, cfg, *downTo, *force, logger)
}

func runAPI(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	tr, err := system.SetupTracing(ctx, cfg, "paykit-api", logger)
	if err != nil {
		return err
	}
	defer system.ShutdownTracing(tr, logger)
	reg := system.NewRegistry()
	sys, err := system.Open(ctx, cfg, logger, reg, tr)
	if err != nil {
		return err
	}
	defer sys.Close()
	srv := sys.APIServer(cfg, logger, api.NewMetrics(reg))
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		logger.Info("api admin listening", "addr", cfg.APIAdminAddr, "endpoints", "/healthz /readyz /metrics /debug/pprof/")
		return system.Serve(gctx, cfg.APIAdminAddr, srv.AdminHandler())
	})
	g.Go(func() error {
		logger.Info("api listening", "addr", cfg.HTTPAddr, "notify_url", cfg.PublicURL+"/callbacks/alipay")
		return srv.ListenAndServe(gctx, cfg.HTTPAddr, 20*time.Second)
	})
	return g.Wait()
}

func runWorker(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	tr, err := system.SetupTracing(ctx, cfg, "paykit-worker", logger)
	if err != nil {
		return err
	}
	defer system.ShutdownTracing(tr, logger)
	reg := system.NewRegistry()
	sys, err := system.Open(ctx, cfg, logger, reg, tr)
	if err != nil {
		return err
	}
	defer sys.Close()
	acts := sys.Activities(cfg, logger)
	acts.Metrics = activities.NewMetrics(reg)
	acts.StatementMetrics = activities.NewStatementMetrics(reg)
	wcfg := system.WorkerConfig(cfg, sys.StatementAppIDs(ctx, cfg, logger))
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return worker.Run(gctx, sys.Temporal, wcfg, acts, logger) })
	g.Go(func() error { return sys.RunGauges(gctx, wcfg, reg, logger) })
	g.Go(func() error {
		logger.Info("worker admin listening", "addr", cfg.WorkerAdminAddr, "endpoints", "/healthz /readyz /metrics /debug/pprof/")
		return system.Serve(gctx, cfg.WorkerAdminAddr, worker.AdminHandler(reg, sys.Ping, logger))
	})
	return g.Wait()
}
