package payment

import (
	"errors"
	"fmt"
)

// Error codes shared by every layer. The API maps them to HTTP status codes in one table.
const (
	ECONFLICT       = "conflict"        // the request clashes with current state (409)
	EINTERNAL       = "internal"        // a bug or an infrastructure failure (500)
	EINVALID        = "invalid"         // malformed input (400)
	EUNPROCESSABLE  = "unprocessable"   // well-formed but semantically refused (422)
	ENOTFOUND       = "not_found"       // no such resource, or not this tenant's (404)
	EUNAUTHORIZED   = "unauthorized"    // missing or wrong credentials (401)
	EUNAVAILABLE    = "unavailable"     // a dependency is down; retry later (503)
	EINFLIGHT       = "in_flight"       // the same idempotent request is still running (409)
	EMISMATCH       = "key_mismatch"    // an idempotency key reused with another payload (422)
	ETOKENUSED      = "token_used"      // a one-time checkout token was already used by another request (409)
	ECHANNEL        = "channel_refused" // Alipay refused the operation for business reasons
	EBADSIGNATURE   = "bad_signature"   // a signature did not verify
	EILLEGALSTATE   = "illegal_state"   // a state transition the state machine forbids
	ETOOMANYRETRIES = "retries_exhausted"
	EORDERPAID      = "order_already_paid" // the order has a PAID payment and the request did not opt in to re-purchase (409)
	EFINISHING      = "payment_finishing"  // the order's last payment just ended and its run is still wrapping up; retry shortly (409)
	ECURSOREXPIRED  = "cursor_expired"     // an events feed cursor older than the purge horizon: events after it were deleted (410)

	EUNSUPPORTEDMEDIA = "unsupported_media_type" // a request body not declared as JSON (415)
	ERATELIMITED      = "rate_limited"           // over a rate limit; retry after Retry-After (429)
)

// Error is a domain error: a machine-readable code plus a message safe to show a client.
type Error struct {
	Code    string
	Message string
	Err     error
}

// Error implements the error interface.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns a domain error with the given code and formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first domain error in err's chain, EINTERNAL for any
// other non-nil error, and "" for nil.
func ErrorCode(err error) string {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Code
	default:
		return EINTERNAL
	}
}

// ErrorMessage returns the client-safe message of a domain error, or a generic one.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// ErrNotFound is returned by stores when a row does not exist.
var ErrNotFound = &Error{Code: ENOTFOUND, Message: "not found"}
