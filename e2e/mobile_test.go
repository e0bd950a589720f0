package e2e

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

// pendingView is GET /v1/payments/{no} with the pay link it shows while pending.
type pendingView struct {
	payment.Payment
	PayURL      string `json:"pay_url"`
	QRCode      string `json:"qr_code"`
	OrderString string `json:"order_string"`
}

func getPayment(t *testing.T, st *stack, tn tenant, no string) pendingView {
	t.Helper()
	r := do(t, http.MethodGet, st.apiURL+"/v1/payments/"+no, map[string]string{"Authorization": "Bearer " + tn.apiKey}, nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET payment %s: HTTP %d %s", no, r.status, r.body)
	}
	var v pendingView
	r.json(t, &v)
	return v
}

// merchantGateway is the merchant's own view of Alipay: the adapter with the app's keys,
// used here to verify what the cashier hands back.
func merchantGateway(t *testing.T) *alipay.Gateway {
	t.Helper()
	gw, err := alipay.New(alipay.Config{AppID: appID, SellerID: sellerID, AppPrivateKeyPEM: env.keys.AppPrivateKeyPEM,
		AlipayPublicKeyPEM: env.keys.AlipayPublicKeyPEM, GatewayURL: env.simURL + alipaysim.GatewayPath, NotifyURL: "http://127.0.0.1:1/notify"})
	if err != nil {
		t.Fatal(err)
	}
	return gw
}

