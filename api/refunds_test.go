package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/paykit/paykit/payment"
)

func (f *fakeStore) CreateRefund(_ context.Context, n payment.NewRefund) (payment.Refund, bool, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if f.refunds == nil {
		f.refunds = map[string]payment.Refund{}
	}
	if r, ok := f.refunds[n.TenantID+"/"+n.RefundNo]; ok {
		return r, true, nil
	}
	p, ok := f.ByNo[n.PaymentNo]
	switch {
	case !ok || p.TenantID != n.TenantID:
		return payment.Refund{}, false, payment.Errorf(payment.ENOTFOUND, "no payment %s", n.PaymentNo)
	case p.Status != payment.StatusPaid && !(n.ForClosedPayment && p.Status == payment.StatusClosed):
		return payment.Refund{}, false, payment.Errorf(payment.ENOTPAID, "payment %s is %s", p.PaymentNo, p.Status)
	case p.Refunded+n.Amount > p.Amount:
		return payment.Refund{}, false, payment.Errorf(payment.EREFUNDEXCEEDS, "too much")
	}
	p.Refunded += n.Amount
	f.ByNo[n.PaymentNo] = p
	r := payment.Refund{RefundNo: n.RefundNo, TenantID: n.TenantID, PaymentNo: n.PaymentNo, Amount: n.Amount,
		OutRequestNo: payment.OutRequestNo(n.TenantID, n.RefundNo), WorkflowID: payment.RefundWorkflowID(n.TenantID, n.RefundNo)}
	f.refunds[n.TenantID+"/"+n.RefundNo] = r
	return r, false, nil
}

func (f *fakeStore) GetRefund(_ context.Context, tenantID, no string) (payment.Refund, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	r, ok := f.refunds[tenantID+"/"+no]
	if !ok {
		return r, payment.ErrNotFound
	}
	return r, nil
}

// ListPaymentRefunds lists a payment's refunds by refund_no (the fake keeps no times).
func (f *fakeStore) ListPaymentRefunds(_ context.Context, tenantID, paymentNo string) ([]payment.Refund, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	var rs []payment.Refund
	for _, r := range f.refunds {
		if r.TenantID == tenantID && r.PaymentNo == paymentNo {
			rs = append(rs, r)
		}
	}
	slices.SortFunc(rs, func(a, b payment.Refund) int { return strings.Compare(a.RefundNo, b.RefundNo) })
	return rs, nil
}

