package activities

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/temporal"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/statement"
)

// ErrTypeBillNotAvailable answers a statement run for a day Alipay has not published a
// bill for yet; the workflow waits on a timer and asks again.
const ErrTypeBillNotAvailable = "BillNotAvailable"

// StatementRequest is one reconciliation of an app's bill of a day. NoBill reconciles the
// day as having no bill (Alipay never published one).
type StatementRequest struct {
	AppID    string `json:"app_id"`
	BillDate string `json:"bill_date"`
	NoBill   bool   `json:"no_bill,omitempty"`
}

// StatementReportDates lists the days an app has a statement report of; *mysql.Store
// implements it.
type StatementReportDates interface {
	StatementReportDates(ctx context.Context, appID, from, to string) ([]string, error)
}

// StatementCatchUpRequest asks, after the daily run of AppID for BillDate, which of the
// Lookback days before it (up to two days before it, whose scheduled runs have given up
// waiting for their bill) have no report.
type StatementCatchUpRequest struct {
	AppID    string `json:"app_id"`
	BillDate string `json:"bill_date"`
	Lookback int    `json:"lookback"`
}

// StatementCatchUpResult is the days to reconcile, oldest first, and the apps whose
// schedules the default app's run ensured.
type StatementCatchUpResult struct {
	Missing   []string `json:"missing,omitempty"`
	Scheduled int      `json:"scheduled,omitempty"`
}

// StatementCatchUp finds the days of an app with no statement report in the lookback
// window: a worker that was down, a schedule added late (a tenant's new app), a run that
// failed. The default app's run also gives every app listed now its daily schedule, so
// a tenant's new app is reconciled from the next morning without a worker restart.
func (a *Activities) StatementCatchUp(ctx context.Context, req StatementCatchUpRequest) (StatementCatchUpResult, error) {
	var res StatementCatchUpResult
	if a.StatementApps == nil || a.StatementReports == nil {
		return res, temporal.NewNonRetryableApplicationError("statement catch-up: the worker has no reconciler", ErrTypeInvalid, nil)
	}
	day, err := time.ParseInLocation(statement.DateLayout, req.BillDate, statement.China)
	if err != nil || req.Lookback <= 0 {
		return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("statement catch-up: bad day %q or lookback %d", req.BillDate, req.Lookback), ErrTypeInvalid, nil)
	}
	apps, err := a.StatementApps(ctx)
	if err != nil {
		return res, classify("statement apps", err)
	}
	isDefault := false
	for _, app := range apps {
		isDefault = isDefault || (app.ID == req.AppID && app.Default)
	}
	if isDefault && a.EnsureStatementSchedules != nil {
		ids := statement.AppIDs(apps)
		if err := a.EnsureStatementSchedules(ctx, ids); err != nil {
			return res, classify("statement schedules", err)
		}
		res.Scheduled = len(ids)
	}
	from, to := day.AddDate(0, 0, -req.Lookback), day.AddDate(0, 0, -2)
	have, err := a.StatementReports.StatementReportDates(ctx, req.AppID, from.Format(statement.DateLayout), to.Format(statement.DateLayout))
	if err != nil {
		return res, classify("statement report dates", err)
	}
	for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
		if s := d.Format(statement.DateLayout); !slices.Contains(have, s) {
			res.Missing = append(res.Missing, s)
		}
	}
	return res, nil
}

// StatementApps lists the Alipay apps whose bills are reconciled.
type StatementApps func(ctx context.Context) ([]statement.App, error)

// ReconcileStatement downloads and reconciles one app's bill of one day, heartbeating
// the lines read. It is idempotent: a re-run replaces the day's staged lines, updates
// its one report and records no anomaly twice.
func (a *Activities) ReconcileStatement(ctx context.Context, req StatementRequest) (payment.StatementReport, error) {
	if a.Statements == nil || a.StatementApps == nil {
		return payment.StatementReport{}, temporal.NewNonRetryableApplicationError("statement: the worker has no reconciler", ErrTypeInvalid, nil)
	}
	apps, err := a.StatementApps(ctx)
	if err != nil {
		return payment.StatementReport{}, classify("statement apps", err)
	}
	var app statement.App
	found := false
	for _, x := range apps {
		if x.ID == req.AppID {
			app, found = x, true
		}
	}
	if !found {
		return payment.StatementReport{}, temporal.NewNonRetryableApplicationError("statement: unknown Alipay app "+req.AppID, ErrTypeInvalid, nil)
	}
	rep, err := a.Statements.Run(ctx, statement.Params{
		App: app, BillDate: req.BillDate, NoBill: req.NoBill,
		Progress: func(lines int) { heartbeat(ctx, lines) },
	})
	if statement.IsNotAvailable(err) {
		a.StatementMetrics.run(req.AppID, "not_available")
		return payment.StatementReport{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("statement: no bill of %s yet for app %s", req.BillDate, req.AppID), ErrTypeBillNotAvailable, err)
	}
	if err != nil {
		a.StatementMetrics.run(req.AppID, "error")
		return payment.StatementReport{}, classify("statement", err)
	}
	a.StatementMetrics.observe(rep)
	for kind, n := range rep.ByKind {
		a.Metrics.anomalyN(kind, n)
	}
	lvl := a.log().InfoContext
	if rep.Discrepancies > 0 {
		lvl = a.log().ErrorContext
	}
	lvl(ctx, "statement reconciled", "app_id", rep.AppID, "bill_date", rep.BillDate, "status", rep.Status,
		"lines", rep.BillLines, "discrepancies", rep.Discrepancies, "by_kind", rep.ByKind, "diff_fen", rep.DiffFen)
	return rep, nil
}