// payAtCashier presses Pay on an opened cashier page and returns where the cashier sent
// the buyer (nil if it showed its own result page).
func payAtCashier(t *testing.T, page string) *url.URL {
	t.Helper()
	m := regexp.MustCompile(`name="trade_no" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no pay form on the cashier page:\n%s", page)
	}
	c := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(env.simURL+alipaysim.ControlPrefix+"/cashier/pay", url.Values{"trade_no": {m[1]}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusSeeOther:
		u, err := url.Parse(resp.Header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		return u
	case http.StatusOK:
		return nil
	}
	t.Fatalf("cashier pay: HTTP %d", resp.StatusCode)
	return nil
}

func paidOnce(t *testing.T, tn tenant, orderID, paymentNo string) {
	t.Helper()
	waitStatus(t, paymentNo, payment.StatusPaid, 30*time.Second)
	final := waitWorkflowClosed(t, payment.WorkflowID(tn.id, orderID), 30*time.Second)
	if final.Status != payment.StatusPaid || !final.BenefitGranted || !final.WebhookSent || final.PaymentNo != paymentNo {
		t.Fatalf("workflow result %+v", final)
	}
	if n := count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", paymentNo); n != 1 {
		t.Fatalf("grants = %d, want 1", n)
	}
	if hooks := env.merchant.received(tn.id); len(hooks) != 1 || !hooks[0].verified || hooks[0].typ != payment.EventPaymentPaid {
		t.Fatalf("merchant webhooks: %+v", hooks)
	}
}

// A wap payment: the checkout answers a signed wap URL, GET shows it again while pending,
// the buyer opens it on the phone, pays, and is sent back to return_url with parameters
// the merchant verifies; the payment is paid once, with its grant and webhook.
func TestWapPaymentEndToEnd(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	ord := order("wap1", 1990)
	ord["method"], ord["return_url"], ord["quit_url"] = "wap", "https://shop.example/return", "https://shop.example/cart"
	res := mustCheckout(t, st, tn, "wap-"+randHex(6), ord)
	u, err := url.Parse(res.PayURL)
	if err != nil || u.Query().Get("method") != "alipay.trade.wap.pay" || res.QRCode != "" || res.OrderString != "" {
		t.Fatalf("checkout answer %+v", res)
	}
	if v := getPayment(t, st, tn, res.PaymentNo); v.PayURL != res.PayURL || v.Method != payment.MethodWap || v.Status != payment.StatusPending {
		t.Fatalf("GET while pending: pay_url %q method %s status %s", v.PayURL, v.Method, v.Status)
	}
	page := openCashier(t, res.PayURL)
	if !strings.Contains(page, "19.90") || !strings.Contains(page, `href="https://shop.example/cart"`) {
		t.Fatalf("wap cashier lacks amount or quit_url:\n%s", page)
	}
	back := payAtCashier(t, page)
	if back == nil || !strings.HasPrefix(back.String(), "https://shop.example/return?") {
		t.Fatalf("after paying the buyer went to %v, want return_url", back)
	}
	ret, err := merchantGateway(t).VerifyReturn(context.Background(), back.Query())
	if err != nil || ret.PaymentNo != res.PaymentNo || ret.Amount != 1990 || ret.Method != "alipay.trade.wap.pay.return" || ret.TradeNo == "" {
		t.Fatalf("return %+v, %v", ret, err)
	}
	paidOnce(t, tn, "wap1", res.PaymentNo)
	if v := getPayment(t, st, tn, res.PaymentNo); v.PayURL != "" || v.Status != payment.StatusPaid || v.TradeNo != ret.TradeNo {
		t.Fatalf("GET after paid: pay_url %q status %s trade %s", v.PayURL, v.Status, v.TradeNo)
	}
}

// An app payment: the checkout answers the order string, GET shows it again while
// pending, the buyer's Alipay app submits it and pays; submitting it again pays nothing.
func TestAppPaymentEndToEnd(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	ord := order("app1", 2590)
	ord["method"] = "app"
	res := mustCheckout(t, st, tn, "app-"+randHex(6), ord)
	q, err := url.ParseQuery(res.OrderString)
	if err != nil || q.Get("method") != "alipay.trade.app.pay" || q.Get("sign") == "" || res.PayURL != "" || res.QRCode != "" {
		t.Fatalf("checkout answer %+v", res)
	}
	if v := getPayment(t, st, tn, res.PaymentNo); v.OrderString != res.OrderString || v.PayURL != "" {
		t.Fatalf("GET while pending: order_string %q pay_url %q", v.OrderString, v.PayURL)
	}
	body, _ := json.Marshal(map[string]string{"order_string": res.OrderString})
	r := do(t, http.MethodPost, env.simURL+alipaysim.ControlPrefix+"/app/pay", map[string]string{"Content-Type": "application/json"}, body)
	var paid alipaysim.AppPayResult
	r.json(t, &paid)
	if r.status != http.StatusOK || paid.ResultStatus != "9000" || paid.Trade == nil || paid.Trade.OutTradeNo != res.PaymentNo {
		t.Fatalf("app pay: HTTP %d %s", r.status, r.body)
	}
	paidOnce(t, tn, "app1", res.PaymentNo)
	again := do(t, http.MethodPost, env.simURL+alipaysim.ControlPrefix+"/app/pay", map[string]string{"Content-Type": "application/json"}, body)
	if again.status != http.StatusConflict {
		t.Fatalf("second submit: HTTP %d %s", again.status, again.body)
	}
	if v := getPayment(t, st, tn, res.PaymentNo); v.OrderString != "" || v.Status != payment.StatusPaid {
		t.Fatalf("GET after paid: order_string %q status %s", v.OrderString, v.Status)
	}
}

// A wap payment whose run was terminated is re-driven by the sweeper as a wap payment:
// the new run opens a wap cashier URL for the same payment_no, and the buyer pays with it.
func TestRedrivenWapPaymentKeepsItsMethod(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	ord := order("wap2", 990)
	ord["method"] = "wap"
	res := mustCheckout(t, st, tn, "", ord)
	wid := payment.WorkflowID(tn.id, "wap2")
	if err := env.tc.TerminateWorkflow(context.Background(), wid, "", "operator terminated it by mistake"); err != nil {
		t.Fatal(err)
	}
	state := waitRedrivenState(t, wid, 60*time.Second)
	u, err := url.Parse(state.PayURL)
	if err != nil || state.PaymentNo != res.PaymentNo || u.Query().Get("method") != "alipay.trade.wap.pay" || state.QRCode != "" || state.OrderString != "" {
		t.Fatalf("re-driven run: payment_no %s pay_url %q qr %q order_string %q; want %s with a wap URL",
			state.PaymentNo, state.PayURL, state.QRCode, state.OrderString, res.PaymentNo)
	}
	if v := getPayment(t, st, tn, res.PaymentNo); v.Method != payment.MethodWap || !strings.Contains(v.PayURL, "alipay.trade.wap.pay") {
		t.Fatalf("GET after re-drive: method %s pay_url %q", v.Method, v.PayURL)
	}
	payAtCashier(t, openCashier(t, state.PayURL))
	paidOnce(t, tn, "wap2", res.PaymentNo)
	if c := count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND order_id = 'wap2'", tn.id); c != 1 {
		t.Fatalf("payments = %d, want 1 (the re-driven run adopts the payment)", c)
	}
	if tr := simTrade(t, res.PaymentNo); tr["method"] != "alipay.trade.wap.pay" {
		t.Fatalf("alipay trade method %v, want alipay.trade.wap.pay", tr["method"])
	}
}
