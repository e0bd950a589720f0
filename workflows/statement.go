package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/payment"
)

// StatementWorkflowName and StatementQuery name the daily statement reconciliation and
// its query handler.
const (
	StatementWorkflowName = "StatementWorkflow"
	StatementQuery        = "statement"
	// StatementRetrySignal makes a run waiting for its bill ask Alipay again now (paykit
	// statement -run sends it, after an operator saw the bill published).
	StatementRetrySignal = "statement-retry"
)

// Defaults of a StatementInput that sets none.
const (
	DefaultStatementRetryEvery = 30 * time.Minute
	DefaultStatementGiveUp     = 48 * time.Hour
)

// chinaTime is Alipay's zone, UTC+8 without daylight saving (no tzdata needed).
var chinaTime = time.FixedZone("CST", 8*3600)

// StatementWorkflowID names the run of one app and day started by hand, so that asking
// twice joins the same run.
func StatementWorkflowID(appID, billDate string) string {
	return "paykit-statement-" + appID + "-" + billDate
}

// StatementInput is one app's reconciliation. BillDate empty means the China-time day
// before the run was due (the schedule's case).
type StatementInput struct {
	AppID    string `json:"app_id"`
	BillDate string `json:"bill_date,omitempty"`
	// RetryEvery is how long to wait before asking again for a bill Alipay has not
	// published yet; GiveUpAfter is how long after the day's end to keep asking before
	// reconciling the day as having no bill.
	RetryEvery  time.Duration `json:"retry_every,omitempty"`
	GiveUpAfter time.Duration `json:"give_up_after,omitempty"`
}

// StatementState is what the query handler shows while the run waits or works.
type StatementState struct {
	AppID    string `json:"app_id"`
	BillDate string `json:"bill_date"`
	// Phase: waiting_for_bill, reconciling, done.
	Phase     string                   `json:"phase"`
	Attempts  int                      `json:"attempts"`
	NextTryAt time.Time                `json:"next_try_at,omitzero"`
	LastError string                   `json:"last_error,omitempty"`
	Report    *payment.StatementReport `json:"report,omitempty"`
}

// StatementWorkflow reconciles one app's bill of one day. A bill not yet published is
// asked for again on a timer, not failed; after GiveUpAfter past the day's end the day
// is reconciled as having no bill, so every local PAID of it shows as absent.
func StatementWorkflow(ctx workflow.Context, in StatementInput) (payment.StatementReport, error) {
	in.RetryEvery = positiveOr(in.RetryEvery, DefaultStatementRetryEvery)
	in.GiveUpAfter = positiveOr(in.GiveUpAfter, DefaultStatementGiveUp)
	if in.BillDate == "" {
		due := workflow.GetInfo(ctx).WorkflowStartTime
		if t, ok := workflow.GetTypedSearchAttributes(ctx).GetTime(saScheduledStart); ok && !t.IsZero() {
			due = t
		}
		in.BillDate = due.In(chinaTime).AddDate(0, 0, -1).Format("2006-01-02")
	}
	day, err := time.ParseInLocation("2006-01-02", in.BillDate, chinaTime)
	if err != nil || in.AppID == "" {
		return payment.StatementReport{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("statement: want an app_id and a yyyy-MM-dd bill date, got %q %q", in.AppID, in.BillDate), activities.ErrTypeInvalid, nil)
	}
	st := StatementState{AppID: in.AppID, BillDate: in.BillDate, Phase: "reconciling"}
	if err := workflow.SetQueryHandler(ctx, StatementQuery, func() (StatementState, error) { return st, nil }); err != nil {
		return payment.StatementReport{}, err
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Hour,
		HeartbeatTimeout:    2 * time.Minute,
		Summary:             "reconcile the bill of " + in.BillDate,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: 10 * time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Minute, MaximumAttempts: 10,
		},
	})
	giveUpAt := day.AddDate(0, 0, 1).Add(in.GiveUpAfter)
	retryNow := workflow.GetSignalChannel(ctx, StatementRetrySignal)
	req := activities.StatementRequest{AppID: in.AppID, BillDate: in.BillDate}
	for {
		st.Attempts++
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("Reconciling the Alipay bill of **%s** for app `%s` (attempt %d).", in.BillDate, in.AppID, st.Attempts))
		var rep payment.StatementReport
		err := workflow.ExecuteActivity(ctx, a.ReconcileStatement, req).Get(ctx, &rep)
		var appErr *temporal.ApplicationError
		if err != nil && errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeBillNotAvailable {
			st.LastError = appErr.Message()
			if !workflow.Now(ctx).Before(giveUpAt) {
				req.NoBill = true
				continue
			}
			st.Phase, st.NextTryAt = "waiting_for_bill", workflow.Now(ctx).Add(in.RetryEvery)
			workflow.SetCurrentDetails(ctx, fmt.Sprintf("Alipay has not published the bill of **%s** for app `%s` yet; asking again at %s (attempt %d).",
				in.BillDate, in.AppID, st.NextTryAt.In(chinaTime).Format(time.DateTime), st.Attempts))
			waitForBill(ctx, in.RetryEvery, retryNow)
			st.Phase, st.NextTryAt = "reconciling", time.Time{}
			continue
		}
		if err != nil {
			st.LastError = err.Error()
			return payment.StatementReport{}, err
		}
		st.Phase, st.Report, st.LastError = "done", &rep, ""
		workflow.SetCurrentDetails(ctx, statementDetails(rep))
		if workflow.GetVersion(ctx, "statement-catch-up", workflow.DefaultVersion, 1) == 1 {
			catchUp(ctx, in.AppID, in.BillDate, &st)
		}
		return rep, nil
	}
}

