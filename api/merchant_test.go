package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/payment"
)

func (f *fakeStore) ListTenantEvents(_ context.Context, tenantID string, afterSeq int64, limit int) ([]payment.Event, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	var out []payment.Event
	for _, ev := range f.events {
		if ev.TenantID == tenantID && ev.Seq > afterSeq && len(out) < limit {
			out = append(out, ev)
		}
	}
	return out, f.err()
}

func (f *fakeStore) GetTenantEvent(_ context.Context, tenantID, eventID string) (payment.Event, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	for _, ev := range f.events {
		if ev.TenantID == tenantID && ev.EventID == eventID {
			return ev, nil
		}
	}
	return payment.Event{}, payment.ErrNotFound
}

func (f *fakeStore) FeedHorizon(_ context.Context, tenantID string) (int64, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if tenantID != "t1" {
		return 0, f.err()
	}
	return f.feedHorizon, f.err()
}

func do(t *testing.T, method, url, body string, h map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = fmt.Fprint(&b, readAll(resp))
	return resp, b.String()
}

func readAll(resp *http.Response) string {
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			return sb.String()
		}
	}
}

var authJSON = map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json"}

func statusPtr(s payment.Status) *payment.Status { return &s }

func TestCancelPayment(t *testing.T) {
	tests := []struct {
		name        string
		status      payment.Status  // of P1 before the cancel
		tenant      string          // of P1
		moveTo      *payment.Status // what the workflow makes of it
		wantHTTP    int
		wantCode    string
		wantStatus  string
		wantCancels int
	}{
		{name: "pending, closed at alipay", moveTo: statusPtr(payment.StatusClosed), wantHTTP: 200, wantStatus: "CLOSED", wantCancels: 1},
		{name: "pending, alipay says paid", moveTo: statusPtr(payment.StatusPaid), wantHTTP: 409, wantCode: payment.EORDERPAID, wantStatus: "PAID", wantCancels: 1},
		{name: "pending, alipay not confirmed yet", wantHTTP: 202, wantStatus: "PENDING", wantCancels: 1},
		{name: "already closed", status: payment.StatusClosed, wantHTTP: 200, wantStatus: "CLOSED"},
		{name: "already paid", status: payment.StatusPaid, wantHTTP: 409, wantCode: payment.EORDERPAID, wantStatus: "PAID"},
		{name: "another tenant's", tenant: "t2", wantHTTP: 404, wantCode: payment.ENOTFOUND},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, st, orch := newServerWith(t, serverOptions{cfg: api.Config{CancelWait: 300 * time.Millisecond}})
			p := st.ByNo["P1"]
			p.Status = tc.status
			if tc.tenant != "" {
				p.TenantID = tc.tenant
			}
			st.ByNo["P1"] = p
			orch.cancelStore, orch.cancelTo = st, tc.moveTo
			resp, body := do(t, http.MethodPost, srv.URL+"/v1/payments/P1/cancel", "", authJSON)
			var got struct {
				Code    string `json:"code"`
				Status  string `json:"status"`
				Payment struct {
					Status string `json:"status"`
				} `json:"payment"`
			}
			_ = json.Unmarshal([]byte(body), &got)
			status := got.Status
			if resp.StatusCode >= 400 {
				status = got.Payment.Status
			}
			if resp.StatusCode != tc.wantHTTP || got.Code != tc.wantCode || status != tc.wantStatus || orch.cancels != tc.wantCancels {
				t.Fatalf("HTTP %d %s (cancels %d); want %d %q %s and %d cancels", resp.StatusCode, body, orch.cancels,
					tc.wantHTTP, tc.wantCode, tc.wantStatus, tc.wantCancels)
			}
		})
	}
}

