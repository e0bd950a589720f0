package alipaysim_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/smartwalle/alipay/v3"

	"github.com/paykit/paykit/alipaysim"
)

const (
	appB    = "2021000000000077"
	sellerB = "2088000000000077"
)

// clientFor is a smartwalle client of one app.
func clientFor(tb testing.TB, base, app, appPriv, aliPub string) *alipay.Client {
	tb.Helper()
	c, err := alipay.New(app, appPriv, false,
		alipay.WithSandboxGateway(base+alipaysim.GatewayPath),
		alipay.WithTimeLocation(time.FixedZone("CST", 8*3600)),
		alipay.WithHTTPClient(&http.Client{Timeout: 5 * time.Second}))
	if err != nil {
		tb.Fatal(err)
	}
	if err := c.LoadAliPayPublicKey(aliPub); err != nil {
		tb.Fatal(err)
	}
	return c
}

// TestAppsAreIsolated registers a second app with keys of its own (app and Alipay) over
// the control API, and checks that it can neither see nor touch the first app's trade,
// and that what is sent for it is signed with its own Alipay key.
func TestAppsAreIsolated(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	kb, err := alipaysim.GenerateKeys(2048)
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := json.Marshal(map[string]string{"app_id": appB, "seller_id": sellerB, "app_public_key": kb.AppPublicKeyPEM, "alipay_private_key": kb.AlipayPrivateKeyPEM})
	if code := h.controlJSON(t, "POST", "/_sim/apps", string(reg), nil); code != http.StatusOK {
		t.Fatalf("register app: %d", code)
	}
	if code := h.controlJSON(t, "POST", "/_sim/apps", string(reg), nil); code != http.StatusOK {
		t.Fatalf("registering the same app again: %d", code)
	}
	other, _ := json.Marshal(map[string]string{"app_id": appB, "seller_id": sellerB, "app_public_key": h.keys.AppPublicKeyPEM})
	if code := h.controlJSON(t, "POST", "/_sim/apps", string(other), nil); code != http.StatusConflict {
		t.Fatalf("the same app_id with other keys: %d, want 409", code)
	}
	if code := h.controlJSON(t, "POST", "/_sim/apps", `{"app_id":"x","app_public_key":"garbage"}`, nil); code != http.StatusBadRequest {
		t.Fatalf("garbage key: %d, want 400", code)
	}

	ctx := context.Background()
	h.precreate(t, "A_trade", "10.00")
	b := clientFor(t, h.srv.URL, appB, kb.AppPrivateKeyPEM, kb.AlipayPublicKeyPEM)

	// The smartwalle client verifies every answer with B's Alipay public key, so each
	// answer below is also proof that B's answers are signed with B's key.
	q, err := b.TradeQuery(ctx, alipay.TradeQuery{OutTradeNo: "A_trade"})
	if err != nil || q.SubCode != "ACQ.TRADE_NOT_EXIST" {
		t.Fatalf("B queries A's trade: %+v, %v", q, err)
	}
	cl, err := b.TradeClose(ctx, alipay.TradeClose{OutTradeNo: "A_trade"})
	if err != nil || cl.SubCode != "ACQ.TRADE_NOT_EXIST" {
		t.Fatalf("B closes A's trade: %+v, %v", cl, err)
	}
	rf, err := b.TradeRefund(ctx, alipay.TradeRefund{OutTradeNo: "A_trade", RefundAmount: "1.00", OutRequestNo: "r1"})
	if err != nil || rf.SubCode != "ACQ.TRADE_NOT_EXIST" {
		t.Fatalf("B refunds A's trade: %+v, %v", rf, err)
	}
	if _, err := h.sim.Pay(appB, "A_trade", ""); !errors.Is(err, alipaysim.ErrTradeNotFound) {
		t.Fatalf("paying A's trade as B: %v", err)
	}
	if code := h.controlJSON(t, "POST", "/_sim/trades/A_trade/pay", `{"app_id":"`+appB+`"}`, nil); code != http.StatusNotFound {
		t.Fatalf("control pay of A's trade as B: %d, want 404", code)
	}
	if tr, _ := h.sim.Trade(alipaysim.DefaultAppID, "A_trade"); tr.TradeStatus != "WAIT_BUYER_PAY" {
		t.Fatalf("A's trade after B's attempts: %+v", tr)
	}

	// A's client does not accept an answer signed with B's Alipay key: the keys differ.
	wrong := clientFor(t, h.srv.URL, appB, kb.AppPrivateKeyPEM, h.keys.AlipayPublicKeyPEM)
	if _, err := wrong.TradeQuery(ctx, alipay.TradeQuery{OutTradeNo: "A_trade"}); err == nil {
		t.Fatal("B's answer verified with the default Alipay key")
	}

	// B's own trade, paid, is notified with B's app_id and seller, signed with B's key.
	rsp, err := b.TradePreCreate(ctx, alipay.TradePreCreate{Trade: alipay.Trade{
		NotifyURL: h.sink.url(), Subject: "b", OutTradeNo: "B_trade", TotalAmount: "2.00", ProductCode: "FACE_TO_FACE_PAYMENT"}})
	if err != nil || !rsp.IsSuccess() {
		t.Fatalf("B precreates: %+v, %v", rsp, err)
	}
	if _, err := h.sim.Pay("", "B_trade", ""); err != nil {
		t.Fatal(err)
	}
	d := h.sink.next(t, 5*time.Second)
	if d.form.Get("app_id") != appB || d.form.Get("seller_id") != sellerB {
		t.Fatalf("notification = %v", d.form)
	}
	if _, err := b.DecodeNotification(ctx, d.form); err != nil {
		t.Fatalf("B's notification does not verify with B's Alipay key: %v", err)
	}
	if _, err := h.client.DecodeNotification(ctx, d.form); err == nil {
		t.Fatal("B's notification verified with the default Alipay key")
	}
}
