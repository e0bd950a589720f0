package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/paykit/paykit/anomalies"
	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/internal/system"
)

// runAnomalies prints the anomalies an operator must resolve: money Alipay reports for
// a payment that is closed locally, or a paid amount that differs.
func runAnomalies(ctx context.Context, cfg config.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("anomalies", flag.ContinueOnError)
	since := fs.Duration("since", 7*24*time.Hour, "show anomalies recorded within this long")
	limit := fs.Int("limit", 100, "show at most this many (at most 1000)")
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	resolveRefund := fs.String("resolve-refund", "", "refund the money of this payment's paid_after_close anomaly (payment_no); repeating it refunds nothing more")
	resolve := fs.String("resolve", "", "mark the anomaly of this kind resolved (with -payment, -subject when it has one, and -note)")
	paymentNo := fs.String("payment", "", "with -resolve: the anomaly's payment_no")
	subject := fs.String("subject", "", "with -resolve: the anomaly's subject (empty for one about the payment as a whole)")
	note := fs.String("note", "", "with -resolve: how it was resolved (required; kept with the anomaly)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *resolveRefund != "" && *resolve != "" {
		return fmt.Errorf("anomalies: -resolve-refund and -resolve are two commands; run one at a time")
	}
	if *resolveRefund != "" {
		return resolveByRefund(ctx, cfg, *resolveRefund, out)
	}
	if *resolve != "" {
		if *paymentNo == "" || strings.TrimSpace(*note) == "" {
			return fmt.Errorf("anomalies: -resolve needs -payment and -note")
		}
		store, err := system.OpenStore(ctx, cfg)
		if err != nil {
			return err
		}
		defer system.CloseStore(store)
		return anomalies.Resolve(ctx, out, store, *resolve, *paymentNo, *subject, *note)
	}
	if *since <= 0 || *limit <= 0 {
		return fmt.Errorf("anomalies: -since and -limit must be positive")
	}
	store, err := system.OpenStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer system.CloseStore(store)
	return anomalies.Print(ctx, out, store, time.Now().Add(-*since), *limit, *asJSON)
}

func resolveByRefund(ctx context.Context, cfg config.Config, paymentNo string, out io.Writer) error {
	store, err := system.OpenStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer system.CloseStore(store)
	orch, closeTemporal, err := system.DialOrchestrator(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer closeTemporal()
	return anomalies.RefundPaidAfterClose(ctx, out, store, orch, paymentNo)
}
