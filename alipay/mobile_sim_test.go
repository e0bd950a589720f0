package alipay_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/alipay"
	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/payment"
)

func bizOf(t *testing.T, q url.Values) map[string]any {
	t.Helper()
	var biz map[string]any
	if err := json.Unmarshal([]byte(q.Get("biz_content")), &biz); err != nil {
		t.Fatal(err)
	}
	return biz
}

// TestWapPayRoundTrip: WapPayURL → the phone's browser opens the cashier → Pay → the
// return_url redirect, whose signed parameters VerifyReturn accepts → the notification.
func TestWapPayRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	expire := time.Date(2099, 1, 2, 3, 4, 5, 0, time.UTC)
	req := payment.TradeRequest{PaymentNo: "P_wap", Subject: "wap", Amount: 1990, ExpireAt: expire,
		ReturnURL: "https://shop.example/return", QuitURL: "https://shop.example/cart"}
	payURL, err := e.gw.WapPayURL(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(payURL)
	q := u.Query()
	biz := bizOf(t, q)
	// time_expire must survive TradeWapPay's own field of that name.
	if q.Get("method") != "alipay.trade.wap.pay" || biz["product_code"] != "QUICK_WAP_WAY" || biz["time_expire"] != "2099-01-02 11:04:05" ||
		biz["quit_url"] != req.QuitURL || q.Get("return_url") != req.ReturnURL || q.Get("notify_url") != e.sink.URL() {
		t.Fatalf("wap url: %v biz %v", q, biz)
	}
	if tr, err := e.gw.Query(ctx, req.PaymentNo); err != nil || tr.State != payment.TradeNotExist {
		t.Fatalf("query before open = %+v, %v", tr, err)
	}
	status, page := get(t, payURL)
	if status != http.StatusOK || !strings.Contains(page, req.QuitURL) {
		t.Fatalf("cashier: HTTP %d\n%s", status, page)
	}
	tradeNo := regexp.MustCompile(`name="trade_no" value="([^"]+)"`).FindStringSubmatch(page)
	resp, err := noRedirect().PostForm(e.srv.URL+alipaysim.ControlPrefix+"/cashier/pay", url.Values{"trade_no": {tradeNo[1]}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ret, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || ret == nil || !strings.HasPrefix(ret.String(), req.ReturnURL+"?") {
		t.Fatalf("pay: HTTP %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	r, err := e.gw.VerifyReturn(ctx, ret.Query())
	if err != nil {
		t.Fatal(err)
	}
	if r.Method != "alipay.trade.wap.pay.return" || r.PaymentNo != req.PaymentNo || r.TradeNo != tradeNo[1] || r.Amount != 1990 ||
		r.AppID != testAppID || r.SellerID != testSellerID || r.Timestamp.IsZero() {
		t.Fatalf("return = %+v", r)
	}
	note, err := e.gw.DecodeForm(ctx, e.sink.next(t, 5*time.Second).form)
	if err != nil || note.State != payment.TradePaid || note.PaymentNo != req.PaymentNo {
		t.Fatalf("notification = %+v, %v", note, err)
	}
}

// TestVerifyReturnRefusals: changed, unsigned, foreign or non-return parameters are refused.
func TestVerifyReturnRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	req := tradeReq("P_ret", 500)
	req.ReturnURL = "https://shop.example/return"
	payURL, err := e.gw.PagePayURL(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	_, page := get(t, payURL)
	tradeNo := regexp.MustCompile(`name="trade_no" value="([^"]+)"`).FindStringSubmatch(page)
	resp, err := noRedirect().PostForm(e.srv.URL+alipaysim.ControlPrefix+"/cashier/pay", url.Values{"trade_no": {tradeNo[1]}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ret, _ := url.Parse(resp.Header.Get("Location"))
	good := ret.Query()
	if r, err := e.gw.VerifyReturn(ctx, good); err != nil || r.Method != "alipay.trade.page.pay.return" || r.Amount != 500 {
		t.Fatalf("page return = %+v, %v", r, err)
	}
	notification := e.sink.next(t, 5*time.Second).form

	with := func(k, v string) url.Values {
		c := url.Values{}
		for key, vals := range good {
			c[key] = append([]string(nil), vals...)
		}
		if v == "" {
			c.Del(k)
		} else {
			c.Set(k, v)
		}
		return c
	}
	other, err := alipay.New(alipay.Config{AppID: "2021000000000999", SellerID: testSellerID,
		AppPrivateKeyPEM: e.keys.AppPrivateKeyPEM, AlipayPublicKeyPEM: e.keys.AlipayPublicKeyPEM,
		GatewayURL: e.srv.URL + alipaysim.GatewayPath, NotifyURL: e.sink.URL()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		gw   *alipay.Gateway
		q    url.Values
		code string
	}{
		{"amount changed", e.gw, with("total_amount", "0.01"), payment.EBADSIGNATURE},
		{"out_trade_no changed", e.gw, with("out_trade_no", "P_other"), payment.EBADSIGNATURE},
		{"unsigned", e.gw, with("sign", ""), payment.EBADSIGNATURE},
		{"sign_type RSA", e.gw, with("sign_type", "RSA"), payment.EBADSIGNATURE},
		{"another app's gateway", other, good, payment.EUNPROCESSABLE},
		{"a notification is not a return", e.gw, notification, payment.EINVALID},
		{"empty", e.gw, url.Values{}, payment.EBADSIGNATURE},
	} {
		if _, err := tc.gw.VerifyReturn(ctx, tc.q); payment.ErrorCode(err) != tc.code {
			t.Fatalf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
}

// TestAppPayOrderStringRoundTrip: the order string is what the Alipay app SDK takes; the
// simulated Alipay app verifies and pays it, and the adapter sees the trade paid.
func TestAppPayOrderStringRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	req := payment.TradeRequest{PaymentNo: "P_app", Subject: "app", Amount: 100, ExpireAt: time.Date(2099, 1, 2, 3, 4, 5, 0, time.UTC),
		ReturnURL: "https://shop.example/return"}
	os, err := e.gw.AppPayOrderString(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	q, err := url.ParseQuery(os)
	if err != nil {
		t.Fatal(err)
	}
	biz := bizOf(t, q)
	if q.Get("method") != "alipay.trade.app.pay" || biz["product_code"] != "QUICK_MSECURITY_PAY" || biz["time_expire"] != "2099-01-02 11:04:05" ||
		q.Get("return_url") != "" || q.Get("notify_url") != e.sink.URL() || q.Get("sign") == "" || q.Get("app_id") != testAppID {
		t.Fatalf("order string: %v biz %v", q, biz)
	}
	if tr, err := e.gw.Query(ctx, req.PaymentNo); err != nil || tr.State != payment.TradeNotExist {
		t.Fatalf("query before the app = %+v, %v", tr, err)
	}
	res, status := e.sim.AppPay(os, "")
	if status != http.StatusOK || res.ResultStatus != "9000" {
		t.Fatalf("app pay: %d %+v", status, res)
	}
	if tr, err := e.gw.Query(ctx, req.PaymentNo); err != nil || tr.State != payment.TradePaid || tr.Amount != 100 {
		t.Fatalf("query after the app = %+v, %v", tr, err)
	}
	if _, err := e.gw.AppPayOrderString(ctx, payment.TradeRequest{PaymentNo: "P_app2", Subject: "x", Amount: 100, ExpireAt: time.Now().Add(-time.Second)}); err == nil || payment.IsRetryable(err) {
		t.Fatalf("expired app pay: %v", err)
	}
}
