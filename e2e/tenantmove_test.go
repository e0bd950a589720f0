package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/secrets"
)

// TestTenantMovedToANewAppFinishesItsPaymentsOnTheOld moves a tenant from its own app
// 1 to its own app 2, with `paykit tenant` while the system runs, at a moment it has a
// pending payment, a paid one and a refund still processing at Alipay, all on app 1.
// Each finishes on app 1: the pending payment is paid there after the move and its
// notification (app 1's app_id and signature) is accepted; the paid one is refunded
// after the move and the refund succeeds there; the processing refund succeeds. A payment
// opened after the move goes through app 2. Before, the move was refused; forced, the
// calls went to app 2, which knows none of these trades: the refund was answered
// not-exist and FAILED while the money sat at app 1, and app 1's notification was
// refused as of an unknown app.
func TestTenantMovedToANewAppFinishesItsPaymentsOnTheOld(t *testing.T) {
	apps := []struct {
		id, seller string
		privFile   string
		pubFile    string
	}{{id: "2021000000000071", seller: "2088000000000071"}, {id: "2021000000000072", seller: "2088000000000072"}}
	dir := t.TempDir()
	for i := range apps {
		k, err := alipaysim.GenerateKeys(2048)
		if err != nil {
			t.Fatal(err)
		}
		reg, _ := json.Marshal(map[string]string{"app_id": apps[i].id, "seller_id": apps[i].seller,
			"app_public_key": k.AppPublicKeyPEM, "alipay_private_key": k.AlipayPrivateKeyPEM})
		if r := do(t, http.MethodPost, env.simURL+"/_sim/apps", map[string]string{"Content-Type": "application/json"}, reg); r.status != http.StatusOK {
			t.Fatalf("register app %s at the simulator: HTTP %d %s", apps[i].id, r.status, r.body)
		}
		apps[i].privFile = filepath.Join(dir, apps[i].id+"_app_private_key.pem")
		apps[i].pubFile = filepath.Join(dir, apps[i].id+"_alipay_public_key.pem")
		if err := os.WriteFile(apps[i].privFile, []byte(k.AppPrivateKeyPEM), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(apps[i].pubFile, []byte(k.AlipayPublicKeyPEM), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	key, _ := secrets.NewKey("k1")
	keys := []string{"PAYKIT_SECRETS_KEYS=" + key}
	tn := tenant{id: "t" + randHex(4), apiKey: "sk_test_" + randHex(16), secret: "whsec_" + randHex(16)}
	env.merchant.setSecret(tn.id, tn.secret)
	paykitCmd(t, keys, "tenant", "-id", tn.id, "-api-key", tn.apiKey,
		"-notify-url", env.merchant.url+"/webhooks/"+tn.id, "-webhook-secret", tn.secret,
		"-alipay-app-id", apps[0].id, "-alipay-seller-id", apps[0].seller,
		"-alipay-app-private-key-file", apps[0].privFile, "-alipay-public-key-file", apps[0].pubFile)
	resetFaults(t)
	st := newStack(t, stackOptions{extraEnv: keys})

	tradeApp := func(no string) string {
		t.Helper()
		var tr struct {
			AppID string `json:"app_id"`
		}
		do(t, http.MethodGet, env.simURL+"/_sim/trades/"+no, nil, nil).json(t, &tr)
		return tr.AppID
	}
	simRefund := func(outRequestNo string) (alipaysim.Refund, bool) {
		t.Helper()
		var rs []alipaysim.Refund
		do(t, http.MethodGet, env.simURL+"/_sim/refunds", nil, nil).json(t, &rs)
		for _, r := range rs {
			if r.OutRequestNo == outRequestNo {
				return r, true
			}
		}
		return alipaysim.Refund{}, false
	}
	refund := func(no, key string, fen int64) payment.Refund {
		t.Helper()
		r := st.postRefund(t, tn, no, key, map[string]any{"amount_fen": fen})
		if r.status != http.StatusCreated && r.status != http.StatusAccepted && r.status != http.StatusOK {
			t.Fatalf("refund of %s: HTTP %d %s", no, r.status, r.body)
		}
		var rf payment.Refund
		r.json(t, &rf)
		return rf
	}

	// On app 1: a paid payment, another paid one with a refund still processing at
	// Alipay, and a pending payment whose cashier the buyer has opened.
	paid := paidPayment(t, st, tn, "o-paid-"+randHex(3), 2300)
	refunding := paidPayment(t, st, tn, "o-refunding-"+randHex(3), 1800)
	simFaultRefunds(t, map[string]any{"processing_next": 1, "settle_ms": 8000})
	processing := refund(refunding, "move-processing-"+refunding, 800)
	waitFor(t, 15*time.Second, func() bool {
		r, ok := simRefund(processing.OutRequestNo)
		return ok && r.State == alipaysim.RefundProcessing
	})
	pending := mustCheckout(t, st, tn, "", order("o-pending-"+randHex(3), 1500))
	openCashier(t, pending.PayURL)
	for _, no := range []string{paid, refunding, pending.PaymentNo} {
		if app := tradeApp(no); app != apps[0].id {
			t.Fatalf("trade %s is under app %s, want app 1 (%s)", no, app, apps[0].id)
		}
	}

	// The move, while all three are open.
	paykitCmd(t, keys, "tenant", "-id", tn.id, "-alipay-app-id", apps[1].id, "-alipay-seller-id", apps[1].seller,
		"-alipay-app-private-key-file", apps[1].privFile, "-alipay-public-key-file", apps[1].pubFile)
	time.Sleep(6 * time.Second) // past the resolvers' tenant cache (tenantTTL): every process reads app 2

	// The pending payment is paid at app 1; app 1's notification settles it.
	simPay(t, pending.PaymentNo)
	waitStatus(t, pending.PaymentNo, payment.StatusPaid, 30*time.Second)
	if n := count(t, `SELECT COUNT(*) FROM channel_notifications WHERE payment_no = ? AND verified = 1 AND outcome = 'signalled'`, pending.PaymentNo); n == 0 {
		var outcomes []string
		rows, _ := env.db.Query(`SELECT outcome FROM channel_notifications WHERE payment_no = ?`, pending.PaymentNo)
		for rows != nil && rows.Next() {
			var o string
			_ = rows.Scan(&o)
			outcomes = append(outcomes, o)
		}
		t.Fatalf("app 1's notification for %s was not accepted: %v", pending.PaymentNo, outcomes)
	}

	// The paid one is refunded after the move, at app 1.
	after := refund(paid, "move-after-"+paid, 1000)
	waitRefund(t, tn.id, after.RefundNo, payment.RefundSucceeded, 60*time.Second)
	if r, ok := simRefund(after.OutRequestNo); !ok || r.AppID != apps[0].id || r.State == alipaysim.RefundProcessing {
		t.Fatalf("the refund after the move at the simulator: %+v (found %v), want it done under app 1", r, ok)
	}

	// The refund that was processing at the move succeeds, at app 1.
	waitRefund(t, tn.id, processing.RefundNo, payment.RefundSucceeded, 60*time.Second)
	if r, ok := simRefund(processing.OutRequestNo); !ok || r.AppID != apps[0].id || r.State == alipaysim.RefundProcessing {
		t.Fatalf("the processing refund at the simulator: %+v (found %v), want it done under app 1", r, ok)
	}

	// A new payment goes through app 2.
	newer := paidPayment(t, st, tn, "o-newer-"+randHex(3), 900)
	if app := tradeApp(newer); app != apps[1].id {
		t.Fatalf("a payment opened after the move is under app %s, want app 2 (%s)", app, apps[1].id)
	}
	for no, want := range map[string]string{paid: apps[0].id, pending.PaymentNo: apps[0].id, newer: apps[1].id} {
		p, err := env.store.GetPayment(t.Context(), no)
		if err != nil || p.AlipayAppID != want {
			t.Fatalf("payment %s records app %q (%v), want %s", no, p.AlipayAppID, err, want)
		}
	}
}

// simFaultRefunds sets the simulator's refund faults (resetFaults clears them).
func simFaultRefunds(t *testing.T, body map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	if r := do(t, http.MethodPost, env.simURL+"/_sim/faults/refunds", map[string]string{"Content-Type": "application/json"}, b); r.status != http.StatusOK {
		t.Fatalf("refund faults: HTTP %d %s", r.status, r.body)
	}
}
