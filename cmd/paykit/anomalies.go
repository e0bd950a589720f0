package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/orchestrator"
	"github.com/paykit/paykit/payment"
)

// anomalyLister is what the anomalies command reads from; *mysql.Store implements it.
type anomalyLister interface {
	ListAnomalies(ctx context.Context, since time.Time, limit int) ([]payment.Anomaly, error)
}

// runAnomalies prints the anomalies an operator must resolve: money Alipay reports for
// a payment that is closed locally, or a paid amount that differs.
func runAnomalies(ctx context.Context, cfg config.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("anomalies", flag.ContinueOnError)
	since := fs.Duration("since", 7*24*time.Hour, "show anomalies recorded within this long")
	limit := fs.Int("limit", 100, "show at most this many (at most 1000)")
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	resolve := fs.String("resolve-refund", "", "refund the money of this payment's paid_after_close anomaly (payment_no); repeating it refunds nothing more")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *resolve != "" {
		return resolveByRefund(ctx, cfg, *resolve, out)
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

// anomalyRefunder is what resolving an anomaly by refund needs: *mysql.Store reads and
// reserves, the orchestrator starts the refund's workflow.
type anomalyRefunder interface {
	GetAnomaly(ctx context.Context, kind, paymentNo string) (payment.Anomaly, error)
	GetPayment(ctx context.Context, paymentNo string) (payment.Payment, error)
	CreateRefund(ctx context.Context, n payment.NewRefund) (payment.Refund, bool, error)
}

// refundStarter starts (or joins) a refund's workflow.
type refundStarter interface {
	StartRefund(ctx context.Context, r payment.Refund) error
}

func resolveByRefund(ctx context.Context, cfg config.Config, paymentNo string, out io.Writer) error {
	store, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = store.Close(); _ = store.DB().Close() }()
	tc, err := dialTemporal(ctx, cfg, slog.New(slog.DiscardHandler), newRegistry(), nil)
	if err != nil {
		return err
	}
	defer tc.Close()
	return refundAnomaly(ctx, store, orchestrator.New(tc, cfg.TaskQueue, cfg.Timing), paymentNo, out)
}

// refundAnomaly refunds the money Alipay took for a payment closed locally, through the
// refund workflow. Its refund_no is derived from the payment, so running it any number of
// times makes one refund, and a run after a failed start starts that same refund again.
func refundAnomaly(ctx context.Context, st anomalyRefunder, starter refundStarter, paymentNo string, out io.Writer) error {
	a, err := st.GetAnomaly(ctx, payment.AnomalyPaidAfterClose, paymentNo)
	if err != nil {
		return fmt.Errorf("anomalies: no %s anomaly for payment %s: %w", payment.AnomalyPaidAfterClose, paymentNo, err)
	}
	p, err := st.GetPayment(ctx, paymentNo)
	if err != nil {
		return fmt.Errorf("anomalies: %w", err)
	}
	r, existed, err := st.CreateRefund(ctx, payment.AnomalyRefund(p, a))
	if err != nil {
		return fmt.Errorf("anomalies: refund %s: %w", paymentNo, err)
	}
	if err := starter.StartRefund(ctx, r); err != nil {
		return fmt.Errorf("anomalies: refund %s recorded but not started (run the command again): %w", r.RefundNo, err)
	}
	verb := "started"
	if existed {
		verb = "already requested"
	}
	_, err = fmt.Fprintf(out, "refund %s of %s CNY for payment %s %s: %s (workflow %s)\n",
		r.RefundNo, r.Amount.Yuan(), p.PaymentNo, verb, r.Status, payment.RefundWorkflowID(r.TenantID, r.RefundNo))
	return err
}