func TestCancelIsIdempotent(t *testing.T) {
	srv, st, orch := newServerWith(t, serverOptions{cfg: api.Config{CancelWait: 300 * time.Millisecond}})
	h := map[string]string{"Authorization": "Bearer " + key, "Idempotency-Key": "cancel-p1-0001"}
	// Alipay has not confirmed yet: 202, which is not kept, so the retry asks again.
	if resp, body := do(t, http.MethodPost, srv.URL+"/v1/payments/P1/cancel", "", h); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("first: HTTP %d %s", resp.StatusCode, body)
	}
	orch.cancelStore, orch.cancelTo = st, statusPtr(payment.StatusClosed)
	resp, first := do(t, http.MethodPost, srv.URL+"/v1/payments/P1/cancel", "", h)
	if resp.StatusCode != http.StatusOK || !strings.Contains(first, `"CLOSED"`) {
		t.Fatalf("retry: HTTP %d %s", resp.StatusCode, first)
	}
	resp, again := do(t, http.MethodPost, srv.URL+"/v1/payments/P1/cancel", "", h)
	if resp.StatusCode != http.StatusOK || again != first || resp.Header.Get(api.ReplayedHeader) != "true" || orch.cancels != 2 {
		t.Fatalf("replay: HTTP %d %s replayed=%q cancels=%d", resp.StatusCode, again, resp.Header.Get(api.ReplayedHeader), orch.cancels)
	}
	// A body other than {} is refused.
	if resp, body := do(t, http.MethodPost, srv.URL+"/v1/payments/P1/cancel", `{"reason":"x"}`, authJSON); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("body: HTTP %d %s", resp.StatusCode, body)
	}
}

func TestEventFeedPagesThroughTheTenantsOutbox(t *testing.T) {
	srv, st, _ := newServer(t)
	now := time.Now().UTC().Truncate(time.Second)
	st.events = []payment.Event{
		{Seq: 1, EventID: "evt_P1_paid", TenantID: "t1", PaymentNo: "P1", Type: payment.EventPaymentPaid, Payload: []byte(`{"event_id":"evt_P1_paid"}`),
			Delivered: true, Attempts: 1, CreatedAt: now, DeliveredAt: now},
		{Seq: 2, EventID: "evt_P9_paid", TenantID: "t2", PaymentNo: "P9", Type: payment.EventPaymentPaid, Payload: []byte(`{}`), CreatedAt: now},
		{Seq: 3, EventID: "evt_P2_closed", TenantID: "t1", PaymentNo: "P2", Type: payment.EventPaymentClosed, Payload: []byte(`{}`),
			Attempts: 2, LastError: "merchant answered HTTP 500", NextAttemptAt: now.Add(time.Minute), CreatedAt: now},
		{Seq: 4, EventID: "evt_P3_failed", TenantID: "t1", PaymentNo: "P3", Type: payment.EventPaymentFailed, Payload: []byte(`{}`),
			Attempts: 30, Dead: true, CreatedAt: now},
	}
	type feed struct {
		Events []struct {
			EventID  string `json:"event_id"`
			Delivery struct {
				State string `json:"state"`
			} `json:"delivery"`
		} `json:"events"`
		HasMore    bool   `json:"has_more"`
		NextCursor string `json:"next_cursor"`
	}
	get := func(query string) feed {
		t.Helper()
		resp, body := do(t, http.MethodGet, srv.URL+"/v1/events"+query, "", authJSON)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/events%s: HTTP %d %s", query, resp.StatusCode, body)
		}
		var f feed
		if err := json.Unmarshal([]byte(body), &f); err != nil {
			t.Fatal(err)
		}
		return f
	}
	p1 := get("?limit=2")
	if len(p1.Events) != 2 || !p1.HasMore || p1.Events[0].Delivery.State != "delivered" || p1.Events[1].Delivery.State != "pending" ||
		p1.Events[1].EventID != "evt_P2_closed" {
		t.Fatalf("page 1: %+v", p1)
	}
	p2 := get("?limit=2&after=" + p1.NextCursor)
	if len(p2.Events) != 1 || p2.HasMore || p2.Events[0].Delivery.State != "dead" {
		t.Fatalf("page 2: %+v", p2)
	}
	if p3 := get("?after=" + p2.NextCursor); len(p3.Events) != 0 || p3.NextCursor != p2.NextCursor {
		t.Fatalf("page 3 (nothing new): %+v", p3)
	}
	for _, q := range []string{"?limit=0", "?limit=101", "?after=x"} {
		if resp, body := do(t, http.MethodGet, srv.URL+"/v1/events"+q, "", authJSON); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET /v1/events%s: HTTP %d %s", q, resp.StatusCode, body)
		}
	}
}

