package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/gateways"
	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/statement"
	"github.com/paykit/paykit/worker"
	"github.com/paykit/paykit/workflows"
)

// tenantAppLister pages through the tenants that have an Alipay app of their own, and
// lists the apps tenants have left.
type tenantAppLister interface {
	TenantsWithAlipayCredentials(ctx context.Context, afterID string) ([]payment.Tenant, error)
	KeptAlipayAppIDs(ctx context.Context, leftSince time.Time) ([]string, error)
}

// keptAppsReconciledFor is how long after a tenant left an app its bills are still
// reconciled: a payment opened on it before the move may be paid there until it expires
// and refunded there for 12 months after that (Alipay's longest refund window, 366 days
// with a leap day), so a year and a margin for the payments still open at the move.
const keptAppsReconciledFor = 400 * 24 * time.Hour

// statementApps is the one list of Alipay apps whose bills are reconciled: the
// deployment's default app (ALIPAY_APP_ID), every app a tenant has its own keys for, and
// every app a tenant left less than keptAppsReconciledFor ago, each once. With gws set
// each carries its bill source (its app's gateway); without, only the IDs are listed.
func statementApps(ctx context.Context, cfg config.Config, store tenantAppLister, gws *gateways.Resolver) ([]statement.App, error) {
	def := statement.App{ID: cfg.AlipayAppID, Default: true}
	if gws != nil {
		def.Bills, _ = gws.Default().(payment.BillSource)
	}
	apps := []statement.App{def}
	seen := map[string]bool{cfg.AlipayAppID: true}
	for after := ""; store != nil; {
		ts, err := store.TenantsWithAlipayCredentials(ctx, after)
		if err != nil {
			return nil, fmt.Errorf("statement apps: %w", err)
		}
		if len(ts) == 0 {
			break
		}
		after = ts[len(ts)-1].ID
		for _, t := range ts {
			if t.AlipayAppID == "" || seen[t.AlipayAppID] {
				continue
			}
			seen[t.AlipayAppID] = true
			apps = append(apps, tenantStatementApp(ctx, gws, t.AlipayAppID))
		}
	}
	if store == nil {
		return apps, nil
	}
	kept, err := store.KeptAlipayAppIDs(ctx, time.Now().Add(-keptAppsReconciledFor))
	if err != nil {
		return nil, fmt.Errorf("statement apps: %w", err)
	}
	for _, id := range kept {
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		apps = append(apps, tenantStatementApp(ctx, gws, id))
	}
	return apps, nil
}

// tenantStatementApp is a tenant's app (current or kept) in the statements' list; with
// gws set it carries its bill source.
func tenantStatementApp(ctx context.Context, gws *gateways.Resolver, id string) statement.App {
	app := statement.App{ID: id}
	if gws != nil {
		if gw, err := gws.ForApp(ctx, id); err != nil {
			// One app whose keys do not load fails its own day, not every app's.
			app.Bills = unavailableBills{app: id, err: err}
		} else {
			app.Bills, _ = gw.(payment.BillSource)
		}
	}
	return app
}

// unavailableBills is the bill source of an app whose gateway cannot be built.
type unavailableBills struct {
	app string
	err error
}

func (u unavailableBills) BillDownloadURL(context.Context, string) (string, error) {
	return "", fmt.Errorf("alipay app %s: %w", u.app, u.err)
}

