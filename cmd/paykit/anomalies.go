package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
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
