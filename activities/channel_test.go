package activities_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/payment"
)

// OpenTrade answers each method with its own kind of pay link, keeps it with the pending
// payment, and repeating it opens no second trade.
func TestOpenTradeEveryMethodKeepsItsPayLink(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, tc := range []struct {
		method  payment.Method
		apiName string
		link    func(activities.OpenTradeResult) string
	}{
		{payment.MethodPage, "alipay.trade.page.pay", func(r activities.OpenTradeResult) string { return r.PayURL }},
		{payment.MethodWap, "alipay.trade.wap.pay", func(r activities.OpenTradeResult) string { return r.PayURL }},
		{payment.MethodApp, "alipay.trade.app.pay", func(r activities.OpenTradeResult) string { return r.OrderString }},
		{payment.MethodQR, "", func(r activities.OpenTradeResult) string { return r.QRCode }},
	} {
		in := f.createInput("open-" + string(tc.method))
		in.Method = tc.method
		var created activities.CreatePaymentResult
		if err := f.local(t, &created, f.acts.CreatePayment, in); err != nil {
			t.Fatal(err)
		}
		open := activities.OpenTradeInput{PaymentNo: in.PaymentNo, Subject: in.Subject, Amount: in.Amount, ExpireAt: in.ExpireAt,
			Method: tc.method, ReturnURL: "https://shop.example/back", QuitURL: "https://shop.example/cart"}
		var o1, o2 activities.OpenTradeResult
		if err := f.local(t, &o1, f.acts.OpenTrade, open); err != nil {
			t.Fatalf("%s: %v", tc.method, err)
		}
		if err := f.local(t, &o2, f.acts.OpenTrade, open); err != nil {
			t.Fatalf("%s again: %v", tc.method, err)
		}
		link := tc.link(o1)
		set := 0
		for _, v := range []string{o1.PayURL, o1.QRCode, o1.OrderString} {
			if v != "" {
				set++
			}
		}
		if link == "" || set != 1 {
			t.Fatalf("%s: result %+v", tc.method, o1)
		}
		if tc.apiName != "" {
			raw := link
			if i := strings.IndexByte(raw, '?'); i >= 0 {
				raw = raw[i+1:]
			}
			q, err := url.ParseQuery(raw)
			if err != nil || q.Get("method") != tc.apiName {
				t.Fatalf("%s: link %q names method %q (%v)", tc.method, link, q.Get("method"), err)
			}
			if tc.method == payment.MethodWap && !strings.Contains(q.Get("biz_content"), `"quit_url":"https://shop.example/cart"`) {
				t.Fatalf("wap link lacks quit_url: %s", q.Get("biz_content"))
			}
		}
		kept, err := f.store.PendingPayLink(ctx, f.tenantID, in.PaymentNo)
		if err != nil || kept != tc.link(o2) {
			t.Fatalf("%s: kept %q (%v), want the last link", tc.method, kept, err)
		}
	}
	if n := len(f.sim.Trades()); n != 1 {
		t.Fatalf("simulator holds %d trades, want only the precreated QR one", n)
	}
}