func statementAppIDs(apps []statement.App) []string {
	ids := make([]string, len(apps))
	for i, a := range apps {
		ids[i] = a.ID
	}
	return ids
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

func newReconciler(cfg config.Config, store payment.StatementStore, logger *slog.Logger) *statement.Reconciler {
	return &statement.Reconciler{
		Store: store, HTTP: &http.Client{Timeout: 10 * time.Minute}, TempDir: cfg.Statement.TempDir,
		Logger: logger.With("component", "statement"),
	}
}

// withStatements gives the worker's activities the reconciler and the app list.
func (s *system) withStatements(acts *activities.Activities, cfg config.Config, logger *slog.Logger) {
	acts.Statements = newReconciler(cfg, s.store, logger)
	acts.StatementApps = func(ctx context.Context) ([]statement.App, error) {
		return statementApps(ctx, cfg, s.store, s.gws)
	}
}

// Exit codes of paykit statement.
const (
	statementClean    = 0 // reconciled, no discrepancy
	statementFindings = 1 // at least one discrepancy
	statementFailed   = 2 // no report: not run, the bill is not available yet, or an error
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
		return statementClean
	case err != nil:
		fmt.Fprintln(errOut, "paykit statement:", err)
		return statementFailed
	}
	store, err := openStore(ctx, cfg)
	if err != nil {
		logger.Error("paykit statement failed", "err", err)
		return statementFailed
	}
	defer func() { _ = store.Close(); _ = store.DB().Close() }()
	apps, err := statementApps(ctx, cfg, store, nil)
	if err != nil {
		logger.Error("paykit statement failed", "err", err)
		return statementFailed
	}
	if f.app != "" {
		i := slices.IndexFunc(apps, func(a statement.App) bool { return a.ID == f.app })
		if i < 0 {
			fmt.Fprintf(errOut, "paykit statement: -app %s is not an Alipay app of this deployment (%s)\n", f.app, strings.Join(statementAppIDs(apps), ", "))
			return statementFailed
		}
		apps = apps[i : i+1]
	}
	if f.run {
		if code, err := runStatementDay(ctx, cfg, f, apps, store, errOut, logger); err != nil {
			logger.Error("paykit statement failed", "err", err)
			return code
		}
	}
	code := statementClean
	for _, app := range apps {
		c, err := printStatement(ctx, store, app.ID, f, out)
		if err != nil {
			logger.Error("paykit statement failed", "app_id", app.ID, "err", err)
			return statementFailed
		}
		code = max(code, c)
	}
	return code
}

// runStatementDay reconciles the day of every app, through Temporal or in this process.
func runStatementDay(ctx context.Context, cfg config.Config, f statementFlags, apps []statement.App, store *mysql.Store, errOut io.Writer, logger *slog.Logger) (int, error) {
	if f.direct {
		gws, err := newGateways(cfg, store)
		if err != nil {
			return statementFailed, err
		}
		rec := newReconciler(cfg, store, logger)
		withBills, err := statementApps(ctx, cfg, store, gws)
		if err != nil {
			return statementFailed, err
		}
		for _, app := range apps {
			for _, b := range withBills {
				if b.ID == app.ID {
					app = b
				}
			}
			if _, err := rec.Run(ctx, statement.Params{App: app, BillDate: f.date}); err != nil {
				if statement.IsNotAvailable(err) {
					return statementFailed, fmt.Errorf("alipay has not published the bill of %s for app %s yet (isp.bill_not_exist)", f.date, app.ID)
				}
				return statementFailed, err
			}
		}
		return statementClean, nil
	}
	tc, err := dialTemporal(ctx, cfg, logger, newRegistry(), nil)
	if err != nil {
		return statementFailed, err
	}
	defer tc.Close()
	for _, app := range apps {
		id := workflows.StatementWorkflowID(app.ID, f.date)
		run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: id, TaskQueue: cfg.TaskQueue,
			WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			StaticSummary:            "statement of " + f.date + " for app " + app.ID + " (paykit statement -run)",
		}, workflows.StatementWorkflowName, workflows.StatementInput{
			AppID: app.ID, BillDate: f.date, RetryEvery: cfg.Statement.RetryEvery, GiveUpAfter: cfg.Statement.GiveUpAfter,
		})
		if err != nil {
			return statementFailed, fmt.Errorf("start %s: %w", id, err)
		}
		// A run already waiting for its bill asks Alipay again now rather than at its next
		// timer; one that has finished meanwhile is not found, which is fine.
		_ = tc.SignalWorkflow(ctx, id, run.GetRunID(), workflows.StatementRetrySignal, nil)
		wctx, cancel := context.WithTimeout(ctx, f.wait)
		var rep payment.StatementReport
		err = run.Get(wctx, &rep)
		cancel()
		if err != nil && ctx.Err() == nil && wctx.Err() != nil {
			var st workflows.StatementState
			if v, qerr := tc.QueryWorkflow(ctx, id, "", workflows.StatementQuery); qerr == nil && v.Get(&st) == nil {
				fmt.Fprintf(errOut, "paykit statement: %s is still %s after %s (attempt %d, next at %s; %s); it goes on in Temporal\n",
					id, st.Phase, f.wait, st.Attempts, st.NextTryAt.In(statement.China).Format(time.DateTime), st.LastError)
			}
			return statementFailed, fmt.Errorf("workflow %s did not finish within -wait %s", id, f.wait)
		}
		if err != nil {
			return statementFailed, fmt.Errorf("workflow %s: %w", id, err)
		}
	}
	return statementClean, nil
}

