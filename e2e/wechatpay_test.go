package e2e

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/wechatpaysim"
	"github.com/paykit/paykit/workflows"
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

// A wechat_jsapi checkout for a payer's openid answers the signed parameters of
// WeixinJSBridge's getBrandWCPayRequest. The simulator's JSAPI call checks them with the
// merchant's key: a call whose nonceStr was changed after signing is refused and pays
// nothing; the call as paykit signed it pays, and the notification makes the payment
// PAID once, with the order at WeChat Pay made for that openid.
func TestWechatPayJSAPIPaidThroughItsSignedCall(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	const openID = "o-e2e-jsapi-buyer"
	body := order("wx3001", 1288)
	body["method"] = string(payment.MethodWechatJSAPI)
	body["payer"] = map[string]any{"openid": openID}
	res := mustCheckout(t, st, tn, "wx-"+randHex(6), body)
	var call map[string]string
	if err := json.Unmarshal([]byte(res.OrderString), &call); err != nil || res.PayURL != "" || res.QRCode != "" {
		t.Fatalf("a wechat_jsapi checkout answered %+v (%v); want the JSAPI call's parameters as order_string", res, err)
	}
	for _, k := range []string{"appId", "timeStamp", "nonceStr", "package", "signType", "paySign"} {
		if call[k] == "" {
			t.Fatalf("JSAPI parameters %v lack %s", call, k)
		}
	}
	if call["appId"] != env.wxKeys.AppID || call["signType"] != "RSA" || !strings.HasPrefix(call["package"], "prepay_id=") {
		t.Fatalf("JSAPI parameters %v", call)
	}
	jsapi := func(c map[string]string) response {
		b, _ := json.Marshal(c)
		return do(t, http.MethodPost, env.wxSimURL+"/_sim/cashier/jsapi", map[string]string{"Content-Type": "application/json"}, b)
	}
	tampered := maps.Clone(call)
	tampered["nonceStr"] = "0" + call["nonceStr"][1:]
	if tampered["nonceStr"] == call["nonceStr"] {
		tampered["nonceStr"] = "1" + call["nonceStr"][1:]
	}
	if r := jsapi(tampered); r.status/100 == 2 || !strings.Contains(string(r.body), "get_brand_wcpay_request:fail") {
		t.Fatalf("a JSAPI call changed after signing: HTTP %d %s; want it refused", r.status, r.body)
	}
	var o wechatpaysim.Order
	if err := json.Unmarshal(wxSim(t, http.MethodGet, "/_sim/orders/"+res.PaymentNo, nil), &o); err != nil {
		t.Fatal(err)
	}
	if o.TradeState != "NOTPAY" || o.TradeType != "JSAPI" || o.OpenID != openID {
		t.Fatalf("the order at WeChat Pay after a refused call: %+v; want an unpaid JSAPI order for %s", o, openID)
	}
	if r := jsapi(call); r.status != http.StatusOK || !strings.Contains(string(r.body), "get_brand_wcpay_request:ok") {
		t.Fatalf("the JSAPI call as signed: HTTP %d %s", r.status, r.body)
	}
	p := waitStatus(t, res.PaymentNo, payment.StatusPaid, 30*time.Second)
	final := waitWorkflowClosed(t, payment.WorkflowID(tn.id, "wx3001"), 30*time.Second)
	if p.TradeNo == "" || final.Status != payment.StatusPaid || len(final.SeenNotifyIDs) == 0 || !final.WebhookSent {
		t.Fatalf("payment %+v, final %+v; want PAID by its notification, its webhook sent", p, final)
	}
	if n := count(t, "SELECT COUNT(*) FROM payments WHERE payment_no = ? AND channel = 'wechatpay' AND method = 'wechat_jsapi'", res.PaymentNo); n != 1 {
		t.Fatalf("payments on the WeChat Pay channel with method wechat_jsapi: %d, want 1", n)
	}
	if n := count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ? AND type = ?", res.PaymentNo, payment.EventPaymentPaid); n != 1 {
		t.Fatalf("payment.paid events: %d, want 1", n)
	}
}

