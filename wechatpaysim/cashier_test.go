package wechatpaysim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/wechatpaysim"
)

func (h *harness) get(tb testing.TB, path string) (int, string) {
	tb.Helper()
	res, err := http.Get(h.srv.URL + path)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func (h *harness) postForm(tb testing.TB, path string, form url.Values) (int, string) {
	tb.Helper()
	res, err := http.PostForm(h.srv.URL+path, form)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func (h *harness) postJSON(tb testing.TB, path string, v any) (int, map[string]any) {
	tb.Helper()
	b, _ := json.Marshal(v)
	res, err := http.Post(h.srv.URL+path, "application/json", strings.NewReader(string(b)))
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

// A Native order's code_url and an H5 order's h5_url open the cashier page, whose Pay
// button pays the order.
func TestCashierPages(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	codeURL := h.place(t, "native", "CASHIER001", 1999, "https://e.com/n").json(t)["code_url"].(string)
	pr := strings.TrimPrefix(codeURL, "weixin://wxpay/bizpayurl?pr=")
	status, page := h.get(t, "/_sim/cashier/bizpayurl?pr="+pr)
	if status != 200 || !strings.Contains(page, "¥ 19.99") || !strings.Contains(page, "CASHIER001") {
		t.Fatalf("%d %s", status, page)
	}
	o, _ := h.sim.Order(mchID, "CASHIER001")
	if status, page := h.postForm(t, "/_sim/cashier/pay", url.Values{"prepay_id": {o.PrepayID}, "openid": {"o-scanner"}}); status != 200 || !strings.Contains(page, "SUCCESS") {
		t.Fatalf("pay: %d %s", status, page)
	}
	if o, _ := h.sim.Order(mchID, "CASHIER001"); o.TradeState != "SUCCESS" || o.PayerOpenID != "o-scanner" {
		t.Fatalf("%+v", o)
	}
	if status, _ := h.postForm(t, "/_sim/cashier/pay", url.Values{"prepay_id": {o.PrepayID}}); status != http.StatusConflict {
		t.Fatalf("paying twice: %d", status)
	}

	h5URL := h.place(t, "h5", "CASHIER002", 100, "https://e.com/n").json(t)["h5_url"].(string)
	u, _ := url.Parse(h5URL)
	for _, path := range []string{"/cgi-bin/mmpayweb-bin/checkmweb?" + u.RawQuery, "/_sim/cashier/checkmweb?" + u.RawQuery} {
		if status, page := h.get(t, path); status != 200 || !strings.Contains(page, "CASHIER002") {
			t.Fatalf("%s: %d %s", path, status, page)
		}
	}
	// The merchant's redirect_url, appended to h5_url, is where the Pay button sends the
	// buyer once paid; without one, the result page.
	back := "https://shop.example.com/result?order_id=42"
	status, page = h.get(t, "/cgi-bin/mmpayweb-bin/checkmweb?"+u.RawQuery+"&redirect_url="+url.QueryEscape(back))
	if status != 200 || !strings.Contains(page, `name="redirect_url" value="`+strings.ReplaceAll(back, "&", "&amp;")+`"`) {
		t.Fatalf("the H5 cashier with a redirect_url: %d %s", status, page)
	}
	o2, _ := h.sim.Order(mchID, "CASHIER002")
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noRedirect.PostForm(h.srv.URL+"/_sim/cashier/pay", url.Values{"prepay_id": {o2.PrepayID}, "redirect_url": {back}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != back {
		t.Fatalf("paid at the H5 cashier: %d to %q, want 303 to the redirect_url", res.StatusCode, res.Header.Get("Location"))
	}
	if o2, _ := h.sim.Order(mchID, "CASHIER002"); o2.TradeState != "SUCCESS" {
		t.Fatalf("after the H5 cashier: %+v", o2)
	}
	h5b := h.place(t, "h5", "CASHIER003", 100, "https://e.com/n").json(t)["h5_url"].(string)
	ub, _ := url.Parse(h5b)
	h.clock.Advance(5 * time.Minute)
	if status, _ := h.get(t, "/_sim/cashier/checkmweb?"+ub.RawQuery); status != http.StatusGone {
		t.Fatalf("an h5_url after 5 minutes: %d", status)
	}
	if status, _ := h.get(t, "/_sim/cashier/bizpayurl?pr=nope"); status != 404 {
		t.Fatalf("unknown pr: %d", status)
	}
}

// The JSAPI cashier takes what the merchant page hands WeixinJSBridge and checks paySign
// with the merchant's key before paying; only the order's payer may pay.
func TestJSAPIPaySign(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	prepayID := h.place(t, "jsapi", "JSAPIPAY01", 100, "https://e.com/n").json(t)["prepay_id"].(string)
	call := func(mod func(map[string]string)) map[string]string {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		sign, err := wechatpaysim.SignPayment(h.keys.MerchantPrivateKeyPEM, appID, ts, "NONCE123", "prepay_id="+prepayID)
		if err != nil {
			t.Fatal(err)
		}
		p := map[string]string{"appId": appID, "timeStamp": ts, "nonceStr": "NONCE123", "package": "prepay_id=" + prepayID, "signType": "RSA", "paySign": sign}
		if mod != nil {
			mod(p)
		}
		return p
	}
	tests := []struct {
		name   string
		mod    func(map[string]string)
		status int
	}{
		{"tampered nonce", func(p map[string]string) { p["nonceStr"] = "OTHER" }, 401},
		{"another appid", func(p map[string]string) { p["appId"] = "wx0000000000000000" }, 400},
		{"HMAC sign type", func(p map[string]string) { p["signType"] = "HMAC-SHA256" }, 400},
		{"another buyer", func(p map[string]string) { p["openid"] = "o-someone-else" }, 409},
	}
	for _, tc := range tests {
		if status, ans := h.postJSON(t, "/_sim/cashier/jsapi", call(tc.mod)); status != tc.status || ans["err_msg"] != "get_brand_wcpay_request:fail" {
			t.Errorf("%s: %d %v", tc.name, status, ans)
		}
	}
	status, ans := h.postJSON(t, "/_sim/cashier/jsapi", call(nil))
	if status != 200 || ans["err_msg"] != "get_brand_wcpay_request:ok" || ans["order"].(map[string]any)["trade_state"] != "SUCCESS" {
		t.Fatalf("%d %v", status, ans)
	}
	if page := func() string { _, p := h.get(t, "/_sim/cashier/jsapi?prepay_id="+prepayID); return p }(); !strings.Contains(page, "order is SUCCESS") {
		t.Fatalf("the form of a paid order: %s", page)
	}
}

// The App cashier checks sign over appid, timestamp, noncestr and prepayid, with gopay's
// lower-case keys or wechatpay-go's camelCase ones, as a form or as JSON.
func TestAppPaySign(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	for i, camel := range []bool{false, true} {
		no := "APPPAY000" + strconv.Itoa(i)
		prepayID := h.place(t, "app", no, 100, "https://e.com/n").json(t)["prepay_id"].(string)
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		sign, err := wechatpaysim.SignPayment(h.keys.MerchantPrivateKeyPEM, appID, ts, "N0NCE", prepayID)
		if err != nil {
			t.Fatal(err)
		}
		p := map[string]string{"appid": appID, "partnerid": mchID, "prepayid": prepayID, "package": "Sign=WXPay", "noncestr": "N0NCE", "timestamp": ts, "sign": sign}
		if camel {
			p = map[string]string{"appId": appID, "partnerId": mchID, "prepayId": prepayID, "packageValue": "Sign=WXPay", "package": "Sign=WXPay", "nonceStr": "N0NCE", "timeStamp": ts, "sign": sign}
		}
		bad := map[string]string{}
		for k, v := range p {
			bad[k] = v
		}
		bad["sign"] = sign[:10] + "A" + sign[11:]
		if status, ans := h.postJSON(t, "/_sim/cashier/app", bad); status != 401 || ans["errCode"] != -1.0 {
			t.Fatalf("bad sign: %d %v", status, ans)
		}
		if camel {
			if status, ans := h.postJSON(t, "/_sim/cashier/app", p); status != 200 || ans["errCode"] != 0.0 {
				t.Fatalf("camelCase JSON: %d %v", status, ans)
			}
			continue
		}
		form := url.Values{}
		for k, v := range p {
			form.Set(k, v)
		}
		if status, page := h.postForm(t, "/_sim/cashier/app", form); status != 200 || !strings.Contains(page, "SUCCESS") {
			t.Fatalf("form: %d %s", status, page)
		}
	}
	for _, o := range h.sim.Orders(mchID) {
		if o.TradeState != "SUCCESS" {
			t.Fatalf("%+v", o)
		}
	}
}
