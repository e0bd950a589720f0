package paykit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/paykit/paykit/clients/go/paykit"
)

// fakeAPI answers with the scripted handlers in turn and records each request's
// Idempotency-Key and Authorization.
type fakeAPI struct {
	mu      sync.Mutex
	answers []http.HandlerFunc
	keys    []string
	auths   []string
	queries []string
}

func newFake(tb testing.TB, answers ...http.HandlerFunc) (*fakeAPI, *paykit.Client) {
	tb.Helper()
	f := &fakeAPI{answers: answers}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.keys = append(f.keys, r.Header.Get("Idempotency-Key"))
		f.auths = append(f.auths, r.Header.Get("Authorization"))
		f.queries = append(f.queries, r.URL.RawQuery)
		n := len(f.keys)
		f.mu.Unlock()
		if n > len(f.answers) {
			http.Error(w, "unscripted request", http.StatusTeapot)
			return
		}
		f.answers[n-1](w, r)
	}))
	tb.Cleanup(srv.Close)
	c, err := paykit.New(srv.URL+"/", "sk_test", paykit.Options{Backoff: time.Millisecond})
	if err != nil {
		tb.Fatal(err)
	}
	return f, c
}

func problem(status int, code string, retryAfter int) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"type": "https://paykit.dev/problems/" + code,
			"title": code, "status": status, "code": code, "detail": "detail of " + code})
	}
}

func jsonAnswer(status int, v any, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
}

var checkout = map[string]any{"payment_no": "P1", "tenant_id": "t", "order_id": "o1", "status": "PENDING",
	"amount_fen": 100, "currency": "CNY", "subject": "s", "expire_at": "2026-12-04T18:00:00Z"}

func order() paykit.CreatePaymentRequest {
	return paykit.CreatePaymentRequest{OrderId: "o1", AmountFen: 100, Subject: "s"}
}

// One logical request keeps its Idempotency-Key over every retry, and the retries stop
// at the first answer that is not temporary.
func TestCreatePaymentRetriesWithTheSameKey(t *testing.T) {
	cases := []struct {
		name    string
		first   []http.HandlerFunc
		replay  bool
		options []paykit.CallOption
	}{
		{name: "503 then 201", first: []http.HandlerFunc{problem(503, "unavailable", 0)}},
		{name: "in_flight then replay", first: []http.HandlerFunc{problem(409, "in_flight", 0)}, replay: true},
		{name: "429, 502 and payment_finishing", first: []http.HandlerFunc{problem(429, "rate_limited", 0),
			func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "bad gateway", 502) }, problem(409, "payment_finishing", 0)}},
		{name: "a lost connection", first: []http.HandlerFunc{func(w http.ResponseWriter, _ *http.Request) {
			conn, _, _ := w.(http.Hijacker).Hijack()
			_ = conn.Close()
		}}},
		{name: "the caller's key", first: []http.HandlerFunc{problem(503, "unavailable", 0)},
			options: []paykit.CallOption{paykit.WithIdempotencyKey("order-o1-attempt")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			last := http.HandlerFunc(jsonAnswer(201, checkout))
			if tc.replay {
				last = jsonAnswer(201, checkout, "Idempotent-Replayed", "true")
			}
			f, c := newFake(t, append(tc.first, last)...)
			res, err := c.CreatePayment(context.Background(), order(), tc.options...)
			if err != nil {
				t.Fatal(err)
			}
			if res.Value.PaymentNo != "P1" || res.StatusCode != 201 || res.Replayed != tc.replay {
				t.Fatalf("result %+v", res)
			}
			if len(f.keys) != len(tc.first)+1 {
				t.Fatalf("%d requests, want %d", len(f.keys), len(tc.first)+1)
			}
			for i, k := range f.keys {
				if k != res.IdempotencyKey || len(k) < 8 {
					t.Fatalf("request %d sent key %q, the result says %q", i, k, res.IdempotencyKey)
				}
				if f.auths[i] != "Bearer sk_test" {
					t.Fatalf("request %d: Authorization %q", i, f.auths[i])
				}
			}
			if len(tc.options) > 0 && res.IdempotencyKey != "order-o1-attempt" {
				t.Fatalf("key %q, want the caller's", res.IdempotencyKey)
			}
		})
	}
}

