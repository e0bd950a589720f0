package api

import (
	"mime"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/paykit/paykit/payment"
)

// requireJSON refuses a request body under /v1 that is not declared as JSON with 415,
// before any handler reads it (and so before an Idempotency-Key records anything). A
// body sent as text/plain, as a form, or with no Content-Type at all is refused even if
// it happens to parse: what a client declares is what it meant to send, and a
// mislabelled body is a bug on its side that should surface at once. A request without
// a body (POST /v1/checkout-tokens may have none) needs no Content-Type.
func requireJSON(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch:
		default:
			return next(c)
		}
		if r.ContentLength == 0 {
			return next(c)
		}
		if !isJSONMediaType(r.Header.Get(echo.HeaderContentType)) {
			return payment.Errorf(payment.EUNSUPPORTEDMEDIA,
				"the body must be sent with Content-Type: application/json")
		}
		return next(c)
	}
}

// isJSONMediaType accepts application/json and any application/*+json type, with no
// charset or charset=utf-8 (JSON is UTF-8, RFC 8259).
func isJSONMediaType(contentType string) bool {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	sub, ok := strings.CutPrefix(mt, "application/")
	if !ok || sub != "json" && !strings.HasSuffix(sub, "+json") {
		return false
	}
	cs, ok := params["charset"]
	return !ok || strings.EqualFold(cs, "utf-8")
}
