package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/internal/system"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/orchestrator"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/statement"
)

type statementFlags struct {
	date, app     string
	run, direct   bool
	asJSON        bool
	wait          time.Duration
	showAnomalies bool
}

func parseStatementFlags(args []string, now time.Time, errOut io.Writer) (statementFlags, error) {
	fs := flag.NewFlagSet("statement", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var f statementFlags
	fs.StringVar(&f.date, "date", "yesterday", "the China-time day: yyyy-MM-dd, yesterday or today")
	fs.StringVar(&f.app, "app", "", "the Alipay app_id (default: every app)")
	fs.BoolVar(&f.run, "run", false, "reconcile the day now (through Temporal, joining a run of the same day), then print it")
	fs.BoolVar(&f.direct, "direct", false, "with -run: reconcile in this process instead of through Temporal")
	fs.DurationVar(&f.wait, "wait", 2*time.Minute, "with -run: how long to wait for the Temporal run (it keeps waiting for a late bill after that)")
	fs.BoolVar(&f.asJSON, "json", false, "print the report and its anomalies as JSON")
	fs.BoolVar(&f.showAnomalies, "anomalies", true, "list the anomalies the day recorded")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch f.date {
	case "today":
		f.date = now.In(statement.China).Format(statement.DateLayout)
	case "yesterday":
		f.date = now.In(statement.China).AddDate(0, 0, -1).Format(statement.DateLayout)
	}
	if _, _, err := statement.DayRange(f.date); err != nil {
		return f, fmt.Errorf("-date: %s", payment.ErrorMessage(err))
	}
	if f.direct && !f.run {
		return f, errors.New("-direct needs -run")
	}
	return f, nil
}

// runStatement prints (and with -run first reconciles) the statement of a day. It
// returns the process exit code.
func runStatement(ctx context.Context, cfg config.Config, args []string, out, errOut io.Writer, logger *slog.Logger) int {
	f, err := parseStatementFlags(args, time.Now(), errOut)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return statement.ExitClean
	case err != nil:
		fmt.Fprintln(errOut, "paykit statement:", err)
		return statement.ExitNoReport
	}
	store, err := system.OpenStore(ctx, cfg)
	if err != nil {
		logger.Error("paykit statement failed", "err", err)
		return statement.ExitNoReport
	}
	defer system.CloseStore(store)
	apps, err := statement.Apps(ctx, cfg.AlipayAppID, store, nil)
	if err != nil {
		logger.Error("paykit statement failed", "err", err)
		return statement.ExitNoReport
	}
	if apps, err = statement.Select(apps, f.app); err != nil {
		fmt.Fprintln(errOut, "paykit statement: -app", err)
		return statement.ExitNoReport
	}
	if f.run {
		if err := runStatementDay(ctx, cfg, f, apps, store, errOut, logger); err != nil {
			logger.Error("paykit statement failed", "err", err)
			return statement.ExitNoReport
		}
	}
	code := statement.ExitClean
	for _, app := range apps {
		c, err := statement.Print(ctx, out, store, app.ID, f.date, statement.PrintOptions{JSON: f.asJSON, Anomalies: f.showAnomalies})
		if err != nil {
			logger.Error("paykit statement failed", "app_id", app.ID, "err", err)
			return statement.ExitNoReport
		}
		code = max(code, c)
	}
	return code
}

// runStatementDay reconciles the day of every app, through Temporal or in this process.
func runStatementDay(ctx context.Context, cfg config.Config, f statementFlags, apps []statement.App, store *mysql.Store, errOut io.Writer, logger *slog.Logger) error {
	if f.direct {
		return system.ReconcileInProcess(ctx, cfg, store, apps, f.date, logger)
	}
	err := system.ReconcileThroughTemporal(ctx, cfg, apps, f.date, f.wait, logger)
	var pending *orchestrator.StatementPending
	if errors.As(err, &pending) {
		if st := pending.State; pending.Queried {
			fmt.Fprintf(errOut, "paykit statement: %s is still %s after %s (attempt %d, next at %s; %s); it goes on in Temporal\n",
				pending.WorkflowID, st.Phase, f.wait, st.Attempts, st.NextTryAt.In(statement.China).Format(time.DateTime), st.LastError)
		}
		return fmt.Errorf("workflow %s did not finish within -wait %s", pending.WorkflowID, f.wait)
	}
	return err
}
