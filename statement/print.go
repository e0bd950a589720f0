package statement

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/paykit/paykit/payment"
)

// Exit codes of a statement's printing, which `paykit statement` exits with.
const (
	ExitClean         = 0 // reconciled, no discrepancy
	ExitDiscrepancies = 1 // at least one discrepancy
	ExitNoReport      = 2 // no report: not run, the bill is not available yet, or an error
)

// ReportReader reads what a reconciliation recorded; *mysql.Store implements it.
type ReportReader interface {
	GetStatementReport(ctx context.Context, appID, billDate string) (payment.StatementReport, error)
	ListStatementAnomalies(ctx context.Context, appID, billDate string) ([]payment.Anomaly, error)
}

// PrintOptions say how a report is printed.
type PrintOptions struct {
	JSON      bool // the report and its anomalies as one JSON object
	Anomalies bool // list the anomalies the day recorded (always in JSON)
}

// Print prints one app's report of the day and its anomalies, and returns the exit code.
func Print(ctx context.Context, out io.Writer, store ReportReader, appID, billDate string, o PrintOptions) (int, error) {
	rep, err := store.GetStatementReport(ctx, appID, billDate)
	if errors.Is(err, payment.ErrNotFound) {
		fmt.Fprintf(out, "no statement of %s for app %s yet (reconcile it with: paykit statement -date %s -app %s -run)\n", billDate, appID, billDate, appID)
		return ExitNoReport, nil
	}
	if err != nil {
		return ExitNoReport, err
	}
	var anomalies []payment.Anomaly
	if o.Anomalies || o.JSON {
		if anomalies, err = store.ListStatementAnomalies(ctx, appID, billDate); err != nil {
			return ExitNoReport, err
		}
	}
	code := ExitClean
	if rep.Discrepancies > 0 {
		code = ExitDiscrepancies
	}
	if o.JSON {
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
		rep.FinishedAt.In(China).Format("2006-01-02 15:04:05 China time"))
	fmt.Fprintln(tw, "\tPAYMENTS\tCNY\tREFUNDS\tCNY\tNET CNY")
	fmt.Fprintf(tw, "alipay bill\t%d\t%s\t%d\t%s\t%s\n", rep.BillTradeCount, yuan(rep.BillTradeFen), rep.BillRefundCount, yuan(rep.BillRefundFen), yuan(rep.BillNet()))
	fmt.Fprintf(tw, "local\t%d\t%s\t%d\t%s\t%s\n", rep.LocalTradeCount, yuan(rep.LocalTradeFen), rep.LocalRefundCount, yuan(rep.LocalRefundFen), yuan(rep.LocalNet()))
	fmt.Fprintf(tw, "difference\t\t\t\t\t%s\n", yuan(rep.DiffFen))
	if err := tw.Flush(); err != nil {
		return ExitNoReport, err
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
		fmt.Fprintln(tw, "KIND\tTENANT\tREF\tSUBJECT\tTRADE_NO\tAMOUNT (CNY)\tDETAIL")
		for _, a := range anomalies {
			detail := strings.TrimPrefix(a.Detail, "statement "+appID+" "+billDate+": ")
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Kind, a.TenantID, a.PaymentNo, dash(a.Subject), a.TradeNo, a.Amount.Yuan(), detail)
		}
		if err := tw.Flush(); err != nil {
			return ExitNoReport, err
		}
	}
	return code, nil
}

// dash is s, or "-" for an anomaly about the payment as a whole.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
