package wechatpaysim_test

import (
	"strings"
	"testing"

	"github.com/paykit/paykit/wechatpaysim"
)

// The control API: its documentation, orders, payment with a discount, expiry, reset.
func TestControlAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	if status, doc := h.get(t, "/_sim"); status != 200 || doc != wechatpaysim.ControlAPIDoc {
		t.Fatalf("GET /_sim: %d", status)
	}
	if status, _ := h.get(t, "/_sim/healthz"); status != 200 {
		t.Fatal(status)
	}
	h.place(t, "native", "CONTROL001", 1000, "https://e.com/n")
	h.place(t, "native", "CONTROL002", 1000, "https://e.com/n")
	var orders []wechatpaysim.Order
	if code := h.control(t, "GET", "/_sim/orders", "", &orders); code != 200 || len(orders) != 2 ||
		!strings.HasPrefix(orders[0].CashierURL, h.srv.URL+"/_sim/cashier/bizpayurl?pr=") {
		t.Fatalf("%d %+v", code, orders)
	}
	tests := []struct {
		name, method, path, body string
		status                   int
		state                    string
	}{
		{"a discount as large as the total", "POST", "/_sim/orders/CONTROL001/pay", `{"discount_fen":1000}`, 400, ""},
		{"pay with a discount", "POST", "/_sim/orders/CONTROL001/pay", `{"openid":"o1","discount_fen":300,"bank_type":"CMB_DEBIT"}`, 200, "SUCCESS"},
		{"pay twice", "POST", "/_sim/orders/CONTROL001/pay", `{}`, 409, ""},
		{"unknown order", "POST", "/_sim/orders/NOSUCH0001/pay", `{}`, 404, ""},
		{"expire", "POST", "/_sim/orders/CONTROL002/expire", ``, 200, "CLOSED"},
		{"get", "GET", "/_sim/orders/CONTROL002?mchid=" + mchID, ``, 200, "CLOSED"},
	}
	for _, tc := range tests {
		var o wechatpaysim.Order
		if code := h.control(t, tc.method, tc.path, tc.body, &o); code != tc.status || (tc.state != "" && o.TradeState != tc.state) {
			t.Errorf("%s: %d %+v", tc.name, code, o)
		}
	}
	q := h.query(t, "CONTROL001").json(t)
	if q["amount"].(map[string]any)["payer_total"] != 700.0 || q["bank_type"] != "CMB_DEBIT" || q["payer"].(map[string]any)["openid"] != "o1" {
		t.Fatalf("%v", q)
	}
	if code := h.control(t, "POST", "/_sim/reset", "", nil); code != 200 || len(h.sim.Orders("")) != 0 || len(h.sim.Merchants()) != 1 {
		t.Fatal("reset")
	}
}
