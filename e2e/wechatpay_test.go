package e2e

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/wechatpaysim"
)

// wxSim calls the WeChat Pay simulator's control API and requires a 2xx.
func wxSim(t *testing.T, method, path string, body any) []byte {
	t.Helper()
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	r := do(t, method, env.wxSimURL+path, map[string]string{"Content-Type": "application/json"}, b)
	if r.status/100 != 2 {
		t.Fatalf("wechat pay simulator %s %s: HTTP %d %s", method, path, r.status, r.body)
	}
	return r.body
}

// wxCheckout is a wechat_native checkout of order id for fen, answered with WeChat Pay's
// code_url as its QR code.
func wxCheckout(t *testing.T, st *stack, tn tenant, id string, fen int64) checkoutResult {
	t.Helper()
	body := order(id, fen)
	body["method"] = string(payment.MethodWechatNative)
	res := mustCheckout(t, st, tn, "wx-"+randHex(6), body)
	if !strings.HasPrefix(res.QRCode, "weixin://wxpay/bizpayurl?pr=") || res.PayURL != "" || res.OrderString != "" {
		t.Fatalf("a wechat_native checkout answered %+v; want WeChat Pay's code_url as qr_code", res)
	}
	return res
}

// A wechat_native checkout on the deployment's WeChat Pay merchant, paid by the buyer at
// the WeChat Pay simulator: its TRANSACTION.SUCCESS notification reaches
// /callbacks/wechatpay, is answered 204 and recorded once in the inbox with its signed
// headers, and its signal makes the payment PAID once, on the channel and merchant it
// was opened on, with one payment.paid webhook.
func TestWechatPayNativePaidByItsNotification(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	res := wxCheckout(t, st, tn, "wx1001", 990)
	if n := count(t, "SELECT COUNT(*) FROM payments WHERE payment_no = ? AND channel = 'wechatpay' AND method = 'wechat_native' AND alipay_app_id = ?",
		res.PaymentNo, env.wxKeys.MchID); n != 1 {
		t.Fatalf("payments on the WeChat Pay merchant with its channel and method: %d, want 1", n)
	}
	var o wechatpaysim.Order
	if err := json.Unmarshal(wxSim(t, http.MethodGet, "/_sim/orders/"+res.PaymentNo, nil), &o); err != nil {
		t.Fatal(err)
	}
	if o.Total != 990 || o.TradeState != "NOTPAY" || o.CodeURL != res.QRCode || o.NotifyURL != st.apiURL+"/callbacks/wechatpay" {
		t.Fatalf("the order at WeChat Pay: %+v", o)
	}
	wxSim(t, http.MethodPost, "/_sim/orders/"+res.PaymentNo+"/pay", map[string]any{"openid": "o-e2e-buyer"})

	p := waitStatus(t, res.PaymentNo, payment.StatusPaid, 30*time.Second)
	final := waitWorkflowClosed(t, payment.WorkflowID(tn.id, "wx1001"), 30*time.Second)
	var attempts []wechatpaysim.NotificationAttempt
	if err := json.Unmarshal(wxSim(t, http.MethodGet, "/_sim/notifications?out_trade_no="+res.PaymentNo, nil), &attempts); err != nil {
		t.Fatal(err)
	}
	if len(attempts) == 0 || attempts[0].StatusCode != http.StatusNoContent || !attempts[0].Acknowledged {
		t.Fatalf("the simulator's deliveries %+v; want the first answered 204", attempts)
	}
	notifyID := attempts[0].ID
	if p.TradeNo == "" || p.TradeNo != attempts[0].TransactionID || p.PaidAt.IsZero() {
		t.Fatalf("paid payment %+v; want WeChat Pay's transaction_id %s and its time", p, attempts[0].TransactionID)
	}
	if final.Status != payment.StatusPaid || !final.WebhookSent || !slices.Contains(final.SeenNotifyIDs, notifyID) {
		t.Fatalf("workflow result %+v; want PAID by notification %s, its webhook sent", final, notifyID)
	}
	if n := count(t, `SELECT COUNT(*) FROM channel_notifications WHERE payment_no = ? AND channel = 'wechatpay' AND notify_id = ?
		AND verified = 1 AND raw_headers LIKE '%Wechatpay-Signature%'`, res.PaymentNo, notifyID); n != 1 {
		t.Fatalf("recorded notifications %s: %d, want 1 with its signed headers", notifyID, n)
	}
	if n := count(t, "SELECT COUNT(*) FROM channel_notifications WHERE payment_no = ?", res.PaymentNo); n != 1 {
		t.Fatalf("notification rows of the payment: %d, want 1", n)
	}
	// MarkPaid acted on the recorded notification, verified again from its row: no signal
	// went unbacked.
	if n := count(t, "SELECT COUNT(*) FROM payment_anomalies WHERE payment_no = ?", res.PaymentNo); n != 0 {
		t.Fatalf("anomalies of the payment: %d, want none", n)
	}
	if n := count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ? AND type = ?", res.PaymentNo, payment.EventPaymentPaid); n != 1 {
		t.Fatalf("payment.paid events: %d, want 1", n)
	}
	waitFor(t, 10*time.Second, func() bool { return len(env.merchant.received(tn.id)) >= 1 })
	hooks := env.merchant.received(tn.id)
	if len(hooks) != 1 || !hooks[0].verified || hooks[0].typ != payment.EventPaymentPaid {
		t.Fatalf("merchant webhooks: %+v", hooks)
	}
	got := do(t, http.MethodGet, st.apiURL+"/v1/payments/"+res.PaymentNo, map[string]string{"Authorization": "Bearer " + tn.apiKey}, nil)
	if got.status != http.StatusOK || !strings.Contains(string(got.body), `"status":"PAID"`) || !strings.Contains(string(got.body), `"method":"wechat_native"`) {
		t.Fatalf("GET payment: %d %s", got.status, got.body)
	}
}

// Every notification lost (the simulator never sends them): the WeChat Pay payment is
// PAID all the same, by the reconciler's query of WeChat Pay through the payment's
// channel, with nothing recorded in the inbox.
func TestWechatPayLostNotificationsReconciled(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	wxSim(t, http.MethodDelete, "/_sim/faults", nil)
	t.Cleanup(func() { do(t, http.MethodDelete, env.wxSimURL+"/_sim/faults", nil, nil) })
	wxSim(t, http.MethodPost, "/_sim/faults/notifications", map[string]any{"lose_next": 1000})
	res := wxCheckout(t, st, tn, "wx2001", 4200)
	wxSim(t, http.MethodPost, "/_sim/orders/"+res.PaymentNo+"/pay", map[string]any{})
	p := waitStatus(t, res.PaymentNo, payment.StatusPaid, 30*time.Second)
	final := waitWorkflowClosed(t, payment.WorkflowID(tn.id, "wx2001"), 30*time.Second)
	if c := count(t, "SELECT COUNT(*) FROM channel_notifications WHERE payment_no = ?", res.PaymentNo); c != 0 {
		t.Fatalf("a notification got through (%d); the test proves nothing", c)
	}
	if p.TradeNo == "" || final.Status != payment.StatusPaid || final.Reconciliations < 1 || len(final.SeenNotifyIDs) != 0 {
		t.Fatalf("payment %+v, final %+v; want PAID by a query", p, final)
	}
	waitFor(t, 10*time.Second, func() bool { return len(env.merchant.received(tn.id)) == 1 })
	t.Logf("every WeChat Pay notification lost: paid by reconciliation after %d queries", final.Reconciliations)
}
