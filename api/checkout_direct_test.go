package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/payment"
)

func (fakeGateway) SignedHandOff(_ context.Context, req payment.TradeRequest) (payment.HandOff, bool, error) {
	if req.Method == payment.MethodQR {
		return payment.HandOff{}, false, nil
	}
	return payment.HandOff{PayURL: "https://cashier.test/pay?out_trade_no=" + req.PaymentNo + "&time_expire=" + req.ExpireAt.Format(time.RFC3339)}, true, nil
}

// A page checkout is answered from the API's own insert and the workflow's start, with no
// checkout update: the pay link it answers is the one it stored and handed to the run.
// A second checkout of the order whose run is running joins it through the update; one
// with another amount is a 409 with the pending payment; a start that fails is a 503
// that leaves the payment for the retry, which answers it and starts its run.
func TestDirectCheckout(t *testing.T) {
	srv, st, orch := newServerWith(t, serverOptions{cfg: api.Config{BodyLimit: "1K", DirectCheckoutTTL: 15 * time.Minute}})
	body := `{"order_id":"d1","amount_fen":990,"subject":"Coffee"}`
	resp, b := post(t, srv.URL+"/v1/payments", body, checkoutHeaders(""))
	var res struct {
		PaymentNo string    `json:"payment_no"`
		PayURL    string    `json:"pay_url"`
		Status    string    `json:"status"`
		ExpireAt  time.Time `json:"expire_at"`
	}
	if err := json.Unmarshal([]byte(b), &res); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("HTTP %d %s", resp.StatusCode, b)
	}
	if orch.checkouts != 0 || len(orch.opened) != 1 {
		t.Fatalf("%d checkout updates, %d starts; want 0 and 1", orch.checkouts, len(orch.opened))
	}
	in := orch.opened[0]
	if in.PaymentNo != res.PaymentNo || in.Opened == nil || in.Opened.PayURL != res.PayURL || !strings.Contains(res.PayURL, res.PaymentNo) ||
		st.Links[res.PaymentNo] != res.PayURL || !in.Opened.ExpireAt.Equal(res.ExpireAt) || res.Status != "PENDING" {
		t.Fatalf("answered %+v; started %+v (opened %+v); stored link %q", res, in, in.Opened, st.Links[res.PaymentNo])
	}
	if d := time.Until(res.ExpireAt); d < 14*time.Minute || d > 15*time.Minute {
		t.Fatalf("expires in %v, want the 15 min TTL", d)
	}

	// A repeated checkout finds the pending payment with the paid-order read and joins its
	// run through the update, with no insert and no start.
	if resp, b := post(t, srv.URL+"/v1/payments", body, checkoutHeaders("")); resp.StatusCode != http.StatusCreated || orch.checkouts != 1 ||
		len(orch.opened) != 1 || orch.lastIn.OrderID != "d1" {
		t.Fatalf("second checkout: HTTP %d %s, %d checkout updates, %d starts; want it joined through the update", resp.StatusCode, b, orch.checkouts, len(orch.opened))
	}

	orch.startErr = &payment.Error{Code: payment.EUNAVAILABLE, Message: "workflow engine unavailable, retry later"}
	body2 := `{"order_id":"d2","amount_fen":990,"subject":"Coffee"}`
	if resp, b := post(t, srv.URL+"/v1/payments", body2, checkoutHeaders("")); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("start failed: HTTP %d %s, want 503", resp.StatusCode, b)
	}
	var kept string
	for no, p := range st.ByNo {
		if p.OrderID == "d2" {
			kept = no
		}
	}
	if kept == "" || st.Links[kept] == "" {
		t.Fatalf("the payment whose start failed was not kept with its link: %q", kept)
	}
	orch.startErr = nil
	if resp, b := post(t, srv.URL+"/v1/payments", body2, checkoutHeaders("")); resp.StatusCode != http.StatusCreated || orch.checkouts != 2 || orch.lastIn.OrderID != "d2" {
		t.Fatalf("retry: HTTP %d %s, %d checkout updates; want the kept payment's order joined through the update, which adopts it", resp.StatusCode, b, orch.checkouts)
	}

	// The race the read cannot see: another checkout's insert lands first. The start of
	// the payment found by the insert is tried; a run already running is joined.
	orch.startRunning = true
	st.ByNo["PRACE"] = payment.Payment{PaymentNo: "PRACE", TenantID: "t1", OrderID: "d3", Amount: 990, Currency: "CNY", Status: payment.StatusPending}
	st.Links["PRACE"] = "https://cashier.test/pay?out_trade_no=PRACE"
	st.HidePending = "d3"
	if resp, b := post(t, srv.URL+"/v1/payments", `{"order_id":"d3","amount_fen":990,"subject":"Coffee"}`, checkoutHeaders("")); resp.StatusCode != http.StatusCreated ||
		orch.checkouts != 3 || orch.lastIn.OrderID != "d3" {
		t.Fatalf("race, run running: HTTP %d %s, %d checkout updates", resp.StatusCode, b, orch.checkouts)
	}
	orch.startRunning = false
	resp, b = post(t, srv.URL+"/v1/payments", `{"order_id":"d3","amount_fen":990,"subject":"Coffee"}`, checkoutHeaders(""))
	if resp.StatusCode != http.StatusCreated || !strings.Contains(b, "PRACE") || orch.checkouts != 3 || orch.opened[len(orch.opened)-1].PaymentNo != "PRACE" ||
		orch.opened[len(orch.opened)-1].Opened.PayURL != st.Links["PRACE"] {
		t.Fatalf("race, no run: HTTP %d %s; want PRACE answered with its link and its run started", resp.StatusCode, b)
	}
	if resp, b := post(t, srv.URL+"/v1/payments", `{"order_id":"d3","amount_fen":1990,"subject":"Coffee"}`, checkoutHeaders("")); resp.StatusCode != http.StatusConflict {
		t.Fatalf("race, other amount: HTTP %d %s, want 409", resp.StatusCode, b)
	}
}
