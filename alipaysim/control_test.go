package alipaysim_test

import (
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/alipaysim"
)

func TestControlAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	h.precreate(t, "S_ctl", "12.34")
	h.precreate(t, "S_ctl2", "1")

	resp, err := http.Get(h.srv.URL + "/_sim")
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(doc), "/_sim/trades/{out_trade_no}/pay") {
		t.Fatalf("GET /_sim does not document the API:\n%s", doc)
	}

	var health map[string]string
	if code := h.controlJSON(t, "GET", "/_sim/healthz", "", &health); code != 200 || health["status"] != "ok" {
		t.Fatalf("healthz %d %v", code, health)
	}

	var errBody map[string]any
	if code := h.controlJSON(t, "POST", "/_sim/trades/S_none/pay", "", &errBody); code != 404 {
		t.Fatalf("pay unknown: %d %v", code, errBody)
	}

	var tr alipaysim.Trade
	if code := h.controlJSON(t, "POST", "/_sim/trades/S_ctl/pay", `{"buyer_id":"2088777"}`, &tr); code != 200 ||
		tr.TradeStatus != "TRADE_SUCCESS" || tr.BuyerID != "2088777" || tr.TotalFen != 1234 || tr.TotalAmount != "12.34" || tr.PaidAt.IsZero() {
		t.Fatalf("pay: %d %+v", code, tr)
	}
	var conflict struct {
		Error string          `json:"error"`
		Trade alipaysim.Trade `json:"trade"`
	}
	if code := h.controlJSON(t, "POST", "/_sim/trades/S_ctl/pay", "", &conflict); code != 409 || conflict.Trade.TradeStatus != "TRADE_SUCCESS" || conflict.Error == "" {
		t.Fatalf("pay twice: %d %+v", code, conflict)
	}

	var trades []alipaysim.Trade
	if code := h.controlJSON(t, "GET", "/_sim/trades", "", &trades); code != 200 || len(trades) != 2 || trades[0].OutTradeNo != "S_ctl" {
		t.Fatalf("list: %d %+v", code, trades)
	}
	if code := h.controlJSON(t, "GET", "/_sim/trades/S_ctl2", "", &tr); code != 200 || tr.TradeStatus != "WAIT_BUYER_PAY" {
		t.Fatalf("get: %d %+v", code, tr)
	}
	if code := h.controlJSON(t, "POST", "/_sim/trades/S_ctl2/expire", "", &tr); code != 200 || tr.TradeStatus != "TRADE_CLOSED" || tr.CloseReason != "expired" {
		t.Fatalf("expire: %d %+v", code, tr)
	}
	if code := h.controlJSON(t, "POST", "/_sim/trades/S_ctl/finish", "", &tr); code != 200 || tr.TradeStatus != "TRADE_FINISHED" {
		t.Fatalf("finish: %d %+v", code, tr)
	}

	// Refunds listing.
	h.precreate(t, "S_ctl3", "5")
	h.controlJSON(t, "POST", "/_sim/trades/S_ctl3/pay", "", nil)
	a := h.postRaw(t, nil, signedForm(t, parsePriv(t, h.keys.AppPrivateKeyPEM), "alipay.trade.refund",
		map[string]string{"out_trade_no": "S_ctl3", "refund_amount": "2.5", "out_request_no": "RR"}))
	if a.get("code") != "10000" {
		t.Fatal(a.fields)
	}
	var refunds []alipaysim.Refund
	if code := h.controlJSON(t, "GET", "/_sim/refunds", "", &refunds); code != 200 || len(refunds) != 1 ||
		refunds[0].RefundFen != 250 || refunds[0].RefundAmount != "2.50" || refunds[0].OutRequestNo != "RR" {
		t.Fatalf("refunds: %d %+v", code, refunds)
	}

	// Faults over HTTP.
	var fs alipaysim.FaultState
	if code := h.controlJSON(t, "POST", "/_sim/faults/gateway", `{"mode":"system_error","count":2,"method":"alipay.trade.query"}`, &fs); code != 200 || len(fs.Gateway) != 1 || fs.Gateway[0].Count != 2 {
		t.Fatalf("gateway fault: %d %+v", code, fs)
	}
	if code := h.controlJSON(t, "POST", "/_sim/faults/gateway", `{"mode":"explode"}`, &errBody); code != 400 {
		t.Fatalf("bad fault accepted: %d", code)
	}
	if code := h.controlJSON(t, "POST", "/_sim/faults/notifications", `{"copies":3,"hold":true}`, &fs); code != 200 || fs.Notifications.Copies != 3 || !fs.Notifications.Hold {
		t.Fatalf("notification faults: %d %+v", code, fs)
	}
	if code := h.controlJSON(t, "POST", "/_sim/faults/notifications", `{"drop_next":1}`, &fs); code != 200 || fs.Notifications.Copies != 3 || fs.Notifications.DropNext != 1 {
		t.Fatalf("partial update lost fields: %d %+v", code, fs)
	}
	q := signedForm(t, parsePriv(t, h.keys.AppPrivateKeyPEM), "alipay.trade.query", map[string]string{"out_trade_no": "S_ctl3"})
	if a := h.postRaw(t, nil, q); a.get("sub_code") != "ACQ.SYSTEM_ERROR" {
		t.Fatalf("fault not applied: %v", a.fields)
	}
	if code := h.controlJSON(t, "DELETE", "/_sim/faults", "", &fs); code != 200 || len(fs.Gateway) != 0 || fs.Notifications.Copies != 1 {
		t.Fatalf("reset faults: %d %+v", code, fs)
	}
	if a := h.postRaw(t, nil, q); a.get("code") != "10000" {
		t.Fatalf("fault still applied: %v", a.fields)
	}

	var released map[string]int
	if code := h.controlJSON(t, "POST", "/_sim/notifications/release", `{"order":"sideways"}`, &errBody); code != 400 {
		t.Fatalf("bad order accepted: %d", code)
	}
	if code := h.controlJSON(t, "POST", "/_sim/notifications/release", `{"order":"fifo"}`, &released); code != 200 {
		t.Fatalf("release: %d", code)
	}

	deadline := time.Now().Add(5 * time.Second)
	var log []alipaysim.NotificationAttempt
	for time.Now().Before(deadline) {
		h.controlJSON(t, "GET", "/_sim/notifications?out_trade_no=S_ctl", "", &log)
		if len(log) >= 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	kinds := map[string]alipaysim.NotificationAttempt{}
	for _, e := range log {
		kinds[e.Kind] = e
	}
	if p := kinds["payment"]; len(log) != 2 || p.OutTradeNo != "S_ctl" || p.TradeStatus != "TRADE_SUCCESS" || !p.Acknowledged || p.ResponseBody != "success" || kinds["finish"].TradeStatus != "TRADE_FINISHED" {
		t.Fatalf("notifications: %+v", log)
	}

	if code := h.controlJSON(t, "POST", "/_sim/reset", "", nil); code != 200 {
		t.Fatal(code)
	}
	if h.controlJSON(t, "GET", "/_sim/trades", "", &trades); len(trades) != 0 {
		t.Fatalf("after reset: %+v", trades)
	}
}

