package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/internal/tracing"
	"github.com/paykit/paykit/payment"
)

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
