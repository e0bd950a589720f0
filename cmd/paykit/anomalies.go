package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/paykit/paykit/payment"
)

// anomalyLister is what the anomalies command reads from; *mysql.Store implements it.
type anomalyLister interface {
	ListAnomalies(ctx context.Context, since time.Time, limit int) ([]payment.Anomaly, error)
}

// runAnomalies prints the anomalies an operator must resolve: money Alipay reports for
// a payment that is closed locally, or a paid amount that differs.
func runAnomalies(ctx context.Context, cfg Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("anomalies", flag.ContinueOnError)
	since := fs.Duration("since", 7*24*time.Hour, "show anomalies recorded within this long")
	limit := fs.Int("limit", 100, "show at most this many (at most 1000)")
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *since <= 0 || *limit <= 0 {
		return fmt.Errorf("anomalies: -since and -limit must be positive")
	}
	store, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = store.Close(); _ = store.DB().Close() }()
	return printAnomalies(ctx, store, time.Now().Add(-*since), *limit, *asJSON, out)
}

func printAnomalies(ctx context.Context, l anomalyLister, since time.Time, limit int, asJSON bool, out io.Writer) error {
	as, err := l.ListAnomalies(ctx, since, limit)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(out)
		for _, a := range as {
			if err := enc.Encode(map[string]any{
				"kind": a.Kind, "tenant_id": a.TenantID, "payment_no": a.PaymentNo, "trade_no": a.TradeNo,
				"amount_fen": int64(a.Amount), "detail": a.Detail, "created_at": a.CreatedAt.UTC(),
			}); err != nil {
				return err
			}
		}
		return nil
	}
	if len(as) == 0 {
		_, err := fmt.Fprintf(out, "no anomalies since %s\n", since.UTC().Format(time.RFC3339))
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CREATED (UTC)\tKIND\tTENANT\tPAYMENT_NO\tTRADE_NO\tAMOUNT (CNY)\tDETAIL")
	for _, a := range as {
		detail := strings.Join(strings.Fields(a.Detail), " ")
		if r := []rune(detail); len(r) > 120 {
			detail = string(r[:117]) + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.CreatedAt.UTC().Format("2006-01-02 15:04:05"),
			a.Kind, a.TenantID, a.PaymentNo, a.TradeNo, a.Amount.Yuan(), detail)
	}
	return tw.Flush()
}
