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
	"github.com/paykit/paykit/internal/tracing"
	"github.com/paykit/paykit/payment"
)

// setupTracing starts the process's tracing from cfg (off unless an exporter is set).
func setupTracing(ctx context.Context, cfg config.Config, service string, logger *slog.Logger) (*tracing.Tracing, error) {
	tr, err := tracing.Setup(ctx, tracing.Options{Service: service, OTLP: cfg.TraceOTLP, File: cfg.TraceFile})
	if err != nil {
		return nil, err
	}
	if tr.Enabled() {
		logger.Info("tracing on", "service", service, "otlp", cfg.TraceOTLP, "file", cfg.TraceFile)
	}
	return tr, nil
}

// shutdownTracing exports the spans still buffered, for at most 5 s.
func shutdownTracing(tr *tracing.Tracing, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		logger.Warn("tracing: spans not exported at shutdown", "err", err)
	}
}

// runTrace prints the traces of one payment (by tenant and order, or by workflow id),
// or one trace by id, from a span file written with PAYKIT_TRACE_FILE.
func runTrace(cfg config.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("trace", flag.ContinueOnError)
	file := fs.String("file", cfg.TraceFile, "span file (PAYKIT_TRACE_FILE; paykit dev writes .dev/traces.jsonl)")
	tenant := fs.String("tenant", "", "tenant id of the payment")
	order := fs.String("order", "", "order id of the payment")
	workflowID := fs.String("workflow", "", "workflow id (payment:<tenant>:<order>), instead of -tenant and -order")
	traceID := fs.String("trace", "", "one trace id (the X-Trace-Id of a response, or a log line's trace_id)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *workflowID == "" && *tenant != "" && *order != "" {
		*workflowID = payment.WorkflowID(*tenant, *order)
	}
	if *file == "" || (*workflowID == "" && *traceID == "") {
		fs.Usage()
		return errors.New("trace: -file and either -trace or -tenant with -order (or -workflow) are required")
	}
	if err := tracing.PrintTraces(out, *file, *workflowID, *traceID); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	return nil
}