// Two logical requests get two keys.
func TestEachLogicalRequestHasItsOwnKey(t *testing.T) {
	f, c := newFake(t, jsonAnswer(201, checkout), jsonAnswer(201, checkout))
	for range 2 {
		if _, err := c.CreatePayment(context.Background(), order()); err != nil {
			t.Fatal(err)
		}
	}
	if f.keys[0] == f.keys[1] {
		t.Fatalf("both requests sent key %q", f.keys[0])
	}
}

// An answer that will not change on a retry is returned at once as an *Error with the
// problem decoded; a temporary one is returned so once the attempts are spent.
func TestProblemsAreTypedErrors(t *testing.T) {
	paid := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(409)
		p := map[string]any{"payment_no": "P0", "tenant_id": "t", "order_id": "o1", "amount_fen": 100, "refunded_fen": 0,
			"currency": "CNY", "subject": "s", "status": "PAID", "expire_at": "2026-12-04T18:00:00Z", "version": 3,
			"workflow_id": "payment:t:o1", "created_at": "2026-12-04T17:00:00Z", "updated_at": "2026-12-04T17:01:00Z"}
		_ = json.NewEncoder(w).Encode(map[string]any{"type": "https://paykit.dev/problems/order_already_paid",
			"title": "order already paid", "status": 409, "code": "order_already_paid", "payment": p})
	}
	cases := []struct {
		name       string
		answers    []http.HandlerFunc
		status     int
		code       paykit.ProblemCode
		requests   int
		retryAfter time.Duration
	}{
		{"key_mismatch", []http.HandlerFunc{problem(422, "key_mismatch", 0)}, 422, paykit.ProblemCodeKeyMismatch, 1, 0},
		{"invalid", []http.HandlerFunc{problem(400, "invalid", 0)}, 400, paykit.ProblemCodeInvalid, 1, 0},
		{"internal is not retried", []http.HandlerFunc{problem(500, "internal", 0)}, 500, paykit.ProblemCodeInternal, 1, 0},
		{"order_already_paid", []http.HandlerFunc{paid}, 409, paykit.ProblemCodeOrderAlreadyPaid, 1, 0},
		{"in_flight four times", []http.HandlerFunc{problem(409, "in_flight", 0), problem(409, "in_flight", 0),
			problem(409, "in_flight", 0), problem(409, "in_flight", 0)}, 409, paykit.ProblemCodeInFlight, 4, 0},
		{"not a problem", []http.HandlerFunc{func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", 404) }}, 404, "", 1, 0},
		{"rate limited with Retry-After", []http.HandlerFunc{problem(429, "rate_limited", 1), problem(429, "rate_limited", 1),
			problem(429, "rate_limited", 1), problem(429, "rate_limited", 1)}, 429, paykit.ProblemCodeRateLimited, 4, time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFake(t, tc.answers...)
			start := time.Now()
			_, err := c.CreatePayment(context.Background(), order())
			var e *paykit.Error
			if !errors.As(err, &e) || e.StatusCode != tc.status || e.Problem.Code != tc.code || paykit.ErrorCode(err) != tc.code {
				t.Fatalf("error %v (%#v), want HTTP %d %q", err, e, tc.status, tc.code)
			}
			if len(f.keys) != tc.requests {
				t.Fatalf("%d requests, want %d", len(f.keys), tc.requests)
			}
			if e.RetryAfter != tc.retryAfter || time.Since(start) < 3*tc.retryAfter {
				t.Fatalf("Retry-After %v after %v, want %v honoured", e.RetryAfter, time.Since(start), tc.retryAfter)
			}
			if tc.code == paykit.ProblemCodeOrderAlreadyPaid && (e.Problem.Payment == nil || e.Problem.Payment.PaymentNo != "P0") {
				t.Fatalf("order_already_paid without its payment: %+v", e.Problem)
			}
		})
	}
}

// A cancelled context stops the retries.
func TestContextStopsRetries(t *testing.T) {
	_, c := newFake(t, problem(503, "unavailable", 30), problem(503, "unavailable", 30))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.CreatePayment(ctx, order())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the context's", err)
	}
}

