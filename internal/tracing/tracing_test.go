package tracing

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TestSpanFileRoundTrip writes a checkout's spans (and an unrelated trace) through the
// file exporter and finds the payment's trace again by its workflow id, printed as a
// tree in which each span sits under its parent and an error is shown.
func TestSpanFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "traces.jsonl")
	exp, err := newFileExporter(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tr := tp.Tracer("test")
	ctx, root := tr.Start(context.Background(), "POST /v1/payments")
	wctx, wf := tr.Start(ctx, "RunWorkflow:PaymentWorkflow", trace.WithAttributes(attribute.String(workflowIDKey, "payment:t1:o1")))
	_, call := tr.Start(wctx, "alipay.trade.precreate")
	call.SetStatus(codes.Error, "ACQ.SYSTEM_ERROR")
	call.End()
	wf.End()
	root.End()
	_, other := tr.Start(context.Background(), "GET /healthz")
	other.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A line cut short by a crash is skipped, not fatal.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	_, _ = f.WriteString(`{"trace_id":"ab`)
	f.Close()

	f, err = os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	spans, err := ReadSpans(f)
	if err != nil || len(spans) != 4 {
		t.Fatalf("ReadSpans = %d spans, %v; want 4", len(spans), err)
	}
	ids := TracesOf(spans, "payment:t1:o1")
	if len(ids) != 1 || ids[0] != root.SpanContext().TraceID().String() {
		t.Fatalf("TracesOf = %v, want the checkout's trace %s", ids, root.SpanContext().TraceID())
	}
	if got := TracesOf(spans, "payment:t1:other"); len(got) != 0 {
		t.Fatalf("TracesOf(another payment) = %v", got)
	}
	var out bytes.Buffer
	WriteTree(&out, spans, ids[0])
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("tree:\n%s", out.String())
	}
	for i, want := range []string{"  POST /v1/payments", "    RunWorkflow:PaymentWorkflow", "      alipay.trade.precreate"} {
		if !strings.HasPrefix(lines[i+1], want+"  ") {
			t.Errorf("tree line %d = %q, want prefix %q", i+1, lines[i+1], want)
		}
	}
	if !strings.Contains(lines[3], "ERROR: ACQ.SYSTEM_ERROR") || strings.Contains(out.String(), "healthz") {
		t.Errorf("tree:\n%s", out.String())
	}
}

// TestLogHandlerAddsTheTraceOfTheContext: a record logged with a traced context carries
// its trace and span ids; one without, none.
func TestLogHandlerAddsTheTraceOfTheContext(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "x")
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "op")
	defer span.End()
	log.InfoContext(ctx, "traced")
	log.InfoContext(context.Background(), "untraced")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	sc := span.SpanContext()
	if !strings.Contains(lines[0], `"trace_id":"`+sc.TraceID().String()+`"`) || !strings.Contains(lines[0], `"span_id":"`+sc.SpanID().String()+`"`) ||
		!strings.Contains(lines[0], `"component":"x"`) {
		t.Errorf("traced line: %s", lines[0])
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("untraced line: %s", lines[1])
	}
}

// TestDisabledInstrumentsNothing: with no exporter, Setup installs no provider and the
// helpers hand back what they were given.
func TestDisabledInstrumentsNothing(t *testing.T) {
	tr, err := Setup(context.Background(), Options{Service: "x"})
	if err != nil || tr.Enabled() {
		t.Fatalf("Setup with no exporter: enabled=%v err=%v", tr.Enabled(), err)
	}
	if rt := tr.Transport("webhook", nil); rt != nil {
		t.Errorf("Transport = %T, want the base (nil)", rt)
	}
	if ti, err := tr.TemporalInterceptor(); ti != nil || err != nil {
		t.Errorf("TemporalInterceptor = %v, %v", ti, err)
	}
	var nilTracing *Tracing
	if nilTracing.Enabled() || nilTracing.Shutdown(context.Background()) != nil {
		t.Error("a nil Tracing must be disabled")
	}
}

// TestTransportSendsNoTraceContext: a webhook made in a traced activity, with the
// process's propagator carrying trace context and baggage, reaches the merchant with no
// traceparent, tracestate or baggage header. Paykit's trace ids stay paykit's: a sweep
// delivering to several tenants would otherwise hand each the same trace id.
func TestTransportSendsNoTraceContext(t *testing.T) {
	old := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	t.Cleanup(func() { otel.SetTextMapPropagator(old) })
	got := make(chan http.Header, 1)
	merchant := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	defer merchant.Close()
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	tr := &Tracing{tp: tp}
	ctx, span := tp.Tracer("test").Start(context.Background(), "RunActivity:SweepOutbox")
	defer span.End()
	m, _ := baggage.NewMember("tenant_id", "t1")
	b, _ := baggage.New(m)
	ctx = baggage.ContextWithBaggage(ctx, b)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, merchant.URL, strings.NewReader(`{}`))
	resp, err := (&http.Client{Transport: tr.Transport("webhook", nil)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h := <-got
	for _, name := range []string{"Traceparent", "Tracestate", "Baggage"} {
		if v := h.Values(name); len(v) > 0 {
			t.Errorf("the webhook carried %s: %q", name, v)
		}
	}
}

// The span file stays bounded: past its bound it is rotated to path.1 by the process
// whose write finds it so, and another process writing to the same path follows the
// new file instead of growing the rotated one.
func TestSpanFileIsRotated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "traces.jsonl")
	const bound = 4 << 10
	var tps []*sdktrace.TracerProvider
	for range 2 {
		exp, err := newFileExporter(path, bound)
		if err != nil {
			t.Fatal(err)
		}
		tps = append(tps, sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	}
	for i := range 400 {
		_, s := tps[i%2].Tracer("test").Start(context.Background(), "POST /v1/payments")
		s.End()
	}
	for _, tp := range tps {
		if err := tp.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	cur, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	old, err := os.Stat(path + ".1")
	if err != nil {
		t.Fatalf("no rotated file after %d spans: %v", 400, err)
	}
	// One batch of one span may land past the bound before the next write rotates.
	if cur.Size() > bound+1024 || old.Size() > bound+1024 {
		t.Fatalf("span files of %d and %d bytes, want each near the %d-byte bound", cur.Size(), old.Size(), bound)
	}
}
