package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/paykit/paykit/payment"
)

func checkoutHeaders(idemKey string) map[string]string {
	h := map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json"}
	if idemKey != "" {
		h["Idempotency-Key"] = idemKey
	}
	return h
}

// A checkout for an order that has a PAID payment is refused with the paid payment,
// whatever the key, and without starting a workflow; the re-purchase opt-in passes.
func TestCheckoutOfPaidOrderIsRefused(t *testing.T) {
	srv, st, orch := newServer(t)
	st.payments["PPAID"] = payment.Payment{PaymentNo: "PPAID", TenantID: "t1", OrderID: "paid1", Amount: 990, Status: payment.StatusPaid}
	body := `{"order_id":"paid1","amount_fen":990,"subject":"Coffee"}`
	for _, k := range []string{"", "paid-key-0001", "paid-key-0002"} {
		resp, b := post(t, srv.URL+"/v1/payments", body, checkoutHeaders(k))
		var p struct {
			Code    string          `json:"code"`
			Payment payment.Payment `json:"payment"`
		}
		_ = json.Unmarshal([]byte(b), &p)
		if resp.StatusCode != http.StatusConflict || p.Code != payment.EORDERPAID || p.Payment.PaymentNo != "PPAID" ||
			resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("key %q: HTTP %d %s", k, resp.StatusCode, b)
		}
	}
	if orch.checkouts != 0 {
		t.Fatalf("%d workflow checkouts for a paid order, want 0", orch.checkouts)
	}
	resp, b := post(t, srv.URL+"/v1/payments", `{"order_id":"paid1","amount_fen":990,"subject":"Coffee","repurchase":true}`, checkoutHeaders(""))
	if resp.StatusCode != http.StatusCreated || orch.checkouts != 1 || !orch.lastIn.Repurchase {
		t.Fatalf("re-purchase: HTTP %d %s, checkouts=%d repurchase=%v", resp.StatusCode, b, orch.checkouts, orch.lastIn.Repurchase)
	}
	// The workflow's own refusal (the store found the order paid) is answered the same way.
	orch.errs = []error{&payment.Error{Code: payment.EORDERPAID, Message: "order paid1 is already paid"}}
	resp, b = post(t, srv.URL+"/v1/payments", `{"order_id":"paid1","amount_fen":990,"subject":"Coffee","repurchase":true}`, checkoutHeaders(""))
	if resp.StatusCode != http.StatusConflict || !strings.Contains(b, `"PPAID"`) {
		t.Fatalf("refused by the workflow: HTTP %d %s", resp.StatusCode, b)
	}
}

// A checkout that reaches a run which is ending is tried again with a new update id; a run
// that never makes way is answered 409 payment_finishing with Retry-After, and the key is
// released rather than stored.
func TestCheckoutRetriesWhileTheOldRunMakesWay(t *testing.T) {
	srv, st, orch := newServer(t)
	finishing := &payment.Error{Code: payment.EFINISHING, Message: "payment P0 is CLOSED and its run is ending; retry"}
	orch.errs = []error{finishing, finishing}
	resp, b := post(t, srv.URL+"/v1/payments", `{"order_id":"o9","amount_fen":990,"subject":"Coffee"}`, checkoutHeaders("finish-key-01"))
	if resp.StatusCode != http.StatusCreated || len(orch.updateIDs) != 3 {
		t.Fatalf("HTTP %d %s after %d tries", resp.StatusCode, b, len(orch.updateIDs))
	}
	if orch.updateIDs[0] == orch.updateIDs[1] || orch.updateIDs[1] == orch.updateIDs[2] {
		t.Fatalf("update ids reused: %v", orch.updateIDs)
	}
	orch.err = finishing
	resp, b = post(t, srv.URL+"/v1/payments", `{"order_id":"o9","amount_fen":990,"subject":"Coffee"}`, checkoutHeaders("finish-key-02"))
	if resp.StatusCode != http.StatusConflict || !strings.Contains(b, payment.EFINISHING) || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("HTTP %d %s retry-after=%q", resp.StatusCode, b, resp.Header.Get("Retry-After"))
	}
	if _, kept := st.idem["finish-key-02"]; kept || st.released != 1 {
		t.Fatalf("finishing answer stored for the key (released=%d)", st.released)
	}
}

// Alipay's refusal to open the trade is a 422 with code channel_refused, not a 201.
func TestCheckoutRefusedByAlipayIs422(t *testing.T) {
	srv, _, orch := newServer(t)
	orch.err = &payment.Error{Code: payment.ECHANNEL, Message: "alipay refused the trade: ACQ.ACCESS_FORBIDDEN"}
	resp, b := post(t, srv.URL+"/v1/payments", `{"order_id":"o8","amount_fen":990,"subject":"Coffee"}`, checkoutHeaders(""))
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(b, payment.ECHANNEL) {
		t.Fatalf("HTTP %d %s", resp.StatusCode, b)
	}
}
