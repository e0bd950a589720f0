package alipaysim_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paykit/paykit/alipaysim"
	"github.com/smartwalle/alipay/v3"
)

var cst = time.FixedZone("CST", 8*3600)

func (h *harness) appOrderString(tb testing.TB, c *alipay.Client, no, amount string, expire time.Time) string {
	tb.Helper()
	s, err := c.TradeAppPay(alipay.TradeAppPay{Trade: alipay.Trade{
		NotifyURL: h.sink.url(), Subject: "app " + no, OutTradeNo: no, TotalAmount: amount,
		ProductCode: "QUICK_MSECURITY_PAY", TimeExpire: expire.In(cst).Format("2006-01-02 15:04:05"),
	}})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func (h *harness) appPay(tb testing.TB, orderString string) (int, alipaysim.AppPayResult) {
	tb.Helper()
	body, _ := json.Marshal(map[string]string{"order_string": orderString, "buyer_id": "2088000099998888"})
	var res alipaysim.AppPayResult
	status := h.controlJSON(tb, http.MethodPost, alipaysim.ControlPrefix+"/app/pay", string(body), &res)
	return status, res
}

// checkResult verifies that result is {"alipay_trade_app_pay_response":{…},"sign":…} signed
// by Alipay over the object's exact bytes, and returns the object's fields.
func (h *harness) checkResult(tb testing.TB, result string) map[string]string {
	tb.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(result), &top); err != nil {
		tb.Fatalf("result is not JSON: %v\n%s", err, result)
	}
	var sig string
	_ = json.Unmarshal(top["sign"], &sig)
	obj := top["alipay_trade_app_pay_response"]
	if err := verify(parsePub(tb, h.keys.AlipayPublicKeyPEM), obj, sig); err != nil {
		tb.Fatalf("result signature: %v\n%s", err, result)
	}
	var f map[string]string
	if err := json.Unmarshal(obj, &f); err != nil {
		tb.Fatal(err)
	}
	return f
}

// The Alipay app submits the order string: the trade is created and paid once, the
// merchant is notified, and the SDK's result is signed. Submitting it again pays nothing.
func TestAppPayOrderString(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	os := h.appOrderString(t, h.client, "APP_1", "12.34", time.Now().Add(time.Hour))
	if _, err := h.sim.Trade("", "APP_1"); err == nil {
		t.Fatal("trade exists before the app submitted the order string")
	}
	status, res := h.appPay(t, os)
	if status != http.StatusOK || res.ResultStatus != "9000" || res.Trade == nil ||
		res.Trade.TradeStatus != alipaysim.StatusSuccess || res.Trade.Method != "alipay.trade.app.pay" || res.Trade.TotalFen != 1234 {
		t.Fatalf("HTTP %d %+v", status, res)
	}
	f := h.checkResult(t, res.Result)
	if f["code"] != "10000" || f["out_trade_no"] != "APP_1" || f["trade_no"] != res.Trade.TradeNo || f["total_amount"] != "12.34" ||
		f["seller_id"] != sellerID || f["app_id"] != appID {
		t.Fatalf("result = %v", f)
	}
	n := h.sink.next(t, 5*time.Second)
	if n.form.Get("trade_status") != "TRADE_SUCCESS" || n.form.Get("out_trade_no") != "APP_1" || n.form.Get("buyer_id") != "2088000099998888" {
		t.Fatalf("notification = %v", n.form)
	}
	if _, err := h.client.DecodeNotification(context.Background(), n.form); err != nil {
		t.Fatalf("notification does not verify: %v", err)
	}

	status, res = h.appPay(t, os)
	if status != http.StatusConflict || res.ResultStatus != "4000" || res.Trade != nil || h.checkResult(t, res.Result)["sub_code"] != "ACQ.TRADE_HAS_SUCCESS" {
		t.Fatalf("second submit: HTTP %d %+v", status, res)
	}
	h.sink.none(t, 300*time.Millisecond)
}

// An order string the app's key did not sign, or that was changed after signing, creates
// no trade: the answer is a signed error, as the Alipay app would show.
func TestAppPayRefusesBadOrderStrings(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	good := h.appOrderString(t, h.client, "APP_2", "1.00", time.Now().Add(time.Hour))
	q, _ := url.ParseQuery(good)
	q.Set("biz_content", strings.Replace(q.Get("biz_content"), `"1.00"`, `"0.01"`, 1))
	tampered := q.Encode()

	other, err := alipaysim.GenerateKeys(2048)
	if err != nil {
		t.Fatal(err)
	}
	var page *url.URL
	foreign := h.appOrderString(t, newClient(t, h.srv.URL, other.AppPrivateKeyPEM, h.keys.AlipayPublicKeyPEM), "APP_2", "1.00", time.Now().Add(time.Hour))

	page, err = h.client.TradePagePay(alipay.TradePagePay{Trade: alipay.Trade{Subject: "p", OutTradeNo: "APP_2", TotalAmount: "1.00", ProductCode: "FAST_INSTANT_TRADE_PAY"}})
	if err != nil {
		t.Fatal(err)
	}
	expired := h.appOrderString(t, h.client, "APP_3", "1.00", time.Now().Add(-time.Minute))
	// The signed order string with a second, unsigned notify_url appended: which one would
	// be used is ambiguous, so it is refused.
	duplicated := good + "&notify_url=" + url.QueryEscape("https://attacker.example/notify")

	for _, tc := range []struct {
		name, orderString, subCode string
		status                     int
	}{
		{"tampered amount", tampered, "isv.invalid-signature", http.StatusBadRequest},
		{"signed by another key", foreign, "isv.invalid-signature", http.StatusBadRequest},
		{"not an app pay", page.RawQuery, "isv.invalid-method", http.StatusBadRequest},
		{"empty", "", "isv.invalid-parameter", http.StatusBadRequest},
		{"a parameter twice with different values", duplicated, "isv.invalid-parameter", http.StatusBadRequest},
		{"past time_expire", expired, "ACQ.TRADE_HAS_CLOSE", http.StatusGone},
	} {
		status, res := h.appPay(t, tc.orderString)
		if status != tc.status || res.ResultStatus != "4000" || res.Trade != nil {
			t.Fatalf("%s: HTTP %d %+v", tc.name, status, res)
		}
		if got := h.checkResult(t, res.Result)["sub_code"]; got != tc.subCode {
			t.Fatalf("%s: sub_code %q, want %q", tc.name, got, tc.subCode)
		}
	}
	if trades := h.sim.Trades(); len(trades) != 0 {
		t.Fatalf("trades created by refused order strings: %+v", trades)
	}
	h.sink.none(t, 200*time.Millisecond)
}