// A cursor older than the purge horizon (events after it were deleted) answers 410
// cursor_expired naming the oldest cursor still valid, never a page that silently skips
// the deleted events; that cursor, and the start, still answer.
func TestEventFeedRefusesACursorPastThePurge(t *testing.T) {
	srv, st, _ := newServer(t)
	now := time.Now().UTC().Truncate(time.Second)
	// Events 1 to 4 were purged; 2 was dead and is kept.
	st.events = []payment.Event{
		{Seq: 2, EventID: "evt_P2_paid", TenantID: "t1", PaymentNo: "P2", Type: payment.EventPaymentPaid, Payload: []byte(`{}`), Dead: true, CreatedAt: now},
		{Seq: 5, EventID: "evt_P5_paid", TenantID: "t1", PaymentNo: "P5", Type: payment.EventPaymentPaid, Payload: []byte(`{}`), CreatedAt: now},
		{Seq: 6, EventID: "evt_P6_paid", TenantID: "t1", PaymentNo: "P6", Type: payment.EventPaymentPaid, Payload: []byte(`{}`), CreatedAt: now},
	}
	st.feedHorizon = 4
	for _, after := range []string{"1", "2", "3"} {
		resp, body := do(t, http.MethodGet, srv.URL+"/v1/events?after="+after, "", authJSON)
		var p struct {
			Code         string `json:"code"`
			Detail       string `json:"detail"`
			OldestCursor string `json:"oldest_cursor"`
		}
		_ = json.Unmarshal([]byte(body), &p)
		if resp.StatusCode != http.StatusGone || resp.Header.Get("Content-Type") != "application/problem+json" ||
			p.Code != payment.ECURSOREXPIRED || p.OldestCursor != "4" || !strings.Contains(p.Detail, "4") {
			t.Fatalf("after=%s: HTTP %d %s; want 410 cursor_expired with oldest_cursor 4", after, resp.StatusCode, body)
		}
	}
	for query, want := range map[string]string{"?after=4": "evt_P5_paid", "?after=5": "evt_P6_paid", "": "evt_P2_paid", "?after=0": "evt_P2_paid"} {
		resp, body := do(t, http.MethodGet, srv.URL+"/v1/events"+query, "", authJSON)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"event_id":"`+want+`"`) {
			t.Errorf("GET /v1/events%s: HTTP %d %s; want a page from %s", query, resp.StatusCode, body, want)
		}
	}
}

func TestRedeliverEvent(t *testing.T) {
	srv, st, orch := newServer(t)
	st.events = []payment.Event{
		{Seq: 1, EventID: "evt_P1_paid", TenantID: "t1", PaymentNo: "P1", Type: payment.EventPaymentPaid, Payload: []byte(`{}`)},
		{Seq: 2, EventID: "evt_P9_paid", TenantID: "t2", PaymentNo: "P9", Type: payment.EventPaymentPaid, Payload: []byte(`{}`)},
	}
	orch.redeliverResult = activities.RedeliverResult{Delivered: true, Event: payment.Event{Seq: 1, EventID: "evt_P1_paid",
		TenantID: "t1", PaymentNo: "P1", Type: payment.EventPaymentPaid, Payload: []byte(`{}`), Delivered: true, Attempts: 1}}
	resp, body := do(t, http.MethodPost, srv.URL+"/v1/events/evt_P1_paid/redeliver", "", authJSON)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"delivered":true`) || !strings.Contains(body, `"state":"delivered"`) {
		t.Fatalf("redeliver: HTTP %d %s", resp.StatusCode, body)
	}
	if resp, body := do(t, http.MethodPost, srv.URL+"/v1/events/evt_P9_paid/redeliver", "", authJSON); resp.StatusCode != http.StatusNotFound || orch.redeliveries != 1 {
		t.Fatalf("another tenant's event: HTTP %d %s, %d redeliveries", resp.StatusCode, body, orch.redeliveries)
	}
	orch.redeliverErr = payment.Errorf(payment.EINFLIGHT, "event evt_P1_paid is being delivered right now")
	resp, body = do(t, http.MethodPost, srv.URL+"/v1/events/evt_P1_paid/redeliver", "", authJSON)
	if resp.StatusCode != http.StatusConflict || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, `"in_flight"`) {
		t.Fatalf("busy: HTTP %d %s", resp.StatusCode, body)
	}
}

