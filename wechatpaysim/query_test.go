package wechatpaysim_test

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/wechatpaysim"
)

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// The query answers WeChat Pay's shapes: NOTPAY without transaction_id, payer or
// trade_type; SUCCESS with a 28-digit 42000… transaction_id, success_time, payer,
// bank_type and payer_total; unknown orders 404 ORDER_NOT_EXIST.
func TestQueryShapes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.place(t, "jsapi", "QUERY00001", 500, "https://e.com/n")
	notpay := h.query(t, "QUERY00001")
	h.verify(t, notpay)
	m := notpay.json(t)
	want := []string{"amount", "appid", "mchid", "out_trade_no", "promotion_detail", "scene_info", "trade_state", "trade_state_desc"}
	if got := keys(m); !slices.Equal(got, want) || m["trade_state"] != "NOTPAY" || m["trade_state_desc"] != "订单未支付" {
		t.Fatalf("NOTPAY answer %s", notpay.body)
	}
	if amt := m["amount"].(map[string]any); len(amt) != 2 || amt["total"] != 500.0 || amt["payer_currency"] != "CNY" {
		t.Fatalf("NOTPAY amount %v", amt)
	}
	if r := h.do(t, req{method: "GET", target: "/v3/pay/transactions/id/4200000000000000000000000000?mchid=" + mchID}); r.status != 404 || r.code() != "ORDER_NOT_EXIST" {
		t.Fatalf("by unknown transaction_id: %d %s", r.status, r.body)
	}

	h.clock.Advance(time.Minute)
	if _, err := h.sim.Pay(mchID, "QUERY00001", wechatpaysim.PayOptions{DiscountFen: 120}); err != nil {
		t.Fatal(err)
	}
	success := h.query(t, "QUERY00001")
	h.verify(t, success)
	s := success.json(t)
	txID, _ := s["transaction_id"].(string)
	if !regexp.MustCompile(`^42000\d{23}$`).MatchString(txID) || s["trade_state"] != "SUCCESS" || s["trade_state_desc"] != "支付成功" ||
		s["trade_type"] != "JSAPI" || s["bank_type"] != "OTHERS" || s["payer"].(map[string]any)["openid"] != "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o" {
		t.Fatalf("SUCCESS answer %s", success.body)
	}
	if ts, err := time.Parse(time.RFC3339, s["success_time"].(string)); err != nil || !ts.Equal(h.clock.Now().Truncate(time.Second)) ||
		!strings.HasSuffix(s["success_time"].(string), "+08:00") {
		t.Fatalf("success_time %v", s["success_time"])
	}
	amt := s["amount"].(map[string]any)
	if amt["total"] != 500.0 || amt["payer_total"] != 380.0 || amt["currency"] != "CNY" || len(s["promotion_detail"].([]any)) != 1 {
		t.Fatalf("SUCCESS amount %v, promotions %v", amt, s["promotion_detail"])
	}
	byID := h.do(t, req{method: "GET", target: "/v3/pay/transactions/id/" + txID + "?mchid=" + mchID})
	if byID.status != 200 || byID.json(t)["out_trade_no"] != "QUERY00001" {
		t.Fatalf("by transaction_id: %d %s", byID.status, byID.body)
	}
	if r := h.query(t, "NOSUCH0001"); r.status != 404 || r.code() != "ORDER_NOT_EXIST" {
		t.Fatalf("unknown: %d %s", r.status, r.body)
	}
	if r := h.do(t, req{method: "GET", target: "/v3/pay/transactions/out-trade-no/QUERY00001"}); r.status != 400 || r.code() != "PARAM_ERROR" {
		t.Fatalf("without mchid: %d %s", r.status, r.body)
	}
}

// PAYERROR carries the transaction_id and trade_type but no payer.
func TestPayError(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.place(t, "native", "PAYERR0001", 1, "https://e.com/n")
	var o wechatpaysim.Order
	if code := h.control(t, "POST", "/_sim/orders/PAYERR0001/payerror", "", &o); code != 200 || o.TradeState != "PAYERROR" {
		t.Fatalf("%d %+v", code, o)
	}
	m := h.query(t, "PAYERR0001").json(t)
	if m["trade_state"] != "PAYERROR" || m["transaction_id"] == nil || m["trade_type"] != "NATIVE" || m["payer"] != nil {
		t.Fatalf("%v", m)
	}
}

// Close answers 204, signed; closing again and closing a paid order answer as the
// settings say.
func TestClose(t *testing.T) {
	t.Parallel()
	closeBody := `{"mchid":"` + mchID + `"}`
	tests := []struct {
		name, closePaid, closeClosed string
		twiceStatus                  int
		twiceCode                    string
		paidStatus                   int
		paidCode                     string
	}{
		{"defaults", "", "", 204, "", 400, "ORDERPAID"},
		{"strict", wechatpaysim.ClosePaidTradeError, wechatpaysim.CloseClosedOrderClosed, 400, "ORDER_CLOSED", 403, "TRADE_ERROR"},
		{"lenient", wechatpaysim.ClosePaidNoContent, wechatpaysim.CloseClosedNoContent, 204, "", 204, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(c *wechatpaysim.Config) { c.ClosePaid, c.CloseClosed = tc.closePaid, tc.closeClosed })
			h.place(t, "native", "CLOSE00001", 1, "https://e.com/n")
			closeIt := func(no string) resp {
				return h.do(t, req{method: "POST", target: "/v3/pay/transactions/out-trade-no/" + no + "/close", body: closeBody})
			}
			first := closeIt("CLOSE00001")
			if first.status != 204 || len(first.body) != 0 {
				t.Fatalf("close: %d %s", first.status, first.body)
			}
			h.verify(t, first)
			if q := h.query(t, "CLOSE00001").json(t); q["trade_state"] != "CLOSED" {
				t.Fatalf("after close: %v", q)
			}
			if r := closeIt("CLOSE00001"); r.status != tc.twiceStatus || r.code() != tc.twiceCode {
				t.Fatalf("close twice: %d %s", r.status, r.body)
			}
			h.place(t, "native", "CLOSE00002", 1, "https://e.com/n")
			if _, err := h.sim.Pay(mchID, "CLOSE00002", wechatpaysim.PayOptions{}); err != nil {
				t.Fatal(err)
			}
			if r := closeIt("CLOSE00002"); r.status != tc.paidStatus || r.code() != tc.paidCode {
				t.Fatalf("close paid: %d %s", r.status, r.body)
			}
			if q := h.query(t, "CLOSE00002").json(t); q["trade_state"] != "SUCCESS" {
				t.Fatalf("a paid order after close: %v", q)
			}
			if r := closeIt("NOSUCH0001"); r.status != http.StatusNotFound || r.code() != "ORDER_NOT_EXIST" {
				t.Fatalf("close unknown: %d %s", r.status, r.body)
			}
			if r := h.do(t, req{method: "POST", target: "/v3/pay/transactions/out-trade-no/CLOSE00001/close", body: `{}`}); r.status != 400 || r.code() != "PARAM_ERROR" {
				t.Fatalf("close without mchid: %d %s", r.status, r.body)
			}
		})
	}
}
