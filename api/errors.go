package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/paykit/paykit/checkout"
	"github.com/paykit/paykit/payment"
)

// statusByCode is the one table that maps domain error codes to HTTP status codes.
var statusByCode = map[string]int{
	payment.EINVALID:        http.StatusBadRequest,
	payment.EUNAUTHORIZED:   http.StatusUnauthorized,
	payment.ENOTFOUND:       http.StatusNotFound,
	payment.ECONFLICT:       http.StatusConflict,
	payment.EINFLIGHT:       http.StatusConflict,
	payment.ETOKENUSED:      http.StatusConflict,
	payment.EMISMATCH:       http.StatusUnprocessableEntity,
	payment.EUNPROCESSABLE:  http.StatusUnprocessableEntity,
	payment.EILLEGALSTATE:   http.StatusConflict,
	payment.ECHANNEL:        http.StatusUnprocessableEntity,
	payment.EORDERPAID:      http.StatusConflict,
	payment.EFINISHING:      http.StatusConflict,
	payment.ENOTPAID:        http.StatusConflict,
	payment.EREFUNDEXCEEDS:  http.StatusConflict,
	payment.ECURSOREXPIRED:  http.StatusGone,
	payment.EBADSIGNATURE:   http.StatusBadRequest,
	payment.EUNAVAILABLE:    http.StatusServiceUnavailable,
	payment.ETOOMANYRETRIES: http.StatusServiceUnavailable,
	payment.EINTERNAL:       http.StatusInternalServerError,

	payment.EUNSUPPORTEDMEDIA: http.StatusUnsupportedMediaType,
	payment.ERATELIMITED:      http.StatusTooManyRequests,
}

// Problem is an RFC 9457 problem details body.
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	Code      string `json:"code"`
	RequestID string `json:"request_id,omitempty"`
	// Payment is the existing payment, for conflicts where one exists.
	Payment any `json:"payment,omitempty"`
	// OldestCursor is the oldest cursor of the events feed still valid, for
	// cursor_expired.
	OldestCursor string `json:"oldest_cursor,omitempty"`
}

// problemError carries extra members for the problem body.
type problemError struct {
	err          error
	payment      any
	oldestCursor string
}

func (e *problemError) Error() string { return e.err.Error() }
func (e *problemError) Unwrap() error { return e.err }

func statusFor(err error) (int, string) {
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return he.Code, payment.ENOTFOUND
		case http.StatusRequestEntityTooLarge:
			return he.Code, payment.EINVALID
		case http.StatusMethodNotAllowed:
			return he.Code, payment.EINVALID
		case http.StatusUnsupportedMediaType:
			return he.Code, payment.EUNSUPPORTEDMEDIA
		case http.StatusServiceUnavailable:
			return he.Code, payment.EUNAVAILABLE
		}
		if he.Code >= 500 {
			return he.Code, payment.EINTERNAL
		}
		return he.Code, payment.EINVALID
	}
	code := payment.ErrorCode(err)
	if st, ok := statusByCode[code]; ok {
		return st, code
	}
	return http.StatusInternalServerError, payment.EINTERNAL
}

func problemFor(c echo.Context, err error) (int, Problem) {
	status, code := statusFor(err)
	p := Problem{
		Type:      "https://paykit.dev/problems/" + code,
		Title:     http.StatusText(status),
		Status:    status,
		Code:      code,
		RequestID: requestID(c),
	}
	var he *echo.HTTPError
	switch {
	case errors.As(err, &he):
		p.Detail = fmt.Sprint(he.Message)
	case status >= 500:
		p.Detail = payment.ErrorMessage(err)
		if code == payment.EINTERNAL {
			p.Detail = "internal error; quote the request id when reporting it"
		}
	default:
		p.Detail = payment.ErrorMessage(err)
	}
	var pe *problemError
	var ce *checkout.PaymentError
	switch {
	case errors.As(err, &pe):
		p.Payment, p.OldestCursor = pe.payment, pe.oldestCursor
	case errors.As(err, &ce):
		p.Payment = ce.Payment
	}
	return status, p
}

// handleError writes every error as application/problem+json. Only 5xx errors are logged
// with their cause; clients get a short message.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, p := problemFor(c, err)
	if status >= 500 {
		s.log.ErrorContext(c.Request().Context(), "request failed", "request_id", p.RequestID,
			"method", c.Request().Method, "path", c.Path(), "status", status, "err", err)
	}
	body, _ := json.Marshal(p)
	c.Response().Header().Set(echo.HeaderContentType, "application/problem+json")
	c.Response().WriteHeader(status)
	_, _ = c.Response().Write(body)
}

func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				s.log.ErrorContext(c.Request().Context(), "panic in handler", "request_id", requestID(c),
					"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				err = &payment.Error{Code: payment.EINTERNAL, Message: "internal error", Err: fmt.Errorf("panic: %v", r)}
			}
		}()
		return next(c)
	}
}

func (s *Server) accessLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		status := c.Response().Status
		if err != nil {
			status, _ = statusFor(err)
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		elapsed := time.Since(start)
		s.metrics.observeHTTP(c.Request().Method, route, status, elapsed)
		if route != "/healthz" {
			attrs := []any{"request_id", requestID(c), "method", c.Request().Method,
				"route", route, "status", status, "duration_ms", elapsed.Milliseconds(), "tenant_id", tenantIDOf(c)}
			if id := callerTraceID(c); id != "" {
				attrs = append(attrs, "caller_trace_id", id)
			}
			s.log.InfoContext(c.Request().Context(), "http request", attrs...)
		}
		return err
	}
}