func TestHTTPConventions(t *testing.T) {
	srv, st, _ := newServer(t)
	st.orderPayments = []payment.Payment{
		{PaymentNo: "P3", TenantID: "t1", OrderID: "o1", Status: payment.StatusPending},
		{PaymentNo: "P2", TenantID: "t1", OrderID: "o1", Status: payment.StatusClosed},
		{PaymentNo: "P1", TenantID: "t1", OrderID: "o1", Status: payment.StatusClosed},
	}
	t.Run("wrong method on a known path is 405 with Allow", func(t *testing.T) {
		for _, tc := range []struct{ method, path, allow string }{
			{http.MethodGet, "/v1/payments", "POST"},
			{http.MethodDelete, "/v1/payments/P1", "GET"},
			{http.MethodGet, "/v1/payments/P1/cancel", "POST"},
			{http.MethodPut, "/v1/events", "GET"},
			{http.MethodGet, "/callbacks/alipay", "POST"},
		} {
			resp, body := do(t, tc.method, srv.URL+tc.path, "", authJSON)
			if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(resp.Header.Get("Allow"), tc.allow) ||
				resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("%s %s: HTTP %d Allow %q %s", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"), body)
			}
		}
	})
	t.Run("no-store on every answer", func(t *testing.T) {
		for _, tc := range []struct{ method, path string }{
			{http.MethodGet, "/v1/payments/P1"}, {http.MethodGet, "/v1/payments/nope-"}, {http.MethodGet, "/nowhere"},
			{http.MethodGet, "/v1/payments"}, {http.MethodGet, "/healthz"}, {http.MethodPost, "/callbacks/alipay"},
		} {
			if resp, _ := do(t, tc.method, srv.URL+tc.path, "", authJSON); resp.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("%s %s: HTTP %d Cache-Control %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Cache-Control"))
			}
		}
	})
	t.Run("order payments paginate", func(t *testing.T) {
		var page struct {
			Payments []struct {
				PaymentNo string `json:"payment_no"`
			} `json:"payments"`
			HasMore    bool   `json:"has_more"`
			NextCursor string `json:"next_cursor"`
		}
		_, body := do(t, http.MethodGet, srv.URL+"/v1/orders/o1/payments?limit=2", "", authJSON)
		_ = json.Unmarshal([]byte(body), &page)
		if len(page.Payments) != 2 || !page.HasMore || page.NextCursor != "P2" {
			t.Fatalf("page 1: %s", body)
		}
		_, body = do(t, http.MethodGet, srv.URL+"/v1/orders/o1/payments?limit=2&after=P2", "", authJSON)
		page.Payments = nil
		_ = json.Unmarshal([]byte(body), &page)
		if len(page.Payments) != 1 || page.Payments[0].PaymentNo != "P1" || page.HasMore {
			t.Fatalf("page 2: %s", body)
		}
		if resp, body := do(t, http.MethodGet, srv.URL+"/v1/orders/o1/payments?after=P9", "", authJSON); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("unknown cursor: HTTP %d %s", resp.StatusCode, body)
		}
	})
}
