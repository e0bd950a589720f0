package api

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// HeaderTraceID answers the trace id of a traced request.
const HeaderTraceID = "X-Trace-Id"

// callerTraceKey is the echo context key of the trace id of a caller's traceparent.
const callerTraceKey = "paykit.caller_trace_id"

// traceRequests starts a server span per request, named after its route, as the root of
// a trace of paykit's own. A caller's W3C traceparent (a merchant's, or anyone's on the
// unauthenticated callback route) is only a link of that span: were it the parent, any
// caller would choose the trace id of the payment's workflow, activities and webhooks,
// and its sampled flag would switch tracing off for them. The request's context carries
// the span, so the Temporal update, the MySQL and Redis calls and every log line of the
// request belong to the trace, whose id is answered in X-Trace-Id for a merchant or
// support to quote. With no tracer provider installed nothing is traced or answered; the
// request's log line still notes the caller's trace id (caller_trace_id).
func (s *Server) traceRequests(next echo.HandlerFunc) echo.HandlerFunc {
	tp := s.cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	tracer := tp.Tracer("paykit/api")
	return func(c echo.Context) error {
		req := c.Request()
		route := c.Path()
		if route == "/healthz" {
			return next(c)
		}
		if route == "" {
			route = "unmatched"
		}
		opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", req.Method), attribute.String("http.route", route))}
		// Only the traceparent and tracestate headers are read, whatever the process's
		// propagator: a caller's baggage is never taken in.
		caller := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(req.Header)))
		if caller.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: caller}))
			c.Set(callerTraceKey, caller.TraceID().String())
		}
		ctx, span := tracer.Start(req.Context(), req.Method+" "+route, opts...)
		defer span.End()
		c.SetRequest(req.WithContext(ctx))
		if sc := span.SpanContext(); sc.IsValid() {
			c.Response().Header().Set(HeaderTraceID, sc.TraceID().String())
		}
		err := next(c)
		status := c.Response().Status
		if err != nil {
			status, _ = statusFor(err)
		}
		span.SetAttributes(attribute.Int("http.response.status_code", status), attribute.String("paykit.request_id", requestID(c)))
		if id := tenantIDOf(c); id != "" {
			span.SetAttributes(attribute.String("paykit.tenant_id", id))
		}
		if status >= http.StatusInternalServerError {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
		return err
	}
}

// callerTraceID is the trace id of the caller's traceparent, or "".
func callerTraceID(c echo.Context) string {
	id, _ := c.Get(callerTraceKey).(string)
	return id
}