func TestPayOnCloseOverHTTP(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	h.precreate(t, "S_poc", "1")
	if code := h.controlJSON(t, "POST", "/_sim/trades/S_poc/pay_on_close", `{"buyer_id":"2088123"}`, nil); code != 200 {
		t.Fatal(code)
	}
	a := h.postRaw(t, nil, signedForm(t, parsePriv(t, h.keys.AppPrivateKeyPEM), "alipay.trade.close", map[string]string{"out_trade_no": "S_poc"}))
	if a.get("sub_code") != "ACQ.TRADE_STATUS_ERROR" {
		t.Fatalf("close = %v", a.fields)
	}
	tr, _ := h.sim.Trade("", "S_poc")
	if tr.TradeStatus != "TRADE_SUCCESS" || tr.BuyerID != "2088123" {
		t.Fatalf("trade = %+v", tr)
	}
}

func TestMultipleApps(t *testing.T) {
	t.Parallel()
	keys := testKeys(t)
	h := newHarness(t, func(c *alipaysim.Config) {
		c.Apps = []alipaysim.App{{AppID: "2021000000000002", SellerID: "2088000000000002", PublicKeyPEM: keys.AppPublicKeyPEM}}
	}, nil)
	key := parsePriv(t, keys.AppPrivateKeyPEM)
	for _, app := range []string{appID, "2021000000000002"} {
		f := signedForm(t, key, "alipay.trade.precreate", map[string]string{"out_trade_no": "S_same", "total_amount": "1", "subject": "s"})
		f.Set("app_id", app)
		f.Set("notify_url", h.sink.url())
		f.Set("sign", sign(t, key, canonical(f, "sign")))
		if a := h.postRaw(t, nil, f); a.get("code") != "10000" {
			t.Fatalf("%s: %v", app, a.fields)
		}
	}
	if _, err := h.sim.Pay("", "S_same", ""); !errors.Is(err, alipaysim.ErrAmbiguous) {
		t.Fatalf("ambiguous pay: %v", err)
	}
	if _, err := h.sim.Pay("2021000000000002", "S_same", ""); err != nil {
		t.Fatal(err)
	}
	d := h.sink.next(t, 5*time.Second)
	if d.form.Get("app_id") != "2021000000000002" || d.form.Get("seller_id") != "2088000000000002" {
		t.Fatalf("notification = %v", d.form)
	}
}