func TestRefundRequests(t *testing.T) {
	srv, st, orch := newServer(t)
	st.ByNo["PPAID"] = payment.Payment{PaymentNo: "PPAID", TenantID: "t1", OrderID: "o2", Amount: 990, Status: payment.StatusPaid}
	st.ByNo["POTHER"] = payment.Payment{PaymentNo: "POTHER", TenantID: "t2", OrderID: "o3", Amount: 990, Status: payment.StatusPaid}
	h := func(k string) map[string]string {
		m := map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json"}
		if k != "" {
			m["Idempotency-Key"] = k
		}
		return m
	}
	cases := []struct {
		name, path, body string
		want             int
		code             string
	}{
		{"zero amount", "/v1/payments/PPAID/refunds", `{"amount_fen":0}`, http.StatusBadRequest, payment.EINVALID},
		{"negative amount", "/v1/payments/PPAID/refunds", `{"amount_fen":-1}`, http.StatusBadRequest, payment.EINVALID},
		{"unknown field", "/v1/payments/PPAID/refunds", `{"amount":100}`, http.StatusBadRequest, payment.EINVALID},
		{"not paid", "/v1/payments/P1/refunds", `{"amount_fen":100,"refund_no":"rn1"}`, http.StatusConflict, payment.ENOTPAID},
		{"another tenant's payment", "/v1/payments/POTHER/refunds", `{"amount_fen":100,"refund_no":"rn2"}`, http.StatusNotFound, payment.ENOTFOUND},
		{"above the amount", "/v1/payments/PPAID/refunds", `{"amount_fen":991,"refund_no":"rn3"}`, http.StatusConflict, payment.EREFUNDEXCEEDS},
		{"neither key nor refund_no", "/v1/payments/PPAID/refunds", `{"amount_fen":100}`, http.StatusBadRequest, payment.EINVALID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := post(t, srv.URL+tc.path, tc.body, h(""))
			var p struct{ Code string }
			_ = json.Unmarshal([]byte(b), &p)
			if resp.StatusCode != tc.want || p.Code != tc.code || resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("HTTP %d %s %s; want %d %s", resp.StatusCode, resp.Header.Get("Content-Type"), b, tc.want, tc.code)
			}
		})
	}

	// The workflow engine is down: 503, and the key is released. The retry lands on the
	// same (derived) refund_no, so it starts the same refund instead of a second one.
	orch.refundErr = &payment.Error{Code: payment.EUNAVAILABLE, Message: "temporal down"}
	if resp, b := post(t, srv.URL+"/v1/payments/PPAID/refunds", `{"amount_fen":300}`, h("refund-key-01")); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("start fails: HTTP %d %s", resp.StatusCode, b)
	}
	orch.refundErr = nil
	resp, first := post(t, srv.URL+"/v1/payments/PPAID/refunds", `{"amount_fen":300}`, h("refund-key-01"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("retry: HTTP %d %s", resp.StatusCode, first)
	}
	resp, again := post(t, srv.URL+"/v1/payments/PPAID/refunds", `{"amount_fen":300}`, h("refund-key-01"))
	if resp.StatusCode != http.StatusOK || again != first || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: HTTP %d %s, want the first answer %s", resp.StatusCode, again, first)
	}
	if len(st.refunds) != 1 || orch.refundStarts != 2 || st.ByNo["PPAID"].Refunded != 300 {
		t.Fatalf("refunds = %d, starts = %d, refunded = %d; want 1, 2, 300", len(st.refunds), orch.refundStarts, st.ByNo["PPAID"].Refunded)
	}
	var r payment.Refund
	_ = json.Unmarshal([]byte(first), &r)
	if !strings.HasPrefix(r.RefundNo, "k") || r.Amount != 300 {
		t.Fatalf("refund = %+v", r)
	}
	if resp, b := post(t, srv.URL+"/v1/payments/PPAID/refunds", `{"amount_fen":301}`, h("refund-key-01")); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("same key, other payload: HTTP %d %s", resp.StatusCode, b)
	}
	// An explicit refund_no is the merchant's: the same one again is the same refund.
	resp, b := post(t, srv.URL+"/v1/payments/PPAID/refunds", `{"amount_fen":200,"refund_no":"my-refund-1"}`, h(""))
	if resp.StatusCode != http.StatusCreated || !strings.Contains(b, `"refund_no":"my-refund-1"`) {
		t.Fatalf("explicit refund_no: HTTP %d %s", resp.StatusCode, b)
	}
	if resp, b := post(t, srv.URL+"/v1/payments/PPAID/refunds", `{"amount_fen":200,"refund_no":"my-refund-1"}`, h("")); resp.StatusCode != http.StatusOK {
		t.Fatalf("explicit refund_no again: HTTP %d %s", resp.StatusCode, b)
	}
	if st.ByNo["PPAID"].Refunded != 500 {
		t.Fatalf("refunded = %d, want 500", st.ByNo["PPAID"].Refunded)
	}
}

func (f *fakeStore) GetRefundByOutRequestNo(_ context.Context, outRequestNo string) (payment.Refund, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	for _, r := range f.refunds {
		if r.OutRequestNo == outRequestNo {
			return r, nil
		}
	}
	return payment.Refund{}, payment.ErrNotFound
}