// The feed moves its cursor page by page, reports has_more, and stays put on an empty page.
func TestFeedPages(t *testing.T) {
	event := func(id string) map[string]any {
		return map[string]any{"event_id": id, "type": "payment.paid", "payment_no": "P1", "created_at": "2026-12-04T17:00:00Z",
			"payload": map[string]any{}, "delivery": map[string]any{"state": "delivered", "attempts": 1}, "cursor": "c" + id}
	}
	page := func(more bool, cursor string, ids ...string) http.HandlerFunc {
		evs := []any{}
		for _, id := range ids {
			evs = append(evs, event(id))
		}
		return jsonAnswer(200, map[string]any{"events": evs, "has_more": more, "next_cursor": cursor})
	}
	f, c := newFake(t, page(true, "c2", "1", "2"), page(false, "c3", "3"), page(false, "c3"))
	feed := c.Events("", 2)
	var got []string
	for i, wantMore := range []bool{true, false, false} {
		evs, more, err := feed.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if more != wantMore {
			t.Fatalf("page %d: more %v", i, more)
		}
		for _, e := range evs {
			got = append(got, e.EventId)
		}
	}
	if fmt.Sprint(got) != "[1 2 3]" || feed.Cursor() != "c3" {
		t.Fatalf("events %v, cursor %q", got, feed.Cursor())
	}
	if want := []string{"limit=2", "after=c2&limit=2", "after=c3&limit=2"}; fmt.Sprint(f.queries) != fmt.Sprint(want) {
		t.Fatalf("queries %q, want %q", f.queries, want)
	}
}

// Refunds reads every page.
func TestRefundsReadsEveryPage(t *testing.T) {
	refund := func(no string) map[string]any {
		return map[string]any{"refund_no": no, "tenant_id": "t", "payment_no": "P1", "out_request_no": no, "amount_fen": 10,
			"status": "SUCCEEDED", "workflow_id": "refund:" + no, "version": 2,
			"created_at": "2026-12-04T17:00:00Z", "updated_at": "2026-12-04T17:00:01Z"}
	}
	page := func(more bool, cursor string, nos ...string) http.HandlerFunc {
		rs := []any{}
		for _, no := range nos {
			rs = append(rs, refund(no))
		}
		return jsonAnswer(200, map[string]any{"payment_no": "P1", "amount_fen": 100, "refunded_fen": 30, "refund_state": "partial",
			"refunds": rs, "has_more": more, "next_cursor": cursor})
	}
	f, c := newFake(t, page(true, "r2", "r1", "r2"), page(false, "r3", "r3"))
	rs, err := c.Refunds(context.Background(), "P1")
	if err != nil || len(rs) != 3 || rs[2].RefundNo != "r3" {
		t.Fatalf("refunds %+v, %v", rs, err)
	}
	if fmt.Sprint(f.queries) != "[ after=r2]" {
		t.Fatalf("queries %q", f.queries)
	}
}

// A cursor older than paykit's purge horizon (events after it were deleted) is a
// *CursorExpiredError naming the oldest cursor still valid, still an *Error with code
// cursor_expired; it is not retried and the feed stays where it was.
func TestFeedCursorExpired(t *testing.T) {
	gone := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusGone)
		_ = json.NewEncoder(w).Encode(map[string]any{"type": "https://paykit.dev/problems/cursor_expired", "title": "Gone",
			"status": 410, "code": "cursor_expired", "detail": "events after cursor 2 were deleted", "oldest_cursor": "40"})
	}
	f, c := newFake(t, gone)
	feed := c.Events("2", 0)
	_, _, err := feed.Next(context.Background())
	var expired *paykit.CursorExpiredError
	if !errors.As(err, &expired) || expired.OldestCursor != "40" {
		t.Fatalf("error %v (%#v), want a *CursorExpiredError with the oldest cursor 40", err, expired)
	}
	var e *paykit.Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusGone || paykit.ErrorCode(err) != paykit.ProblemCodeCursorExpired {
		t.Fatalf("error %v, want it to be an *Error 410 cursor_expired too", err)
	}
	if len(f.keys) != 1 || feed.Cursor() != "2" {
		t.Fatalf("%d requests, cursor %q; want 1 request and the cursor left at 2", len(f.keys), feed.Cursor())
	}
}