// A WeChat Pay payment nobody pays is closed at its expiry: its run closes the order at
// WeChat Pay (CLOSED there), the payment is CLOSED here with its closed webhook, and
// nothing is paid.
func TestWechatPayUnpaidClosedAtExpiry(t *testing.T) {
	ttl := 8 * time.Second
	st := newStack(t, stackOptions{paymentTTL: ttl})
	tn := newTenant(t)
	res := wxCheckout(t, st, tn, "wx4001", 500)
	waitStatus(t, res.PaymentNo, payment.StatusClosed, ttl+30*time.Second)
	final := waitWorkflowClosed(t, payment.WorkflowID(tn.id, "wx4001"), 30*time.Second)
	var o wechatpaysim.Order
	if err := json.Unmarshal(wxSim(t, http.MethodGet, "/_sim/orders/"+res.PaymentNo, nil), &o); err != nil {
		t.Fatal(err)
	}
	if o.TradeState != "CLOSED" || final.Status != payment.StatusClosed {
		t.Fatalf("order at WeChat Pay %+v, run %+v; want both closed", o, final)
	}
	waitFor(t, 10*time.Second, func() bool { return len(env.merchant.received(tn.id)) >= 1 })
	hooks := env.merchant.received(tn.id)
	if len(hooks) != 1 || hooks[0].typ != payment.EventPaymentClosed {
		t.Fatalf("merchant webhooks: %+v; want one payment.closed", hooks)
	}
	if n := count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", res.PaymentNo); n != 0 {
		t.Fatalf("grants of a closed payment: %d", n)
	}
}

// Nothing but WeChat Pay's signed word pays. A genuine notification's signature probe
// (WECHATPAY/SIGNTEST/…) and the same notification replayed ten minutes late are each
// refused with 400 and recorded nowhere; a notification signal sent straight to
// Temporal for a pending WeChat Pay payment, with a made-up notify_id and
// transaction_id, leaves it pending with an unverified_signal anomaly; and the buyer's
// real payment afterwards is PAID with WeChat Pay's transaction_id.
func TestWechatPayForgedProbeAndReplayPayNothing(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	// A paid payment's genuine notification, probed and replayed late.
	paidRes := wxCheckout(t, st, tn, "wx5001", 700)
	wxSim(t, http.MethodPost, "/_sim/orders/"+paidRes.PaymentNo+"/pay", map[string]any{})
	waitStatus(t, paidRes.PaymentNo, payment.StatusPaid, 30*time.Second)
	var attempts []wechatpaysim.NotificationAttempt
	if err := json.Unmarshal(wxSim(t, http.MethodGet, "/_sim/notifications?out_trade_no="+paidRes.PaymentNo, nil), &attempts); err != nil || len(attempts) == 0 {
		t.Fatalf("notifications of %s: %v %v", paidRes.PaymentNo, attempts, err)
	}
	id := attempts[0].ID
	rows := count(t, "SELECT COUNT(*) FROM channel_notifications WHERE channel = 'wechatpay'")
	for _, c := range []struct{ path, body string }{{"/probe", `{}`}, {"/replay", `{"age_seconds":600}`}} {
		var a wechatpaysim.NotificationAttempt
		if err := json.Unmarshal(wxSim(t, http.MethodPost, "/_sim/notifications/"+id+c.path, json.RawMessage(c.body)), &a); err != nil {
			t.Fatal(err)
		}
		if a.StatusCode != http.StatusBadRequest || a.Acknowledged || !strings.Contains(a.ResponseBody, `"code":"FAIL"`) {
			t.Fatalf("%s of notification %s: %+v; want 400 with code FAIL", c.path, id, a)
		}
	}
	if n := count(t, "SELECT COUNT(*) FROM channel_notifications WHERE channel = 'wechatpay'"); n != rows {
		t.Fatalf("WeChat Pay notification rows: %d after the probe and the replay, %d before", n, rows)
	}

	// A forged signal straight to Temporal.
	res := wxCheckout(t, st, tn, "wx5002", 900)
	workflowID := payment.WorkflowID(tn.id, "wx5002")
	forgedID := "forged-" + randHex(4)
	out, err := exec.Command(envOr("PAYKIT_TEMPORAL_CLI", filepath.Join(repoRoot(), ".bin", "temporal")), "workflow", "signal",
		"--address", env.temporalAddr, "--namespace", "default", "--workflow-id", workflowID, "--name", workflows.NotificationSignal,
		"--input", `{"notify_id":"`+forgedID+`","payment_no":"`+res.PaymentNo+`","trade_no":"4200000000FORGED","trade_status":"SUCCESS","state":2,"amount_fen":900}`).CombinedOutput()
	if err != nil {
		t.Fatalf("temporal workflow signal: %v\n%s", err, out)
	}
	waitFor(t, 20*time.Second, func() bool {
		return count(t, "SELECT COUNT(*) FROM payment_anomalies WHERE kind = ? AND payment_no = ? AND subject = ?",
			payment.AnomalyUnverifiedSignal, res.PaymentNo, forgedID) == 1
	})
	if p, err := env.store.GetPayment(context.Background(), res.PaymentNo); err != nil || p.Status != payment.StatusPending || p.TradeNo != "" {
		t.Fatalf("payment after a forged signal: %+v %v; want pending with no transaction_id", p, err)
	}
	wxSim(t, http.MethodPost, "/_sim/orders/"+res.PaymentNo+"/pay", map[string]any{})
	p := waitStatus(t, res.PaymentNo, payment.StatusPaid, 30*time.Second)
	var o wechatpaysim.Order
	if err := json.Unmarshal(wxSim(t, http.MethodGet, "/_sim/orders/"+res.PaymentNo, nil), &o); err != nil {
		t.Fatal(err)
	}
	if p.TradeNo != o.TransactionID || o.TransactionID == "" {
		t.Fatalf("paid with transaction_id %q, want WeChat Pay's %q", p.TradeNo, o.TransactionID)
	}
	if n := count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ? AND type = ?", res.PaymentNo, payment.EventPaymentPaid); n != 1 {
		t.Fatalf("payment.paid events: %d, want 1", n)
	}
}

