package paykit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Options configures a Client. The zero value is usable.
type Options struct {
	// HTTPClient makes the calls; nil means an http.Client with a 30 s timeout.
	HTTPClient HttpRequestDoer
	// MaxAttempts bounds the tries of one logical request, the first included: 0 means 4,
	// 1 means no retry.
	MaxAttempts int
	// Backoff is the wait before the first retry, doubled before each next one (capped
	// at 5 s); a Retry-After the answer gives is waited instead when it is longer. Zero
	// means 250 ms.
	Backoff time.Duration
	// NewKey makes the Idempotency-Key of a logical request that was not given one; nil
	// means 32 random hex characters after "pk_".
	NewKey func() string
}

// Client calls paykit's merchant API. Every request that creates or changes something
// carries an Idempotency-Key, one per logical request and the same on each of its
// retries; retries are made on what can pass later (a lost connection, 429, 502-504,
// 409 in_flight and payment_finishing), honouring Retry-After. An answer of 400 or above
// is returned as an *Error holding the problem+json body.
type Client struct {
	raw         *ClientWithResponses
	maxAttempts int
	backoff     time.Duration
	newKey      func() string
}

// New returns a Client of the paykit API at baseURL (for example
// "https://pay.example.com") that authenticates with the tenant's API key.
func New(baseURL, apiKey string, o Options) (*Client, error) {
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 4
	}
	if o.Backoff <= 0 {
		o.Backoff = 250 * time.Millisecond
	}
	if o.NewKey == nil {
		o.NewKey = randomKey
	}
	auth := func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+apiKey)
		return nil
	}
	raw, err := NewClientWithResponses(strings.TrimSuffix(baseURL, "/"), WithHTTPClient(o.HTTPClient), WithRequestEditorFn(auth))
	if err != nil {
		return nil, fmt.Errorf("paykit: %w", err)
	}
	return &Client{raw: raw, maxAttempts: o.MaxAttempts, backoff: o.Backoff, newKey: o.NewKey}, nil
}

// Raw is the generated client (authenticated, without retries or typed errors), for the
// calls the Client does not wrap.
func (c *Client) Raw() *ClientWithResponses { return c.raw }

func randomKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "pk_" + hex.EncodeToString(b)
}

// Error is an answer of status 400 or above: paykit's problem+json body, decoded.
type Error struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Problem is the decoded body; its Code is empty when the body was not a problem
	// (a proxy's error page, say).
	Problem Problem
	// RetryAfter is the answer's Retry-After, zero without one.
	RetryAfter time.Duration
	// Body is the answer's body as received.
	Body []byte
}

// Error says the status, the code and the detail.
func (e *Error) Error() string {
	msg := fmt.Sprintf("paykit: HTTP %d", e.StatusCode)
	if e.Problem.Code != "" {
		msg += " " + string(e.Problem.Code)
	}
	if e.Problem.Detail != nil && *e.Problem.Detail != "" {
		msg += ": " + *e.Problem.Detail
	} else if e.Problem.Title != "" {
		msg += ": " + e.Problem.Title
	}
	return msg
}

// ErrorCode is the problem code of err if it is (or wraps) an *Error, else "".
func ErrorCode(err error) ProblemCode {
	var e *Error
	if errors.As(err, &e) {
		return e.Problem.Code
	}
	return ""
}

// temporary reports whether the same request may pass if sent again later.
func (e *Error) temporary() bool {
	switch e.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case http.StatusConflict:
		return e.Problem.Code == ProblemCodeInFlight || e.Problem.Code == ProblemCodePaymentFinishing
	}
	return false
}