// printStatement prints one app's report of the day and its anomalies.
func printStatement(ctx context.Context, store *mysql.Store, appID string, f statementFlags, out io.Writer) (int, error) {
	rep, err := store.GetStatementReport(ctx, appID, f.date)
	if errors.Is(err, payment.ErrNotFound) {
		fmt.Fprintf(out, "no statement of %s for app %s yet (reconcile it with: paykit statement -date %s -app %s -run)\n", f.date, appID, f.date, appID)
		return statementFailed, nil
	}
	if err != nil {
		return statementFailed, err
	}
	var anomalies []payment.Anomaly
	if f.showAnomalies || f.asJSON {
		if anomalies, err = store.ListStatementAnomalies(ctx, appID, f.date); err != nil {
			return statementFailed, err
		}
	}
	code := statementClean
	if rep.Discrepancies > 0 {
		code = statementFindings
	}
	if f.asJSON {
		return code, json.NewEncoder(out).Encode(map[string]any{"report": rep, "anomalies": anomalies})
	}
	yuan := func(fen int64) string {
		if fen < 0 {
			return "-" + payment.Amount(-fen).Yuan()
		}
		return payment.Amount(fen).Yuan()
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "statement of %s, app %s: %s (run %d, %s)\n", rep.BillDate, rep.AppID, rep.Status, rep.Runs,
		rep.FinishedAt.In(statement.China).Format("2006-01-02 15:04:05 China time"))
	fmt.Fprintln(tw, "\tPAYMENTS\tCNY\tREFUNDS\tCNY\tNET CNY")
	fmt.Fprintf(tw, "alipay bill\t%d\t%s\t%d\t%s\t%s\n", rep.BillTradeCount, yuan(rep.BillTradeFen), rep.BillRefundCount, yuan(rep.BillRefundFen), yuan(rep.BillNet()))
	fmt.Fprintf(tw, "local\t%d\t%s\t%d\t%s\t%s\n", rep.LocalTradeCount, yuan(rep.LocalTradeFen), rep.LocalRefundCount, yuan(rep.LocalRefundFen), yuan(rep.LocalNet()))
	fmt.Fprintf(tw, "difference\t\t\t\t\t%s\n", yuan(rep.DiffFen))
	if err := tw.Flush(); err != nil {
		return statementFailed, err
	}
	fmt.Fprintf(out, "bill lines %d, service fees %s CNY\n", rep.BillLines, yuan(rep.BillFeeFen))
	if rep.Discrepancies == 0 {
		fmt.Fprintln(out, "discrepancies: 0 (clean)")
		return code, nil
	}
	var kinds []string
	for k, n := range rep.ByKind {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
	}
	slices.Sort(kinds)
	fmt.Fprintf(out, "discrepancies: %d (%s)\n", rep.Discrepancies, strings.Join(kinds, " "))
	if len(anomalies) > 0 {
		tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KIND\tTENANT\tREF\tTRADE_NO\tAMOUNT (CNY)\tDETAIL")
		for _, a := range anomalies {
			detail := strings.TrimPrefix(a.Detail, "statement "+appID+" "+f.date+": ")
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", a.Kind, a.TenantID, a.PaymentNo, a.TradeNo, a.Amount.Yuan(), detail)
		}
		if err := tw.Flush(); err != nil {
			return statementFailed, err
		}
	}
	return code, nil
}

// statementAppIDs lists the apps the worker schedules a daily reconciliation for. A
// failure to list the tenants' apps is logged and leaves the default app alone scheduled:
// a worker does not refuse to start over it.
func (s *system) statementAppIDs(ctx context.Context, cfg config.Config, logger *slog.Logger) []string {
	apps, err := statementApps(ctx, cfg, s.store, nil)
	if err != nil {
		logger.Error("listing the Alipay apps to reconcile failed; scheduling the default app only", "err", err)
		return []string{cfg.AlipayAppID}
	}
	return statementAppIDs(apps)
}