// statementKinds are the discrepancy kinds the gauges always show, zero included.
var statementKinds = []string{
	payment.AnomalyStatementPaidNotLocal, payment.AnomalyStatementLocalNotInBill, payment.AnomalyStatementAmountMismatch,
	payment.AnomalyStatementDiscountMismatch, payment.AnomalyStatementRefundNotLocal, payment.AnomalyStatementRefundNotInBill,
	payment.AnomalyStatementRefundAmountMismatch, payment.AnomalyStatementRefundDiscountMismatch,
	payment.AnomalyStatementUnknownTrade, payment.AnomalyStatementDuplicateLine, payment.AnomalyStatementTradeMismatch,
}

// StatementMetrics describe the latest reconciliation of each app. A nil
// *StatementMetrics records nothing.
type StatementMetrics struct {
	runs          *prometheus.CounterVec
	discrepancies *prometheus.GaugeVec
	diff          *prometheus.GaugeVec
	lines         *prometheus.GaugeVec
	lastDate      *prometheus.GaugeVec
}

// NewStatementMetrics registers the statement metrics on reg.
func NewStatementMetrics(reg prometheus.Registerer) *StatementMetrics {
	m := &StatementMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paykit_statement_runs_total", Help: "Statement reconciliation attempts by app and outcome (reconciled, no_bill, not_available, error).",
		}, []string{"app_id", "outcome"}),
		discrepancies: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "paykit_statement_discrepancies", Help: "Discrepancies of the app's latest reconciled day, by kind.",
		}, []string{"app_id", "kind"}),
		diff: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "paykit_statement_diff_fen", Help: "Bill net minus local net of the app's latest reconciled day, in fen.",
		}, []string{"app_id"}),
		lines: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "paykit_statement_bill_lines", Help: "Lines of the app's latest reconciled bill.",
		}, []string{"app_id"}),
		lastDate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "paykit_statement_last_bill_date_seconds", Help: "Start (Unix seconds) of the latest day reconciled for the app.",
		}, []string{"app_id"}),
	}
	reg.MustRegister(m.runs, m.discrepancies, m.diff, m.lines, m.lastDate)
	return m
}

func (m *StatementMetrics) run(appID, outcome string) {
	if m != nil {
		m.runs.WithLabelValues(appID, outcome).Inc()
	}
}

// statementOutcomes are the outcomes of paykit_statement_runs_total: a bill reconciled,
// a day reconciled as having no bill once the run gave up waiting, no bill yet, a failure.
var statementOutcomes = []string{"reconciled", "quiet", "no_bill", "not_available", "error"}

// Expect makes every outcome of each app's runs exist from the start at 0, so that a
// rate over them counts the first one too.
func (m *StatementMetrics) Expect(appIDs []string) {
	if m == nil {
		return
	}
	for _, app := range appIDs {
		for _, o := range statementOutcomes {
			m.runs.WithLabelValues(app, o)
		}
	}
}

func (m *StatementMetrics) observe(rep payment.StatementReport) {
	if m == nil {
		return
	}
	switch rep.Status {
	case payment.StatementNoBill:
		m.run(rep.AppID, "no_bill")
	case payment.StatementQuiet:
		m.run(rep.AppID, "quiet")
	default:
		m.run(rep.AppID, "reconciled")
	}
	for _, k := range statementKinds {
		m.discrepancies.WithLabelValues(rep.AppID, k).Set(float64(rep.ByKind[k]))
	}
	m.diff.WithLabelValues(rep.AppID).Set(float64(rep.DiffFen))
	m.lines.WithLabelValues(rep.AppID).Set(float64(rep.BillLines))
	if from, _, err := statement.DayRange(rep.BillDate); err == nil {
		m.lastDate.WithLabelValues(rep.AppID).Set(float64(from.Unix()))
	}
}
