package alipaysim_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/smartwalle/alipay/v3"
)

// The control API counts authenticated gateway calls by method, in all and per trade, so a
// test can tell what a client cost Alipay; a request that fails authentication is not
// counted, and reset starts over.
func TestCallsCountedByMethodAndTrade(t *testing.T) {
	h := newHarness(t, nil, nil)
	h.precreate(t, "CALLS1", "1.00")
	h.precreate(t, "CALLS2", "1.00")
	for range 3 {
		if _, err := h.client.TradeQuery(context.Background(), alipay.TradeQuery{OutTradeNo: "CALLS1"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.client.TradeClose(context.Background(), alipay.TradeClose{OutTradeNo: "CALLS2"}); err != nil {
		t.Fatal(err)
	}
	// Signed with a key the simulator does not know: refused, not counted.
	bad := newClient(t, h.srv.URL, testKeys(t).AlipayPrivateKeyPEM, h.keys.AlipayPublicKeyPEM)
	_, _ = bad.TradeQuery(context.Background(), alipay.TradeQuery{OutTradeNo: "CALLS1"})

	var all, one, none map[string]int
	h.controlJSON(t, http.MethodGet, "/_sim/calls", "", &all)
	h.controlJSON(t, http.MethodGet, "/_sim/calls?out_trade_no=CALLS1", "", &one)
	if all["alipay.trade.precreate"] != 2 || all["alipay.trade.query"] != 3 || all["alipay.trade.close"] != 1 {
		t.Fatalf("calls %v, want 2 precreate, 3 query, 1 close", all)
	}
	if len(one) != 2 || one["alipay.trade.precreate"] != 1 || one["alipay.trade.query"] != 3 {
		t.Fatalf("calls of CALLS1 %v, want 1 precreate and 3 queries", one)
	}
	h.controlJSON(t, http.MethodPost, "/_sim/reset", "", nil)
	h.controlJSON(t, http.MethodGet, "/_sim/calls", "", &none)
	if len(none) != 0 {
		t.Fatalf("calls after reset %v, want none", none)
	}
}
