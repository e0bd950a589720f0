package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paykit/paykit/internal/config"
)

// TestTracePrintsAPaymentsTraces: `paykit trace -tenant -order` finds the payment's
// traces in the span file and prints each as a tree; a payment with no span is an error
// naming it, and missing flags are refused.
func TestTracePrintsAPaymentsTraces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "traces.jsonl")
	lines := `{"trace_id":"t1","span_id":"a","service":"paykit-api","name":"POST /v1/payments","start":"2026-12-01T00:00:00Z","end":"2026-12-01T00:00:00.2Z"}
{"trace_id":"t1","span_id":"b","parent_span_id":"a","service":"paykit-worker","name":"RunWorkflow:PaymentWorkflow","start":"2026-12-01T00:00:00.1Z","end":"2026-12-01T00:00:01Z","attrs":{"temporalWorkflowID":"payment:demo:1001"}}
{"trace_id":"t2","span_id":"c","service":"paykit-api","name":"POST /callbacks/alipay","start":"2026-12-01T00:00:02Z","end":"2026-12-01T00:00:02.01Z"}
`
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runTrace(config.Config{TraceFile: path}, []string{"-tenant", "demo", "-order", "1001"}, &out); err != nil {
		t.Fatal(err)
	}
	want := "trace t1\n  POST /v1/payments  [paykit-api] +0s 200ms\n    RunWorkflow:PaymentWorkflow  [paykit-worker] +100ms 900ms\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	if err := runTrace(config.Config{TraceFile: path}, []string{"-trace", "t2"}, &out); err != nil || !strings.Contains(out.String(), "POST /callbacks/alipay") {
		t.Errorf("-trace t2: %v\n%s", err, out.String())
	}
	if err := runTrace(config.Config{TraceFile: path}, []string{"-tenant", "demo", "-order", "9"}, &out); err == nil || !strings.Contains(err.Error(), "payment:demo:9") {
		t.Errorf("unknown payment: %v", err)
	}
	if err := runTrace(config.Config{}, []string{"-tenant", "demo", "-order", "1001"}, &out); err == nil {
		t.Error("no span file: want an error")
	}
}