func TestKeys(t *testing.T) {
	t.Parallel()
	ks, err := alipaysim.GenerateKeys(2048)
	if err != nil {
		t.Fatal(err)
	}
	for name, pemText := range map[string]string{"app private": ks.AppPrivateKeyPEM, "alipay private": ks.AlipayPrivateKeyPEM} {
		if !strings.HasPrefix(pemText, "-----BEGIN PRIVATE KEY-----") {
			t.Fatalf("%s key is not PKCS#8 PEM", name)
		}
	}
	for name, pemText := range map[string]string{"app public": ks.AppPublicKeyPEM, "alipay public": ks.AlipayPublicKeyPEM} {
		if !strings.HasPrefix(pemText, "-----BEGIN PUBLIC KEY-----") {
			t.Fatalf("%s key is not PKIX PEM", name)
		}
	}
	dir := filepath.Join(t.TempDir(), "keys")
	if err := ks.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := ks.WriteDir(dir); err == nil {
		t.Fatal("WriteDir overwrote existing keys")
	}
	st, err := os.Stat(filepath.Join(dir, alipaysim.AppPrivateKeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("private key file mode: %v %v", st.Mode(), err)
	}
	back, err := alipaysim.LoadKeyDir(dir)
	if err != nil || back != ks {
		t.Fatalf("LoadKeyDir round trip: %v", err)
	}
	if _, err := alipaysim.LoadKeyDir(t.TempDir()); err == nil {
		t.Fatal("empty dir loaded")
	}

	// Bare base64 bodies, as Alipay's key tool prints them, are accepted too.
	bare := func(p string) string {
		lines := strings.Split(strings.TrimSpace(p), "\n")
		return strings.Join(lines[1:len(lines)-1], "")
	}
	sim, err := alipaysim.New(alipaysim.Config{AppPublicKeyPEM: bare(ks.AppPublicKeyPEM), AlipayPrivateKeyPEM: bare(ks.AlipayPrivateKeyPEM)})
	if err != nil {
		t.Fatal(err)
	}
	sim.Close()

	for name, cfg := range map[string]alipaysim.Config{
		"no app key":        {AlipayPrivateKeyPEM: ks.AlipayPrivateKeyPEM},
		"no alipay key":     {AppPublicKeyPEM: ks.AppPublicKeyPEM},
		"garbage app key":   {AppPublicKeyPEM: "-----BEGIN PUBLIC KEY-----\nxx\n-----END PUBLIC KEY-----", AlipayPrivateKeyPEM: ks.AlipayPrivateKeyPEM},
		"private as public": {AppPublicKeyPEM: ks.AppPrivateKeyPEM, AlipayPrivateKeyPEM: ks.AlipayPrivateKeyPEM},
	} {
		if _, err := alipaysim.New(cfg); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}
