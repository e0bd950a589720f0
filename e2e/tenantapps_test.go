package e2e

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/alipay"
	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/secrets"
)

// TestTenantsWithTheirOwnAlipayApps runs two tenants in one system: A on the default
// app of the environment, B on its own Alipay app, whose keys (app and Alipay) differ,
// set with `paykit tenant` and sealed at rest. Both are paid and refunded, each through
// its own app; B's app can neither query nor close nor pay A's trade; a notification
// validly signed for B but naming A's payment is refused and recorded; A's API key sees
// nothing of B's; the keys are rotated and re-encrypted while the system runs; and B's
// private key appears in no log.
func TestTenantsWithTheirOwnAlipayApps(t *testing.T) {
	const appB, sellerB = "2021000000000088", "2088000000000088"
	ctx := context.Background()
	kb, err := alipaysim.GenerateKeys(2048)
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := json.Marshal(map[string]string{"app_id": appB, "seller_id": sellerB, "app_public_key": kb.AppPublicKeyPEM, "alipay_private_key": kb.AlipayPrivateKeyPEM})
	if r := do(t, http.MethodPost, env.simURL+"/_sim/apps", map[string]string{"Content-Type": "application/json"}, reg); r.status != http.StatusOK {
		t.Fatalf("register app B at the simulator: HTTP %d %s", r.status, r.body)
	}
	k1, _ := secrets.NewKey("k1")
	k2, _ := secrets.NewKey("k2")

	// Tenant B through the command, as an operator sets it.
	dir := t.TempDir()
	privFile, pubFile := filepath.Join(dir, "app_private_key.pem"), filepath.Join(dir, "alipay_public_key.pem")
	if err := os.WriteFile(privFile, []byte(kb.AppPrivateKeyPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pubFile, []byte(kb.AlipayPublicKeyPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	a := newTenant(t)
	b := tenant{id: "t" + randHex(4), apiKey: "sk_test_" + randHex(16), secret: "whsec_" + randHex(16)}
	env.merchant.setSecret(b.id, b.secret)
	cmdOut := paykitCmd(t, []string{"PAYKIT_SECRETS_KEYS=" + k1}, "tenant", "-id", b.id, "-api-key", b.apiKey,
		"-notify-url", env.merchant.url+"/webhooks/"+b.id, "-webhook-secret", b.secret,
		"-alipay-app-id", appB, "-alipay-seller-id", sellerB,
		"-alipay-app-private-key-file", privFile, "-alipay-public-key-file", pubFile)
	var sealed string
	if err := env.db.QueryRowContext(ctx, `SELECT alipay_credentials FROM tenants WHERE id = ?`, b.id).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	keyLine := pemBodyLine(kb.AppPrivateKeyPEM)
	if !strings.HasPrefix(sealed, "pks1:k1:") || strings.Contains(sealed, keyLine) || strings.Contains(sealed, "PRIVATE KEY") {
		t.Fatalf("tenant B's keys at rest: %.40q…", sealed)
	}

	// The system runs with k2 first (a rotation under way); k1 still opens B's keys.
	st := newStack(t, stackOptions{extraEnv: []string{"PAYKIT_SECRETS_KEYS=" + k2 + "," + k1}})
	noA := paidPayment(t, st, a, "o-a-"+randHex(3), 1200)
	noB := paidPayment(t, st, b, "o-b-"+randHex(3), 3400)
	for no, app := range map[string]string{noA: appID, noB: appB} {
		var tr struct {
			AppID string `json:"app_id"`
		}
		do(t, http.MethodGet, env.simURL+"/_sim/trades/"+no, nil, nil).json(t, &tr)
		if tr.AppID != app {
			t.Fatalf("trade %s is under app %s, want %s", no, tr.AppID, app)
		}
		// Each payment's notification reached the API and verified with its app's key.
		if n := count(t, `SELECT COUNT(*) FROM channel_notifications WHERE payment_no = ? AND verified = 1`, no); n == 0 {
			t.Fatalf("no verified notification for %s (app %s)", no, app)
		}
	}

	// Re-encrypt under k2 while the system runs: it goes on with B's app.
	out := paykitCmd(t, []string{"PAYKIT_SECRETS_KEYS=" + k2 + "," + k1}, "tenant", "-reencrypt")
	if !strings.Contains(out, "re-encrypted") {
		t.Fatalf("reencrypt said %q", out)
	}
	cmdOut += out
	if err := env.db.QueryRowContext(ctx, `SELECT alipay_credentials FROM tenants WHERE id = ?`, b.id).Scan(&sealed); err != nil || !strings.HasPrefix(sealed, "pks1:k2:") {
		t.Fatalf("after -reencrypt: %.12q, %v", sealed, err)
	}
	noB2 := paidPayment(t, st, b, "o-b2-"+randHex(3), 500)

	// Refunds go through each tenant's own app.
	for _, c := range []struct {
		tn tenant
		no string
	}{{a, noA}, {b, noB}} {
		r := st.postRefund(t, c.tn, c.no, "tenant-apps-refund-"+c.no, map[string]any{"amount_fen": 100})
		if r.status != http.StatusCreated && r.status != http.StatusAccepted && r.status != http.StatusOK {
			t.Fatalf("refund of %s: HTTP %d %s", c.no, r.status, r.body)
		}
		var rf payment.Refund
		r.json(t, &rf)
		waitRefund(t, c.tn.id, rf.RefundNo, payment.RefundSucceeded, 30*time.Second)
		// A's key gives nothing of B's: not its refund, not its payment.
		if c.tn.id == b.id {
			authA := map[string]string{"Authorization": "Bearer " + a.apiKey}
			for _, path := range []string{"/v1/refunds/" + rf.RefundNo, "/v1/payments/" + c.no, "/v1/payments/" + c.no + "/refunds"} {
				if g := do(t, http.MethodGet, st.apiURL+path, authA, nil); g.status != http.StatusNotFound {
					t.Fatalf("A's key GET %s: HTTP %d %s, want 404", path, g.status, g.body)
				}
			}
			if g := st.postRefund(t, a, c.no, "", map[string]any{"amount_fen": 100, "refund_no": "cross-" + c.no}); g.status != http.StatusNotFound {
				t.Fatalf("A's key refunds B's payment: HTTP %d %s, want 404", g.status, g.body)
			}
		}
	}

	// B's app against A's pending trade: it does not exist for B.
	pending := mustCheckout(t, st, a, "", map[string]any{"order_id": "o-a-pending-" + randHex(3), "amount_fen": 700, "subject": "pending", "method": "qr"})
	gwB, err := alipay.New(alipay.Config{AppID: appB, SellerID: sellerB, AppPrivateKeyPEM: kb.AppPrivateKeyPEM,
		AlipayPublicKeyPEM: kb.AlipayPublicKeyPEM, GatewayURL: env.simURL + "/gateway.do", NotifyURL: "http://127.0.0.1:9/callbacks/alipay"})
	if err != nil {
		t.Fatal(err)
	}
	if tr, err := gwB.Query(ctx, pending.PaymentNo); err != nil || tr.State != payment.TradeNotExist {
		t.Fatalf("B queries A's trade: %+v, %v", tr, err)
	}
	if out, err := gwB.Close(ctx, pending.PaymentNo); err != nil || out != payment.CloseNotExist {
		t.Fatalf("B closes A's trade: %v, %v", out, err)
	}
	if _, err := gwB.Refund(ctx, payment.RefundRequest{PaymentNo: noA, OutRequestNo: "x" + randHex(4), Amount: 100}); err == nil {
		t.Fatal("B refunded A's paid trade")
	}
	if r := do(t, http.MethodPost, env.simURL+"/_sim/trades/"+pending.PaymentNo+"/pay", map[string]string{"Content-Type": "application/json"},
		[]byte(`{"app_id":"`+appB+`"}`)); r.status != http.StatusNotFound {
		t.Fatalf("paying A's trade as app B: HTTP %d %s", r.status, r.body)
	}

	// A notification validly signed with B's Alipay key, naming A's pending payment.
	forged := url.Values{}
	for _, kv := range [][2]string{
		{"notify_id", "forged-" + randHex(6)}, {"notify_type", "trade_status_sync"}, {"charset", "utf-8"}, {"version", "1.0"},
		{"notify_time", time.Now().In(time.FixedZone("CST", 8*3600)).Format("2006-01-02 15:04:05")},
		{"app_id", appB}, {"seller_id", sellerB}, {"out_trade_no", pending.PaymentNo}, {"trade_no", "2026" + randHex(10)},
		{"trade_status", "TRADE_SUCCESS"}, {"total_amount", "7.00"}, {"buyer_id", "2088000000009999"},
	} {
		forged.Set(kv[0], kv[1])
	}
	signNotification(t, kb.AlipayPrivateKeyPEM, forged)
	unknown := url.Values{}
	for k, v := range forged {
		unknown[k] = v
	}
	unknown.Set("notify_id", "unknown-"+randHex(6))
	unknown.Set("app_id", "2021000000000099")
	signNotification(t, kb.AlipayPrivateKeyPEM, unknown)
	// B's is Alipay's own word (it verifies with B's key): acknowledged on its record and
	// settled on an anomaly. The unknown app's does not verify: refused.
	for _, c := range []struct {
		form     url.Values
		verified int
		outcome  string
	}{{forged, 1, "rejected: app_id or seller_id mismatch"}, {unknown, 0, "rejected: app_id"}} {
		r := do(t, http.MethodPost, st.apiURL+"/callbacks/alipay", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, []byte(c.form.Encode()))
		if r.status != http.StatusOK || (string(r.body) == "success") != (c.verified == 1) {
			t.Fatalf("notification for app %s: HTTP %d %q, want success=%v", c.form.Get("app_id"), r.status, r.body, c.verified == 1)
		}
		if c.verified == 1 {
			waitFor(t, 10*time.Second, func() bool {
				return count(t, "SELECT COUNT(*) FROM channel_notifications WHERE notify_id = ? AND settled_at IS NOT NULL", c.form.Get("notify_id")) == 1
			})
		}
		var verified int
		var outcome string
		// A verified row claims its notify_id; an unverified one keeps it NULL, so that
		// it can never claim a genuine one.
		q := `SELECT verified, outcome FROM channel_notifications WHERE notify_id = ?`
		arg := c.form.Get("notify_id")
		if c.verified == 0 {
			q = `SELECT verified, outcome FROM channel_notifications WHERE payment_no = ? AND verified = 0 ORDER BY id DESC LIMIT 1`
			arg = pending.PaymentNo
		}
		if err := env.db.QueryRowContext(ctx, q, arg).Scan(&verified, &outcome); err != nil {
			t.Fatalf("notification %s not recorded: %v", c.form.Get("notify_id"), err)
		}
		if verified != c.verified || !strings.HasPrefix(outcome, c.outcome) {
			t.Fatalf("recorded verified=%d outcome %q, want %d %q…", verified, outcome, c.verified, c.outcome)
		}
	}
	time.Sleep(1500 * time.Millisecond) // a reconcile tick: the pending payment stays unpaid
	if p, _ := env.store.GetPayment(ctx, pending.PaymentNo); p.Status != payment.StatusPending {
		t.Fatalf("A's payment after B's notification: %s", p.Status)
	}
	waitStatus(t, noB2, payment.StatusPaid, time.Second)

	// B's private key is in no log line of the API, the worker or the command.
	for _, p := range []*proc{st.api, st.worker} {
		b, err := os.ReadFile(p.logPath)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), keyLine) || strings.Contains(string(b), "PRIVATE KEY") {
			t.Fatalf("%s logged the private key", p.name)
		}
	}
	if strings.Contains(cmdOut, keyLine) {
		t.Fatal("paykit tenant printed the private key")
	}
}

// paykitCmd runs the paykit binary against the test database and returns its output.
func paykitCmd(t *testing.T, extraEnv []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(env.paykitBin, args...)
	cmd.Env = append(os.Environ(), append([]string{"PAYKIT_MYSQL_DSN=" + env.dsn, "ALIPAY_APP_ID=" + appID, "ALIPAY_SELLER_ID=" + sellerID,
		"PAYKIT_WEBHOOK_ALLOW_HTTP=true", "PAYKIT_WEBHOOK_ALLOW_PRIVATE=true"}, extraEnv...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("paykit %s: %v\n%s", args[0], err, out)
	}
	return string(out)
}

// pemBodyLine is a line from the middle of a PEM body, to look for in logs.
func pemBodyLine(p string) string {
	lines := strings.Split(strings.TrimSpace(p), "\n")
	return lines[len(lines)/2]
}

// signNotification signs a notification form as Alipay does: RSA2 over the sorted
// k=v pairs of every non-empty field but sign and sign_type.
func signNotification(t *testing.T, privPEM string, form url.Values) {
	t.Helper()
	blk, _ := pem.Decode([]byte(privPEM))
	if blk == nil {
		t.Fatal("no PEM")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	form.Del("sign")
	form.Del("sign_type")
	keys := make([]string, 0, len(form))
	for k := range form {
		if form.Get(k) != "" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + form.Get(k)
	}
	sum := sha256.Sum256([]byte(strings.Join(parts, "&")))
	sig, err := rsa.SignPKCS1v15(rand.Reader, k.(*rsa.PrivateKey), crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	form.Set("sign", base64.StdEncoding.EncodeToString(sig))
	form.Set("sign_type", "RSA2")
}

// ownAppTenant registers an Alipay app of its own (app and Alipay keys of its own) at the
// simulator and sets a tenant on it with `paykit tenant`, as an operator does: its keys
// are sealed at rest with a secrets key of the test's. The processes that serve the
// tenant need secretsEnv to open them.
func ownAppTenant(t *testing.T, app, seller string) (tn tenant, secretsEnv []string) {
	t.Helper()
	k, err := alipaysim.GenerateKeys(2048)
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := json.Marshal(map[string]string{"app_id": app, "seller_id": seller, "app_public_key": k.AppPublicKeyPEM, "alipay_private_key": k.AlipayPrivateKeyPEM})
	if r := do(t, http.MethodPost, env.simURL+"/_sim/apps", map[string]string{"Content-Type": "application/json"}, reg); r.status != http.StatusOK {
		t.Fatalf("register app %s at the simulator: HTTP %d %s", app, r.status, r.body)
	}
	dir := t.TempDir()
	privFile, pubFile := filepath.Join(dir, "app_private_key.pem"), filepath.Join(dir, "alipay_public_key.pem")
	if err := os.WriteFile(privFile, []byte(k.AppPrivateKeyPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pubFile, []byte(k.AlipayPublicKeyPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := secrets.NewKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	secretsEnv = []string{"PAYKIT_SECRETS_KEYS=" + key}
	tn = tenant{id: "t" + randHex(4), apiKey: "sk_test_" + randHex(16), secret: "whsec_" + randHex(16)}
	env.merchant.setSecret(tn.id, tn.secret)
	paykitCmd(t, secretsEnv, "tenant", "-id", tn.id, "-api-key", tn.apiKey,
		"-notify-url", env.merchant.url+"/webhooks/"+tn.id, "-webhook-secret", tn.secret,
		"-alipay-app-id", app, "-alipay-seller-id", seller,
		"-alipay-app-private-key-file", privFile, "-alipay-public-key-file", pubFile)
	// The tenant's secrets are sealed under a key only this test has: once it ends, the
	// commands that walk every tenant of the shared database (paykit tenant -reencrypt,
	// paykit statement's apps) must not meet them.
	t.Cleanup(func() {
		for _, q := range []string{"DELETE FROM tenant_alipay_apps WHERE tenant_id = ?", "DELETE FROM tenants WHERE id = ?"} {
			if _, err := env.db.Exec(q, tn.id); err != nil {
				t.Errorf("remove tenant %s: %v", tn.id, err)
			}
		}
	})
	return tn, secretsEnv
}