func newError(status int, header http.Header, body []byte) *Error {
	e := &Error{StatusCode: status, Body: body}
	_ = json.Unmarshal(body, &e.Problem) // a body that is not a problem leaves Code empty
	if s, err := strconv.Atoi(header.Get("Retry-After")); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// answer is what every generated WithResponse call returns.
type answer interface {
	StatusCode() int
	GetBody() []byte
}

// send makes one logical request: call, retried while the failure is temporary. header
// is the answer's header (the generated client has read and closed its body).
func send[R answer](ctx context.Context, c *Client, call func(context.Context) (R, error), header func(R) http.Header) (R, error) {
	wait := c.backoff
	for attempt := 1; ; attempt++ {
		r, err := call(ctx)
		if err == nil && r.StatusCode() < 400 {
			return r, nil
		}
		retry := err != nil && ctx.Err() == nil // the answer was lost: only a retry with the same key can tell
		if err == nil {
			e := newError(r.StatusCode(), header(r), r.GetBody())
			err, retry = e, e.temporary()
			if e.RetryAfter > wait {
				wait = e.RetryAfter
			}
		}
		if !retry || attempt >= c.maxAttempts {
			var zero R
			if _, ok := err.(*Error); !ok {
				err = fmt.Errorf("paykit: %w", err)
			}
			return zero, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			var zero R
			return zero, fmt.Errorf("paykit: %w (after %v)", ctx.Err(), err)
		case <-t.C:
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// CallOption sets something on one logical request.
type CallOption func(*call)

type call struct{ key string }

// WithIdempotencyKey sends key as the Idempotency-Key instead of a new random one: a
// merchant that stores its key with its order can repeat the request later, even from
// another process, and get the first answer again.
func WithIdempotencyKey(key string) CallOption { return func(c *call) { c.key = key } }

func (c *Client) options(opts []CallOption) call {
	var o call
	for _, f := range opts {
		f(&o)
	}
	if o.key == "" {
		o.key = c.newKey()
	}
	return o
}

// Result is the answer to a request that creates or changes something.
type Result[T any] struct {
	// Value is the answer's body.
	Value T
	// StatusCode is the HTTP status (a cancel answers 202 while Alipay has not confirmed).
	StatusCode int
	// Replayed is true when the answer is the stored answer to an earlier request with
	// the same Idempotency-Key (Idempotent-Replayed: true).
	Replayed bool
	// IdempotencyKey is the key the request was sent with.
	IdempotencyKey string
}

func replayed(resp *http.Response) bool { return resp.Header.Get("Idempotent-Replayed") == "true" }

// CreatePayment creates the pending payment of an order, or joins the one already being
// paid. A paid order answers an *Error with code order_already_paid and the paid payment
// in Problem.Payment (set Repurchase to charge it again).
func (c *Client) CreatePayment(ctx context.Context, req CreatePaymentRequest, opts ...CallOption) (Result[CheckoutResult], error) {
	o := c.options(opts)
	r, err := send(ctx, c, func(ctx context.Context) (*CreatePaymentResponse, error) {
		return c.raw.CreatePaymentWithResponse(ctx, &CreatePaymentParams{IdempotencyKey: &o.key}, req)
	}, func(r *CreatePaymentResponse) http.Header { return r.HTTPResponse.Header })
	if err != nil {
		return Result[CheckoutResult]{IdempotencyKey: o.key}, err
	}
	if r.JSON201 == nil {
		return Result[CheckoutResult]{IdempotencyKey: o.key}, unexpected(r.HTTPResponse)
	}
	return Result[CheckoutResult]{Value: *r.JSON201, StatusCode: r.StatusCode(), Replayed: replayed(r.HTTPResponse), IdempotencyKey: o.key}, nil
}

// GetPayment reads a payment.
func (c *Client) GetPayment(ctx context.Context, paymentNo string) (Payment, error) {
	r, err := send(ctx, c, func(ctx context.Context) (*GetPaymentResponse, error) {
		return c.raw.GetPaymentWithResponse(ctx, paymentNo)
	}, func(r *GetPaymentResponse) http.Header { return r.HTTPResponse.Header })
	if err != nil {
		return Payment{}, err
	}
	if r.JSON200 == nil {
		return Payment{}, unexpected(r.HTTPResponse)
	}
	return *r.JSON200, nil
}

// CancelPayment cancels a pending payment. The answer is 200 with the payment CLOSED (or
// as it was, if it had already ended), or 202 with the payment still PENDING while Alipay
// has not confirmed the close (GetPayment shows the outcome). A payment Alipay says is
// paid answers an *Error with code order_already_paid.
func (c *Client) CancelPayment(ctx context.Context, paymentNo string, opts ...CallOption) (Result[Payment], error) {
	o := c.options(opts)
	r, err := send(ctx, c, func(ctx context.Context) (*CancelPaymentResponse, error) {
		return c.raw.CancelPaymentWithResponse(ctx, paymentNo, &CancelPaymentParams{IdempotencyKey: &o.key}, CancelPaymentJSONRequestBody{})
	}, func(r *CancelPaymentResponse) http.Header { return r.HTTPResponse.Header })
	if err != nil {
		return Result[Payment]{IdempotencyKey: o.key}, err
	}
	p := r.JSON200
	if p == nil {
		p = r.JSON202
	}
	if p == nil {
		return Result[Payment]{IdempotencyKey: o.key}, unexpected(r.HTTPResponse)
	}
	return Result[Payment]{Value: *p, StatusCode: r.StatusCode(), Replayed: replayed(r.HTTPResponse), IdempotencyKey: o.key}, nil
}

// CreateRefund refunds part or all of a PAID payment. Without req.RefundNo, paykit derives
// the refund's number from the Idempotency-Key, so a retry is never a second refund.
func (c *Client) CreateRefund(ctx context.Context, paymentNo string, req CreateRefundRequest, opts ...CallOption) (Result[Refund], error) {
	o := c.options(opts)
	r, err := send(ctx, c, func(ctx context.Context) (*CreateRefundResponse, error) {
		return c.raw.CreateRefundWithResponse(ctx, paymentNo, &CreateRefundParams{IdempotencyKey: &o.key}, req)
	}, func(r *CreateRefundResponse) http.Header { return r.HTTPResponse.Header })
	if err != nil {
		return Result[Refund]{IdempotencyKey: o.key}, err
	}
	rf := r.JSON201
	if rf == nil {
		rf = r.JSON200
	}
	if rf == nil {
		return Result[Refund]{IdempotencyKey: o.key}, unexpected(r.HTTPResponse)
	}
	return Result[Refund]{Value: *rf, StatusCode: r.StatusCode(), Replayed: replayed(r.HTTPResponse), IdempotencyKey: o.key}, nil
}

// GetRefund reads a refund.
func (c *Client) GetRefund(ctx context.Context, refundNo string) (Refund, error) {
	r, err := send(ctx, c, func(ctx context.Context) (*GetRefundResponse, error) {
		return c.raw.GetRefundWithResponse(ctx, refundNo)
	}, func(r *GetRefundResponse) http.Header { return r.HTTPResponse.Header })
	if err != nil {
		return Refund{}, err
	}
	if r.JSON200 == nil {
		return Refund{}, unexpected(r.HTTPResponse)
	}
	return *r.JSON200, nil
}

// Refunds lists every refund of a payment, oldest first, reading all the pages.
func (c *Client) Refunds(ctx context.Context, paymentNo string) ([]Refund, error) {
	var all []Refund
	params := &ListPaymentRefundsParams{}
	for {
		r, err := send(ctx, c, func(ctx context.Context) (*ListPaymentRefundsResponse, error) {
			return c.raw.ListPaymentRefundsWithResponse(ctx, paymentNo, params)
		}, func(r *ListPaymentRefundsResponse) http.Header { return r.HTTPResponse.Header })
		if err != nil {
			return all, err
		}
		if r.JSON200 == nil {
			return all, unexpected(r.HTTPResponse)
		}
		all = append(all, r.JSON200.Refunds...)
		if !r.JSON200.HasMore {
			return all, nil
		}
		after := r.JSON200.NextCursor
		params.After = &after
	}
}

// Feed reads the tenant's events feed page by page from a cursor. Keep Cursor after
// handling a page to resume from there later, in this process or another.
type Feed struct {
	c     *Client
	after string
	limit int
}

// Events returns the feed after cursor ("" for the start) with pages of up to limit
// events (0 for paykit's default of 50).
func (c *Client) Events(cursor string, limit int) *Feed {
	return &Feed{c: c, after: cursor, limit: limit}
}

// Cursor is where the next page starts.
func (f *Feed) Cursor() string { return f.after }

// CursorExpiredError is Next's error when the cursor is older than paykit's horizon:
// events after it were deleted past their retention (410 cursor_expired). The feed's
// cursor stays where it was; start a feed again from OldestCursor, knowing the events
// before it are gone, or from the start ("") to list every event still kept.
type CursorExpiredError struct {
	// OldestCursor is the oldest cursor still valid.
	OldestCursor string
	// Err is the answer.
	Err *Error
}

// Error says the cursor expired and where the feed can resume.
func (e *CursorExpiredError) Error() string {
	return fmt.Sprintf("%v (oldest cursor still valid: %q)", e.Err, e.OldestCursor)
}

// Unwrap returns the *Error of the answer.
func (e *CursorExpiredError) Unwrap() error { return e.Err }

// Next reads the page after the cursor and moves the cursor past it. more is true while
// further events are already waiting; once it is false, poll Next again later for new
// ones (an empty page leaves the cursor where it is). A cursor older than paykit's
// horizon is a *CursorExpiredError.
func (f *Feed) Next(ctx context.Context) (events []Event, more bool, err error) {
	params := &ListEventsParams{}
	if f.after != "" {
		after := f.after
		params.After = &after
	}
	if f.limit > 0 {
		limit := f.limit
		params.Limit = &limit
	}
	r, err := send(ctx, f.c, func(ctx context.Context) (*ListEventsResponse, error) {
		return f.c.raw.ListEventsWithResponse(ctx, params)
	}, func(r *ListEventsResponse) http.Header { return r.HTTPResponse.Header })
	var e *Error
	if errors.As(err, &e) && e.Problem.Code == ProblemCodeCursorExpired {
		expired := &CursorExpiredError{Err: e}
		if e.Problem.OldestCursor != nil {
			expired.OldestCursor = *e.Problem.OldestCursor
		}
		return nil, false, expired
	}
	if err != nil {
		return nil, false, err
	}
	if r.JSON200 == nil {
		return nil, false, unexpected(r.HTTPResponse)
	}
	if r.JSON200.NextCursor != "" {
		f.after = r.JSON200.NextCursor
	}
	return r.JSON200.Events, r.JSON200.HasMore, nil
}

// unexpected is a success answer the contract does not describe (not JSON, say).
func unexpected(resp *http.Response) error {
	return fmt.Errorf("paykit: unexpected answer HTTP %d (%s)", resp.StatusCode, resp.Header.Get("Content-Type"))
}