// One order, two channels, one charge. An order's pending Alipay payment holds the order:
// a WeChat Pay checkout of it is answered 409, naming the pending payment and telling
// the merchant to cancel it first. The cancel closes the trade at Alipay; the WeChat Pay
// checkout then opens, and the buyer pays it. The closed Alipay trade can no longer be
// paid, so the order is charged once. And a buyer who paid the Alipay trade before the
// cancel: the cancel is answered 409 already paid, and a WeChat Pay checkout of the order
// too, so no second trade is ever opened for it.
func TestOneOrderTwoChannelsOneCharge(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	checkout := func(orderID, method string) response {
		body := order(orderID, 1800)
		if method != "" {
			body["method"] = method
		}
		return st.checkout(t, tn, "two-"+randHex(6), body)
	}
	problem := func(r response) (code, detail string) {
		var p struct {
			Code   string `json:"code"`
			Detail string `json:"detail"`
		}
		r.json(t, &p)
		return p.Code, p.Detail
	}

	ali := mustCheckout(t, st, tn, "", order("two-1", 1800))
	openCashier(t, ali.PayURL)
	r := checkout("two-1", string(payment.MethodWechatNative))
	if code, detail := problem(r); r.status != http.StatusConflict || code != payment.ECONFLICT ||
		!strings.Contains(detail, ali.PaymentNo) || !strings.Contains(detail, "cancel") {
		t.Fatalf("a WeChat Pay checkout of an order pending on Alipay: HTTP %d %s; want 409 naming %s", r.status, r.body, ali.PaymentNo)
	}
	if c := do(t, http.MethodPost, st.apiURL+"/v1/payments/"+ali.PaymentNo+"/cancel", tn.auth(), nil); c.status != http.StatusOK {
		t.Fatalf("cancel: HTTP %d %s", c.status, c.body)
	}
	waitWorkflowClosed(t, payment.WorkflowID(tn.id, "two-1"), 30*time.Second)
	wx := wxCheckout(t, st, tn, "two-1", 1800)
	if late := do(t, http.MethodPost, env.simURL+"/_sim/trades/"+ali.PaymentNo+"/pay", map[string]string{"Content-Type": "application/json"}, []byte(`{}`)); late.status == http.StatusOK {
		t.Fatalf("the cancelled Alipay trade could still be paid: %s", late.body)
	}
	wxSim(t, http.MethodPost, "/_sim/orders/"+wx.PaymentNo+"/pay", map[string]any{})
	waitStatus(t, wx.PaymentNo, payment.StatusPaid, 30*time.Second)
	if p, err := env.store.GetPayment(context.Background(), ali.PaymentNo); err != nil || p.Status != payment.StatusClosed {
		t.Fatalf("the cancelled Alipay payment: %+v %v; want CLOSED", p, err)
	}
	if n := count(t, "SELECT COUNT(*) FROM payment_events WHERE tenant_id = ? AND type = ?", tn.id, payment.EventPaymentPaid); n != 1 {
		t.Fatalf("payment.paid events of the order: %d, want 1", n)
	}

	// Paid on Alipay before the cancel.
	ali2 := mustCheckout(t, st, tn, "", order("two-2", 1800))
	openCashier(t, ali2.PayURL)
	simPay(t, ali2.PaymentNo)
	if c := do(t, http.MethodPost, st.apiURL+"/v1/payments/"+ali2.PaymentNo+"/cancel", tn.auth(), nil); c.status != http.StatusConflict {
		t.Fatalf("cancel of a paid Alipay trade: HTTP %d %s; want 409", c.status, c.body)
	}
	waitStatus(t, ali2.PaymentNo, payment.StatusPaid, 30*time.Second)
	r = checkout("two-2", string(payment.MethodWechatNative))
	if code, _ := problem(r); r.status != http.StatusConflict || code != payment.EORDERPAID {
		t.Fatalf("a WeChat Pay checkout of an order paid on Alipay: HTTP %d %s; want 409 %s", r.status, r.body, payment.EORDERPAID)
	}
	if n := count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND order_id = 'two-2'", tn.id); n != 1 {
		t.Fatalf("payments of the paid order: %d, want 1 (no WeChat Pay trade opened)", n)
	}
}
