// Package tracing sets up OpenTelemetry tracing for one paykit process, so that one
// payment can be followed as one trace: the merchant's checkout request, the Temporal
// update that starts the workflow, the workflow and each activity (through the Temporal
// SDK's OpenTelemetry interceptor), the MySQL and Redis calls, each Alipay call and the
// merchant webhook.
//
// Tracing is off unless an exporter is configured: spans go over OTLP/HTTP when
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, and to a
// file of JSON lines when Options.File is. The W3C trace context propagator is installed
// either way; it carries paykit's trace from the API through Temporal to the activities.
// The trace is paykit's own at both edges: a caller's traceparent is only a link of the
// API's span (package api), and nothing sent out of the process carries trace context.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// Options selects the exporters of one process.
type Options struct {
	// Service is the service.name of the process's spans (paykit-api, paykit-worker);
	// OTEL_SERVICE_NAME overrides it.
	Service string
	// OTLP exports over OTLP/HTTP to the endpoint of the standard OTEL_EXPORTER_OTLP_*
	// variables, which the exporter reads itself (with their headers and timeout).
	OTLP bool
	// File, if set, appends every span to this file as one JSON object per line (see
	// ReadFile), for `paykit dev` and `paykit trace`.
	File string
	// FileMaxBytes bounds File before it is rotated to File + ".1"; zero means
	// DefaultTraceFileMaxBytes.
	FileMaxBytes int64
}

// Tracing is a process's tracer provider. The zero value (and a Tracing set up with no
// exporter) is disabled: it instruments nothing and costs nothing.
type Tracing struct {
	tp *sdktrace.TracerProvider
}

// Setup installs the propagator and, if o names an exporter, a tracer provider as the
// process's global one. Shutdown flushes it.
func Setup(ctx context.Context, o Options) (*Tracing, error) {
	// Trace context only: a caller's baggage header is not carried into every workflow,
	// activity, Alipay call and merchant webhook.
	otel.SetTextMapPropagator(propagation.TraceContext{})
	if !o.OTLP && o.File == "" {
		return &Tracing{}, nil
	}
	res, err := resource.Merge(
		resource.NewSchemaless(attribute.String("service.name", o.Service)),
		resource.Environment(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if o.OTLP {
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("tracing: otlp exporter: %w", err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	if o.File != "" {
		exp, err := newFileExporter(o.File, o.FileMaxBytes)
		if err != nil {
			return nil, err
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	otel.SetTracerProvider(tp)
	return &Tracing{tp: tp}, nil
}

// Enabled reports whether spans are exported.
func (t *Tracing) Enabled() bool { return t != nil && t.tp != nil }

// Shutdown exports the spans still buffered and stops the exporters.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// Transport returns base (nil meaning http.DefaultTransport) with a client span per
// request named after what it reaches ("webhook POST"), or base itself when disabled.
// The requests carry no trace context (traceparent, tracestate, baggage): paykit's trace
// ids are not a merchant's to see, and a sweep delivering to several tenants would hand
// each the same one.
func (t *Tracing) Transport(what string, base http.RoundTripper) http.RoundTripper {
	if !t.Enabled() {
		return base
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return otelhttp.NewTransport(base,
		otelhttp.WithPropagators(propagation.NewCompositeTextMapPropagator()),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			return what + " " + r.Method
		}))
}

// TemporalInterceptor returns the Temporal SDK's tracing interceptor, or nil when
// disabled. Set on the client, it also applies to the workers made from it.
func (t *Tracing) TemporalInterceptor() (interceptor.Interceptor, error) {
	if !t.Enabled() {
		return nil, nil
	}
	return temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{Tracer: t.tp.Tracer("paykit/temporal"), DisableBaggage: true})
}

// LogHandler adds the trace_id and span_id of the record's context, when it carries a
// valid span, to every record h handles.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{h.Handler.WithAttrs(as)}
}

func (h logHandler) WithGroup(name string) slog.Handler { return logHandler{h.Handler.WithGroup(name)} }