// StatementCatchUpDays is how far back the daily run looks for days of its app that
// have no report (within the staged lines' retention).
const StatementCatchUpDays = 30

// catchUp reconciles the days of the app in the last StatementCatchUpDays with no
// report (a worker that was down, an app whose schedule came late, a run that failed),
// and, on the default app's run, gives every app listed now its schedule. Those days are
// at least two days old, past the give-up time of their own runs, so a day with no bill
// is reconciled as having none. It is best effort: a failure is logged, the day's own
// report stands, and the next day's run tries again.
func catchUp(ctx workflow.Context, appID, billDate string, st *StatementState) {
	logger := workflow.GetLogger(ctx)
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute, Summary: "find the days without a report",
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3, NonRetryableErrorTypes: []string{activities.ErrTypeInvalid}},
	})
	var res activities.StatementCatchUpResult
	if err := workflow.ExecuteActivity(actx, a.StatementCatchUp, activities.StatementCatchUpRequest{
		AppID: appID, BillDate: billDate, Lookback: StatementCatchUpDays,
	}).Get(ctx, &res); err != nil {
		logger.Warn("statement catch-up: could not list the days without a report", "app_id", appID, "err", err)
		return
	}
	for _, day := range res.Missing {
		st.Phase = "catching_up " + day
		req := activities.StatementRequest{AppID: appID, BillDate: day}
		err := workflow.ExecuteActivity(ctx, a.ReconcileStatement, req).Get(ctx, nil)
		var appErr *temporal.ApplicationError
		if err != nil && errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeBillNotAvailable {
			req.NoBill = true
			err = workflow.ExecuteActivity(ctx, a.ReconcileStatement, req).Get(ctx, nil)
		}
		if err != nil {
			logger.Warn("statement catch-up: a day was not reconciled", "app_id", appID, "bill_date", day, "err", err)
		}
	}
	st.Phase = "done"
}

// waitForBill sleeps d, or less if a retry signal arrives; signals sent meanwhile are
// one retry.
func waitForBill(ctx workflow.Context, d time.Duration, retryNow workflow.ReceiveChannel) {
	timerCtx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	timer := workflow.NewTimerWithOptions(timerCtx, d, workflow.TimerOptions{Summary: "wait for the bill"})
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(timer, func(workflow.Future) {})
	sel.AddReceive(retryNow, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
	sel.Select(ctx)
	for retryNow.ReceiveAsync(nil) {
	}
}

// statementDetails is the report as the Temporal UI shows it (markdown).
func statementDetails(r payment.StatementReport) string {
	return fmt.Sprintf("Bill of **%s**, app `%s`: %s.\n\n"+
		"| | payments | fen | refunds | fen |\n|---|---|---|---|---|\n"+
		"| Alipay | %d | %d | %d | %d |\n| local | %d | %d | %d | %d |\n\n"+
		"Difference (bill net − local net): **%d fen**. Discrepancies: **%d** %v.",
		r.BillDate, r.AppID, r.Status,
		r.BillTradeCount, r.BillTradeFen, r.BillRefundCount, r.BillRefundFen,
		r.LocalTradeCount, r.LocalTradeFen, r.LocalRefundCount, r.LocalRefundFen,
		r.DiffFen, r.Discrepancies, r.ByKind)
}
