package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/paykit/paykit/gateways"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/payment/paymenttest"
)

// appGateway verifies notifications of one app: signed with its key (sign == key) and
// naming its app_id, as the Alipay adapter does.
type appGateway struct {
	paymenttest.Gateway
	appID, key string
}

func (g appGateway) DecodeNotification(_ context.Context, raw payment.RawNotification) (payment.Notification, error) {
	form, _ := url.ParseQuery(string(raw.Body))
	if form.Get("sign") != g.key {
		return payment.Notification{}, &payment.Error{Code: payment.EBADSIGNATURE, Message: "bad signature"}
	}
	if form.Get("app_id") != g.appID {
		return payment.Notification{}, payment.Errorf(payment.EUNPROCESSABLE, "not our app")
	}
	amt, _ := payment.ParseYuan(form.Get("total_amount"))
	return payment.Notification{NotifyID: form.Get("notify_id"), PaymentNo: form.Get("out_trade_no"), TradeNo: "T1",
		TradeStatus: "TRADE_SUCCESS", State: payment.TradePaid, TotalAmount: amt, AppID: g.appID, SellerID: "seller"}, nil
}

// twoApps is the Alipay channel of the tenant t1 on app "app", another tenant's app "appB", and "appOld", the
// app t1 has moved away from and whose keys it keeps.
type twoApps struct{}

func (twoApps) For(context.Context, string) (payment.App, error) {
	return payment.App{ID: "app", AppID: "app", SellerID: "seller", Gateway: appGateway{appID: "app", key: "key-a"}}, nil
}

func (twoApps) ForPayment(_ context.Context, tenantID, appID string) (payment.App, error) {
	switch {
	case tenantID == "t1" && appID == "appOld":
		return payment.App{ID: "appOld", AppID: "appOld", SellerID: "seller", Gateway: appGateway{appID: "appOld", key: "key-old"}}, nil
	case tenantID == "t1" && appID == "app":
		return payment.App{ID: "app", AppID: "app", SellerID: "seller", Gateway: appGateway{appID: "app", key: "key-a"}}, nil
	}
	return payment.App{}, &payment.Error{Code: payment.ENOTFOUND, Message: "no such app", Err: payment.ErrNotFound}
}

func (twoApps) ForApp(_ context.Context, appID string) (payment.Gateway, error) {
	switch appID {
	case "app":
		return appGateway{appID: "app", key: "key-a"}, nil
	case "appB":
		return appGateway{appID: "appB", key: "key-b"}, nil
	case "appOld":
		return appGateway{appID: "appOld", key: "key-old"}, nil
	}
	return nil, &payment.Error{Code: payment.ENOTFOUND, Message: "no such app", Err: payment.ErrNotFound}
}

// TestNotificationIsRoutedByAppID: a notification is verified with the key of the app it
// names only; an unknown app and a signature of another app are refused (not "success")
// and recorded; app B's valid notification naming tenant A's payment is Alipay's own word,
// acknowledged on its record and settled on an anomaly. None of them reaches a workflow.
// A payment opened on the app its tenant has since left is settled by that app's
// notification only, not by the tenant's current app's.
func TestNotificationIsRoutedByAppID(t *testing.T) {
	cases := []struct {
		name, appID, sign string
		paymentApp        string // the app the payment was opened on
		ok, signalled     bool
		outcome           string
		verified          bool
	}{
		{"unknown app_id", "2021999", "key-a", "app", false, false, "rejected: app_id", false},
		{"A's app_id signed with B's key", "app", "key-b", "app", false, false, "rejected: bad_signature", false},
		{"B's valid notification naming A's payment", "appB", "key-b", "app", true, false, "rejected: app_id or seller_id mismatch", true},
		{"A's own", "app", "key-a", "app", true, true, "signalled", true},
		{"the old app's, for a payment opened on it before the move", "appOld", "key-old", "appOld", true, true, "signalled", true},
		{"the current app's, for a payment opened on the old app", "app", "key-a", "appOld", true, false, "rejected: app_id or seller_id mismatch", true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, st, orch := newServerWith(t, serverOptions{gateways: gateways.Channels{payment.ChannelAlipay: twoApps{}}})
			st.Mu.Lock()
			p := st.ByNo["P1"]
			p.AlipayAppID = c.paymentApp
			st.ByNo["P1"] = p
			st.Mu.Unlock()
			form := url.Values{"notify_id": {fmt.Sprintf("n%d", i)}, "app_id": {c.appID}, "out_trade_no": {"P1"},
				"total_amount": {"9.90"}, "sign": {c.sign}}
			resp, body := post(t, srv.URL+"/callbacks/alipay", form.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
			if resp.StatusCode != http.StatusOK || (body == "success") != c.ok {
				t.Fatalf("answer HTTP %d %q, want success=%v", resp.StatusCode, body, c.ok)
			}
			n := st.note(t, 0, func(n payment.ChannelNotification) bool { return !n.Verified || n.Outcome != "received" })
			st.Mu.Lock()
			defer st.Mu.Unlock()
			if len(st.notes) != 1 {
				t.Fatalf("recorded %d notifications, want 1", len(st.notes))
			}
			if n.Verified != c.verified || !strings.HasPrefix(n.Outcome, c.outcome) || n.PaymentNo != "P1" {
				t.Fatalf("recorded %+v, want verified=%v outcome %q…", n, c.verified, c.outcome)
			}
			orch.mu.Lock()
			defer orch.mu.Unlock()
			if c.verified && !c.signalled && (n.SettledAt.IsZero() || len(st.anomalies) != 1) {
				t.Fatalf("B's notification: %+v, anomalies %+v; want it settled on an anomaly", n, st.anomalies)
			}
			if want := map[bool]int{true: 1, false: 0}[c.signalled]; orch.signals != want {
				t.Fatalf("%d signals to the workflow, want %d", orch.signals, want)
			}
		})
	}
}

// ForNotification is ForApp of the app_id the notification's form names.
func (a twoApps) ForNotification(ctx context.Context, raw payment.RawNotification) (payment.Gateway, error) {
	form, err := url.ParseQuery(string(raw.Body))
	if err != nil {
		return nil, err
	}
	gw, err := a.ForApp(ctx, form.Get("app_id"))
	if err != nil {
		return nil, fmt.Errorf("app_id %q: %w", form.Get("app_id"), err)
	}
	return gw, nil
}
