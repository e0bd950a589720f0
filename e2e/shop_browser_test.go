package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/paykit/paykit/shop"
)

// chromium finds Debian's chromium (PAYKIT_CHROMIUM overrides). Without it the browser
// test is skipped, except in CI, whose test command installs it.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PAYKIT_CHROMIUM"); p != "" {
		return p
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed (scripts/test.sh installs Debian's chromium)")
		}
		t.Skip("chromium is not installed: apt-get install chromium")
	}
	return p
}

// browserShop is the demo shop of a new tenant on the shared stack, served for a
// headless Chromium whose context it returns, with screenshots saved under
// .artifacts/shop/ by shot.
type browserShop struct {
	url  string
	tn   tenant
	ctx  context.Context
	shot func(name string)
}

func openBrowserShop(t *testing.T) browserShop {
	t.Helper()
	bin := chromium(t)
	st := shared(t)
	tn := newTenant(t)
	var shopURL string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		shop.New(shop.Config{APIURL: st.apiURL, APIKey: tn.apiKey, PublicURL: shopURL, AmountFen: 2990, HTTP: httpClient}).ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	shopURL = srv.URL
	artifacts := filepath.Join(repoRoot(), ".artifacts", "shop")
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.WindowSize(1000, 800))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(bctx); err != nil { // start the browser without a deadline
		t.Fatalf("start chromium: %v", err)
	}
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	t.Cleanup(cancel)
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100 gives a PNG
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		path := filepath.Join(artifacts, name)
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot %s", path)
	}
	return browserShop{url: srv.URL, tn: tn, ctx: ctx, shot: shot}
}

// TestDemoShopInChromium drives the demo shop in headless Chromium as a buyer: open the
// shop, double-click Pay, exactly one payment is created, pay at the simulator's cashier,
// and Alipay's return redirect brings the buyer to a result page that shows PAID. A
// screenshot of each page is saved under .artifacts/shop/.
func TestDemoShopInChromium(t *testing.T) {
	b := openBrowserShop(t)
	ctx := b.ctx
	if err := chromedp.Do(ctx, chromedp.Navigate(b.url+"/"), chromedp.WaitVisible(chromedp.ID("checkout"))); err != nil {
		t.Fatalf("open the shop: %v", err)
	}
	orderID, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(`input[name="order_id"]`)))
	if err != nil {
		t.Fatal(err)
	}
	b.shot("1-shop.png")
	if err := chromedp.Do(ctx, chromedp.DoubleClick(chromedp.ID("pay")),
		chromedp.WaitVisible(chromedp.ID("out_trade_no"))); err != nil { // the simulator's cashier
		t.Fatalf("double-click Pay: %v", err)
	}
	b.shot("2-cashier.png")
	if n := count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND order_id = ? AND channel = 'alipay'", b.tn.id, orderID); n != 1 {
		t.Fatalf("%d Alipay payments after a double click on Pay, want 1", n)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("pay")), // the cashier's Pay
		chromedp.WaitVisible(chromedp.CSS(`#status[data-status="PAID"]`))); err != nil {
		t.Fatalf("pay at the cashier and come back: %v", err)
	}
	b.shot("3-result.png")
	t.Logf("order %s: one payment after a double click; paid at the cashier; the result page shows PAID", orderID)
}

// TestDemoShopPaysWithWechatPayInChromium is the same buyer choosing WeChat Pay: a double
// click on Pay makes one wechat_h5 payment for the browser's address, whose h5_url opens
// the WeChat Pay simulator's H5 cashier (WECHATPAY_CASHIER_BASE_URL); paying there, the
// cashier sends the buyer to the shop's redirect_url, whose result page shows PAID once
// WeChat Pay's signed notification has made it so.
func TestDemoShopPaysWithWechatPayInChromium(t *testing.T) {
	b := openBrowserShop(t)
	ctx := b.ctx
	if err := chromedp.Do(ctx, chromedp.Navigate(b.url+"/"), chromedp.WaitVisible(chromedp.ID("checkout")),
		chromedp.Click(chromedp.ID("channel-wechatpay"))); err != nil {
		t.Fatalf("open the shop and choose WeChat Pay: %v", err)
	}
	orderID, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(`input[name="order_id"]`)))
	if err != nil {
		t.Fatal(err)
	}
	b.shot("wechatpay-1-shop.png")
	if err := chromedp.Do(ctx, chromedp.DoubleClick(chromedp.ID("pay")),
		chromedp.WaitVisible(chromedp.ID("trade_type"))); err != nil { // WeChat Pay's H5 cashier
		t.Fatalf("double-click Pay: %v", err)
	}
	tradeType, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("trade_type")))
	if err != nil || tradeType != "MWEB" {
		t.Fatalf("the cashier's trade type %q (%v), want WeChat Pay's H5 (MWEB)", tradeType, err)
	}
	b.shot("wechatpay-2-cashier.png")
	if n := count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND order_id = ? AND channel = 'wechatpay' AND method = 'wechat_h5'",
		b.tn.id, orderID); n != 1 {
		t.Fatalf("%d WeChat Pay H5 payments after a double click on Pay, want 1", n)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("pay")), // the cashier's Pay
		chromedp.WaitVisible(chromedp.CSS(`#status[data-status="PAID"]`))); err != nil {
		t.Fatalf("pay at WeChat Pay's cashier and come back: %v", err)
	}
	b.shot("wechatpay-3-result.png")
	t.Logf("order %s: one WeChat Pay H5 payment after a double click; paid at the cashier; the result page shows PAID", orderID)
}
