package api_test

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/internal/tracing"
)

// callerTrace is the trace context a caller sends: its trace id, span id and flags.
const (
	callerTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpanID  = "00f067aa0ba902b7"
)

// TestCallersTraceparentIsOnlyALink: a caller's traceparent, a merchant's or one sent
// to the unauthenticated callback route, never becomes the parent of paykit's span. The
// server span is a new root, in a trace paykit chose and answers in X-Trace-Id, with a
// link to the caller's span; and a caller's sampled=00 does not switch sampling off.
func TestCallersTraceparentIsOnlyALink(t *testing.T) {
	withPropagator(t, propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	tests := []struct {
		name, path, body, contentType, flags, span string
		auth                                       bool
	}{
		{"merchant, sampled", "/v1/payments", `{"order_id":"o-trace","amount_fen":990,"subject":"Coffee"}`, "application/json", "01", "POST /v1/payments", true},
		{"merchant, not sampled", "/v1/payments", `{"order_id":"o-trace-2","amount_fen":990,"subject":"Coffee"}`, "application/json", "00", "POST /v1/payments", true},
		{"alipay callback route", "/callbacks/alipay", "notify_id=n1&sign=bad", "application/x-www-form-urlencoded", "01", "POST /callbacks/alipay", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
			srv, _, _ := newServerWith(t, serverOptions{cfg: api.Config{BodyLimit: "1K", TracerProvider: tp}})
			h := map[string]string{"Content-Type": tc.contentType,
				"Traceparent": "00-" + callerTraceID + "-" + callerSpanID + "-" + tc.flags, "Tracestate": "vendor=caller"}
			if tc.auth {
				h["Authorization"] = "Bearer " + key
			}
			resp, b := post(t, srv.URL+tc.path, tc.body, h)
			if resp.StatusCode >= 500 {
				t.Fatalf("HTTP %d %s", resp.StatusCode, b)
			}
			var span sdktrace.ReadOnlySpan
			for _, s := range rec.Ended() {
				if s.Name() == tc.span {
					span = s
				}
			}
			if span == nil {
				t.Fatalf("no %q span was recorded (the caller switched sampling off?)", tc.span)
			}
			sc := span.SpanContext()
			if sc.TraceID().String() == callerTraceID || span.Parent().IsValid() || !sc.IsSampled() {
				t.Fatalf("span in trace %s with parent %v, sampled %v; want a sampled root of paykit's own trace",
					sc.TraceID(), span.Parent(), sc.IsSampled())
			}
			if got := resp.Header.Get(api.HeaderTraceID); got != sc.TraceID().String() {
				t.Fatalf("X-Trace-Id %q, want the span's trace %s", got, sc.TraceID())
			}
			links := span.Links()
			if len(links) != 1 || links[0].SpanContext.TraceID().String() != callerTraceID ||
				links[0].SpanContext.SpanID().String() != callerSpanID || !links[0].SpanContext.IsRemote() {
				t.Fatalf("links %+v, want one to the caller's span", links)
			}
		})
	}
}

// TestTracingOffAnswersNoCallersTraceID: with tracing off a caller's traceparent is not
// answered as paykit's X-Trace-Id and does not become the trace of the request's log
// lines; the request's line notes it as caller_trace_id, for support to match.
func TestTracingOffAnswersNoCallersTraceID(t *testing.T) {
	withPropagator(t, propagation.TraceContext{})
	var logs logBuffer
	srv, _, _ := newServerWith(t, serverOptions{cfg: api.Config{BodyLimit: "1K", TracerProvider: noop.NewTracerProvider()},
		logger: slog.New(tracing.LogHandler(slog.NewTextHandler(&logs, nil)))})
	h := checkoutHeaders("trace-key-0001")
	h["Traceparent"] = "00-" + callerTraceID + "-" + callerSpanID + "-01"
	resp, b := post(t, srv.URL+"/v1/payments", `{"order_id":"o-trace","amount_fen":990,"subject":"Coffee"}`, h)
	if resp.StatusCode != http.StatusCreated || resp.Header.Get(api.HeaderTraceID) != "" {
		t.Fatalf("HTTP %d, X-Trace-Id %q: %s", resp.StatusCode, resp.Header.Get(api.HeaderTraceID), b)
	}
	if strings.Contains(logs.String(), " trace_id="+callerTraceID) || !strings.Contains(logs.String(), "caller_trace_id="+callerTraceID) {
		t.Fatalf("log:\n%s", logs.String())
	}
}

// withPropagator installs p as the process's propagator for the test, as tracing.Setup
// does in a paykit process, so that nothing depends on it being unset.
func withPropagator(tb testing.TB, p propagation.TextMapPropagator) {
	tb.Helper()
	old := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(p)
	tb.Cleanup(func() { otel.SetTextMapPropagator(old) })
}