// TestRefundNotificationsNeverPayOrClose: a refund notification (out_biz_no, refund_fee)
// is never a payment: it is not signalled to a pending payment's workflow, whatever its
// trade_status; for a pending refund it starts (or joins) the refund's workflow.
func TestRefundNotificationsNeverPayOrClose(t *testing.T) {
	srv, st, orch := newServer(t)
	st.ByNo["PPAID"] = payment.Payment{PaymentNo: "PPAID", TenantID: "t1", OrderID: "o2", Amount: 990, Status: payment.StatusPaid}
	st.refunds = map[string]payment.Refund{"t1/rf1": {RefundNo: "rf1", TenantID: "t1", PaymentNo: "PPAID", Amount: 300,
		OutRequestNo: payment.OutRequestNo("t1", "rf1"), Status: payment.RefundPending}}
	cb := func(no, notifyID, outBizNo string) string {
		f := url.Values{"notify_id": {notifyID}, "out_trade_no": {no}, "total_amount": {"9.90"}, "sign": {"good"},
			"out_biz_no": {outBizNo}, "refund_fee": {"3.00"}}
		_, b := post(t, srv.URL+"/callbacks/alipay", f.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		return b
	}
	// A refund of the pending payment P1 made outside paykit: acknowledged, nothing signalled.
	if got := cb("P1", "n-r1", "Rconsole"); got != "success" {
		t.Fatalf("reply %q", got)
	}
	if got := cb("PPAID", "n-r2", payment.OutRequestNo("t1", "rf1")); got != "success" {
		t.Fatalf("reply %q", got)
	}
	st.note(t, 0, func(n payment.ChannelNotification) bool { return !n.SettledAt.IsZero() })
	st.note(t, 1, func(n payment.ChannelNotification) bool { return n.Outcome == "refund_workflow_started" })
	orch.mu.Lock()
	signals, starts := orch.signals, orch.refundStarts
	orch.mu.Unlock()
	if signals != 0 || starts != 1 {
		t.Fatalf("payment signals = %d, refund starts = %d; want 0 and 1", signals, starts)
	}
	if st.ByNo["P1"].Status != payment.StatusPending || st.ByNo["PPAID"].Status != payment.StatusPaid {
		t.Fatalf("payments changed: %+v", st.ByNo)
	}
	outcomes := map[string]bool{}
	st.Mu.Lock()
	for _, n := range st.notes {
		outcomes[n.Outcome] = true
	}
	st.Mu.Unlock()
	if !outcomes["refund_unknown"] || !outcomes["refund_workflow_started"] {
		t.Fatalf("outcomes = %v", outcomes)
	}
}

func (f *fakeStore) RecordAnomaly(_ context.Context, an payment.Anomaly) error {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.anomalies = append(f.anomalies, an)
	return nil
}

// A refund notification for a refund that failed here (its reservation released) is
// evidence that Alipay moved the money after all: it records an anomaly about that refund
// (its out_request_no, as the refund's run would), never passes.
func TestRefundNotificationForAFailedRefundIsAnAnomaly(t *testing.T) {
	srv, st, _ := newServer(t)
	st.ByNo["PPAID"] = payment.Payment{PaymentNo: "PPAID", TenantID: "t1", OrderID: "o2", Amount: 990, Status: payment.StatusPaid}
	st.refunds = map[string]payment.Refund{"t1/rf9": {RefundNo: "rf9", TenantID: "t1", PaymentNo: "PPAID", Amount: 300,
		OutRequestNo: payment.OutRequestNo("t1", "rf9"), Status: payment.RefundFailed}}
	f := url.Values{"notify_id": {"n-f1"}, "out_trade_no": {"PPAID"}, "total_amount": {"9.90"}, "sign": {"good"},
		"out_biz_no": {payment.OutRequestNo("t1", "rf9")}, "refund_fee": {"3.00"}}
	_, b := post(t, srv.URL+"/callbacks/alipay", f.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	n := st.note(t, 0, func(n payment.ChannelNotification) bool { return !n.SettledAt.IsZero() })
	st.Mu.Lock()
	defer st.Mu.Unlock()
	if b != "success" || n.Outcome != "anomaly_recorded" || len(st.anomalies) != 1 || st.anomalies[0].Kind != "refund_succeeded_after_fail" ||
		st.anomalies[0].Subject != payment.OutRequestNo("t1", "rf9") {
		t.Fatalf("reply %q, %+v, anomalies %+v", b, n, st.anomalies)
	}
}

// A refund asked for while the payment is still pending (its notification on the way)
// is refused, but the refusal is not stored under the key: once the payment is PAID,
// the retry with the same key refunds.
func TestRefundOfAPaymentNotYetPaidIsNotStoredForTheKey(t *testing.T) {
	srv, st, _ := newServer(t)
	h := map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json", "Idempotency-Key": "refund-early-01"}
	if resp, b := post(t, srv.URL+"/v1/payments/P1/refunds", `{"amount_fen":100}`, h); resp.StatusCode != http.StatusConflict {
		t.Fatalf("refund of a pending payment: HTTP %d %s", resp.StatusCode, b)
	}
	st.Mu.Lock()
	p := st.ByNo["P1"]
	p.Status = payment.StatusPaid
	st.ByNo["P1"] = p
	st.Mu.Unlock()
	if resp, b := post(t, srv.URL+"/v1/payments/P1/refunds", `{"amount_fen":100}`, h); resp.StatusCode/100 != 2 {
		t.Fatalf("retry once paid: HTTP %d %s", resp.StatusCode, b)
	}
}

// A refund with neither an Idempotency-Key nor a refund_no is refused, and so is its
// repeat: a client retrying after a timeout, or a double-clicked refund button, never
// moves the money twice. Before, each request drew a new refund_no and both refunded.
func TestRefundWithoutAnIdentityIsRefusedNotRepeated(t *testing.T) {
	srv, st, orch := newServer(t)
	st.ByNo["PPAID"] = payment.Payment{PaymentNo: "PPAID", TenantID: "t1", OrderID: "o2", Amount: 990, Status: payment.StatusPaid}
	h := map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json"}
	for range 2 {
		resp, b := post(t, srv.URL+"/v1/payments/PPAID/refunds", `{"amount_fen":100}`, h)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, "Idempotency-Key") {
			t.Fatalf("keyless refund: HTTP %d %s, want 400 naming the Idempotency-Key", resp.StatusCode, b)
		}
	}
	st.Mu.Lock()
	defer st.Mu.Unlock()
	if len(st.refunds) != 0 || orch.refundStarts != 0 || st.ByNo["PPAID"].Refunded != 0 {
		t.Fatalf("refunds %d, starts %d, refunded %d; want nothing", len(st.refunds), orch.refundStarts, st.ByNo["PPAID"].Refunded)
	}
}
