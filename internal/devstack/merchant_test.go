package devstack_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/alipay"
	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/alipaysim/simtest"
	"github.com/paykit/paykit/gateways"
	"github.com/paykit/paykit/internal/devstack"
	"github.com/paykit/paykit/payment"
)

// The buyer pays at the wap cashier and is redirected to the demo merchant's return
// page, which verifies the signed return parameters; changed parameters are refused.
func TestDemoMerchantVerifiesTheCashierReturn(t *testing.T) {
	_, sim := simtest.Start(t, nil)
	keys := simtest.Keys(t)
	gw, err := alipay.New(alipay.Config{
		AppID: simtest.AppID, SellerID: simtest.SellerID, AppPrivateKeyPEM: keys.AppPrivateKeyPEM,
		AlipayPublicKeyPEM: keys.AlipayPublicKeyPEM, GatewayURL: sim.URL + alipaysim.GatewayPath,
		NotifyURL: "http://127.0.0.1:1/callbacks/alipay", Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	merchant := httptest.NewServer(devstack.Merchant(slog.New(slog.DiscardHandler), gw, "whsec_demo_local_only"))
	t.Cleanup(merchant.Close)

	// Served under another host, as ALIPAY_CASHIER_BASE_URL does; the signature still holds.
	cashier, err := gateways.Alipay{GatewayURL: sim.URL + alipaysim.GatewayPath, NotifyURL: "http://127.0.0.1:1/callbacks/alipay",
		CashierBaseURL: sim.URL}.Build(simtest.AppID, simtest.SellerID,
		payment.AlipayCredentials{AppPrivateKeyPEM: keys.AppPrivateKeyPEM, AlipayPublicKeyPEM: keys.AlipayPublicKeyPEM})
	if err != nil {
		t.Fatal(err)
	}
	h, err := cashier.Open(context.Background(), payment.TradeRequest{PaymentNo: "PDEMORET", Method: payment.MethodWap, Subject: "demo", Amount: 990,
		ExpireAt: time.Now().Add(time.Hour), ReturnURL: merchant.URL + "/return"})
	payURL := h.PayURL
	if err != nil || !strings.HasPrefix(payURL, sim.URL+"/") {
		t.Fatalf("wap url %q %v", payURL, err)
	}
	resp, err := http.Get(payURL)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	tradeNo := regexp.MustCompile(`name="trade_no" value="([^"]+)"`).FindStringSubmatch(string(page))
	if tradeNo == nil {
		t.Fatalf("no cashier: %s", page)
	}
	// The default client follows the 303 to return_url, as the buyer's browser does.
	var landed *url.URL
	c := &http.Client{CheckRedirect: func(r *http.Request, _ []*http.Request) error { landed = r.URL; return nil }}
	resp, err = c.PostForm(sim.URL+alipaysim.ControlPrefix+"/cashier/pay", url.Values{"trade_no": {tradeNo[1]}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Return verified") || !strings.Contains(string(body), "PDEMORET") ||
		!strings.Contains(string(body), "9.90") || !strings.Contains(string(body), "alipay.trade.wap.pay.return") {
		t.Fatalf("return page: HTTP %d %s", resp.StatusCode, body)
	}
	q := landed.Query()
	q.Set("total_amount", "0.01")
	resp, err = http.Get(merchant.URL + "/return?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "NOT verified") {
		t.Fatalf("tampered return: HTTP %d %s", resp.StatusCode, body)
	}
}
