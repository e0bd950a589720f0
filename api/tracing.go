package api

import (
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

// traceRequests starts a server span per request, named after its route, as the child
// of the caller's W3C traceparent when it sends one (a merchant's checkout, say). The
// request's context carries the span, so the Temporal update, the MySQL and Redis calls
// and every log line of the request belong to the same trace. The trace id is returned
// in the X-Trace-Id response header, for a merchant or support to quote. With no
// tracer provider installed the spans are not recorded, but a caller's trace id still
// reaches the logs.
func (s *Server) traceRequests(next echo.HandlerFunc) echo.HandlerFunc {
	tracer := otel.Tracer("paykit/api")
	return func(c echo.Context) error {
		req := c.Request()
		route := c.Path()
		if route == "/healthz" {
			return next(c)
		}
		if route == "" {
			route = "unmatched"
		}
		ctx := otel.GetTextMapPropagator().Extract(req.Context(), propagation.HeaderCarrier(req.Header))
		ctx, span := tracer.Start(ctx, req.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", req.Method), attribute.String("http.route", route)))
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