// The wap cashier: opening the signed URL creates the trade and shows the quit_url; Pay
// sends the buyer to return_url with Alipay's signed synchronous-return parameters.
func TestWapCashierReturnsSignedParameters(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	u, err := h.client.TradeWapPay(alipay.TradeWapPay{
		Trade: alipay.Trade{NotifyURL: h.sink.url(), ReturnURL: "https://shop.example/return", Subject: "wap",
			OutTradeNo: "WAP_1", TotalAmount: "8.80", ProductCode: "QUICK_WAP_WAY"},
		QuitURL:    "https://shop.example/cart",
		TimeExpire: time.Now().Add(time.Hour).In(cst).Format("2006-01-02 15:04:05"),
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `id="quit" href="https://shop.example/cart"`) {
		t.Fatalf("cashier: HTTP %d\n%s", resp.StatusCode, page)
	}
	tr, err := h.sim.Trade("", "WAP_1")
	if err != nil || tr.Method != "alipay.trade.wap.pay" || tr.QuitURL != "https://shop.example/cart" {
		t.Fatalf("trade = %+v, %v", tr, err)
	}
	tradeNo := regexp.MustCompile(`name="trade_no" value="([^"]+)"`).FindStringSubmatch(page)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = noFollow.PostForm(h.srv.URL+alipaysim.ControlPrefix+"/cashier/pay", url.Values{"trade_no": {tradeNo[1]}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || loc == nil || !strings.HasPrefix(loc.String(), "https://shop.example/return?") {
		t.Fatalf("pay: HTTP %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	q := loc.Query()
	for k, want := range map[string]string{
		"method": "alipay.trade.wap.pay.return", "out_trade_no": "WAP_1", "trade_no": tr.TradeNo, "total_amount": "8.80",
		"seller_id": sellerID, "app_id": appID, "charset": "utf-8", "version": "1.0", "sign_type": "RSA2",
	} {
		if q.Get(k) != want {
			t.Fatalf("%s = %q, want %q (%v)", k, q.Get(k), want, q)
		}
	}
	if _, err := time.ParseInLocation("2006-01-02 15:04:05", q.Get("timestamp"), cst); err != nil {
		t.Fatalf("timestamp %q: %v", q.Get("timestamp"), err)
	}
	// Signed like a notification: every field but sign and sign_type.
	pub := parsePub(t, h.keys.AlipayPublicKeyPEM)
	if err := verify(pub, []byte(canonical(q, "sign", "sign_type")), q.Get("sign")); err != nil {
		t.Fatalf("return signature: %v", err)
	}
	if verify(pub, []byte(canonical(q, "sign")), q.Get("sign")) == nil {
		t.Fatal("return signature covers sign_type")
	}
	if err := h.client.VerifySign(context.Background(), q); err != nil {
		t.Fatalf("smartwalle VerifySign: %v", err)
	}
	q.Set("total_amount", "0.01")
	if h.client.VerifySign(context.Background(), q) == nil {
		t.Fatal("tampered return parameters verify")
	}
}

// The same order string submitted by many Alipay apps at once (a buyer tapping Pay
// repeatedly): exactly one submission pays, one trade exists and one TRADE_SUCCESS
// notification goes out.
func TestAppPayConcurrentSubmissionsPayOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	os := h.appOrderString(t, h.client, "APP_RACE", "5.00", time.Now().Add(time.Hour))
	const n = 16
	var wg sync.WaitGroup
	statuses := make([]int, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, statuses[i] = h.sim.AppPay(os, "")
		}()
	}
	close(start)
	wg.Wait()
	paid := 0
	for _, s := range statuses {
		switch s {
		case http.StatusOK:
			paid++
		case http.StatusConflict:
		default:
			t.Fatalf("statuses %v", statuses)
		}
	}
	if paid != 1 || len(h.sim.Trades()) != 1 {
		t.Fatalf("%d submissions paid (statuses %v), %d trades; want exactly one", paid, statuses, len(h.sim.Trades()))
	}
	if d := h.sink.next(t, 5*time.Second); d.form.Get("trade_status") != "TRADE_SUCCESS" {
		t.Fatalf("notification %v", d.form)
	}
	h.sink.none(t, 300*time.Millisecond)
}
