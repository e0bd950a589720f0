package tenants_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/gateways"
	"github.com/paykit/paykit/gateways/gatewaystest"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/secrets"
	"github.com/paykit/paykit/tenants"
)

type memTenantStore struct {
	ts map[string]payment.Tenant
}

func (m *memTenantStore) TenantsByAlipayApp(_ context.Context, appID string) ([]payment.Tenant, error) {
	var out []payment.Tenant
	for _, t := range m.ts {
		if t.AlipayAppID == appID && t.AlipayCredentialsSealed != "" {
			out = append(out, t)
		}
	}
	return out, nil
}

func (m *memTenantStore) GetTenant(_ context.Context, id string) (payment.Tenant, error) {
	t, ok := m.ts[id]
	if !ok {
		return t, payment.ErrNotFound
	}
	return t, nil
}

func (m *memTenantStore) UpsertTenant(_ context.Context, t payment.Tenant) error {
	if t.AlipayCredentialsSealed == "" {
		t.AlipayCredentialsSealed = m.ts[t.ID].AlipayCredentialsSealed
	}
	m.ts[t.ID] = t
	return nil
}

func (m *memTenantStore) SetTenantAlipayCredentials(_ context.Context, id, sealed string) error {
	t, ok := m.ts[id]
	if !ok {
		return payment.ErrNotFound
	}
	t.AlipayCredentialsSealed = sealed
	m.ts[id] = t
	return nil
}

// TestSetTenantKeys: `paykit tenant` seals a tenant's own keys for that tenant, keeps
// them when run again without key files, refuses what would send payments through the
// wrong app, and never quotes a key in an error.
func TestSetTenantKeys(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join("..", "alipaysim", "simtest", "insecure-test-keys")
	priv, err := os.ReadFile(filepath.Join(dir, "app_private_key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	kr := gatewaystest.Keyring(t)
	st := &memTenantStore{ts: map[string]payment.Tenant{}}
	admin := testAdmin(st, kr)
	base := tenants.Change{ID: "shop2", APIKey: "sk_test_0123456789abcdef", AppID: "2021own", Seller: "2088own"}

	// Another app than the default without keys: refused.
	if _, err := admin.Set(ctx, base, payment.AlipayCredentials{}, false); err == nil {
		t.Fatal("a foreign app_id without keys was accepted")
	}
	f := base
	f.AppPrivateKeyFile = filepath.Join(dir, "app_private_key.pem")
	f.AlipayPublicKeyFile = filepath.Join(dir, "alipay_public_key.pem")
	creds, set, err := f.Credentials()
	if err != nil || !set {
		t.Fatalf("credentials: %v %v", set, err)
	}
	if _, err := admin.Set(ctx, f, creds, true); err != nil {
		t.Fatal(err)
	}
	sealed := st.ts["shop2"].AlipayCredentialsSealed
	if sealed == "" || strings.Contains(sealed, "PRIVATE") {
		t.Fatalf("stored %q", sealed)
	}
	plain, err := kr.Open(sealed, payment.AlipayCredentialsAAD("shop2"))
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := payment.DecodeAlipayCredentials(plain); c.AppPrivateKeyPEM != string(priv) {
		t.Fatal("sealed keys are not the file's")
	}
	// Again without key files: the keys stay. With another app_id: refused.
	if _, err := admin.Set(ctx, base, payment.AlipayCredentials{}, false); err != nil || st.ts["shop2"].AlipayCredentialsSealed != sealed {
		t.Fatalf("update without keys: %v", err)
	}
	moved := base
	moved.AppID = "2021else"
	if _, err := admin.Set(ctx, moved, payment.AlipayCredentials{}, false); err == nil {
		t.Fatal("stored keys moved to another app_id")
	}
	// Keys that do not load, and certificates: refused, without quoting the key.
	bad := payment.AlipayCredentials{AppPrivateKeyPEM: "NOT-A-KEY-secret-material", AlipayPublicKeyPEM: "x"}
	if _, err := admin.Set(ctx, base, bad, true); err == nil || strings.Contains(err.Error(), "secret-material") {
		t.Fatalf("unloadable keys: %v", err)
	}
	certs := payment.AlipayCredentials{AppPrivateKeyPEM: string(priv), AppCertPEM: "a", AlipayCertPEM: "b", RootCertPEM: "c"}
	if _, err := admin.Set(ctx, base, certs, true); err == nil {
		t.Fatal("certificate mode accepted by a public-key-only build")
	}
	// Without a keyring, keys cannot be set.
	if _, err := testAdmin(st, nil).Set(ctx, f, creds, true); err == nil {
		t.Fatal("keys set without PAYKIT_SECRETS_KEYS")
	}
	// Cleared, the tenant is back on the default app.
	cleared := base
	cleared.AppID, cleared.Seller, cleared.ClearKeys = defaultApp, defaultSeller, true
	if _, err := admin.Set(ctx, cleared, payment.AlipayCredentials{}, false); err != nil || st.ts["shop2"].AlipayCredentialsSealed != "" {
		t.Fatalf("clear: %v, %q", err, st.ts["shop2"].AlipayCredentialsSealed)
	}
}

// TestSetTenantGuardsTheDefaultAppAndSharedApps: keys a tenant supplies never stand for
// the default app, and two tenants share an app only with the same keys and seller.
func TestSetTenantGuardsTheDefaultAppAndSharedApps(t *testing.T) {
	ctx := context.Background()
	st := &memTenantStore{ts: map[string]payment.Tenant{}}
	admin := testAdmin(st, gatewaystest.Keyring(t))

	// Key files for the default app (the flags' default app_id): refused.
	f, creds := withTestKeys(t, tenants.Change{ID: "shop1", APIKey: "sk_test_0123456789abcdef", AppID: defaultApp, Seller: defaultSeller})
	if _, err := admin.Set(ctx, f, creds, true); err == nil || !strings.Contains(err.Error(), "default app") {
		t.Fatalf("keys for the default app: %v", err)
	}
	f, creds = withTestKeys(t, tenants.Change{ID: "shop1", APIKey: "sk_test_0123456789abcdef", AppID: "2021own", Seller: "2088own"})
	if _, err := admin.Set(ctx, f, creds, true); err != nil {
		t.Fatal(err)
	}
	// shop2 on shop1's app: the same keys and seller are fine, another seller is not.
	f2, creds2 := withTestKeys(t, tenants.Change{ID: "shop2", APIKey: "sk_test_fedcba9876543210", AppID: "2021own", Seller: "2088own"})
	if _, err := admin.Set(ctx, f2, creds2, true); err != nil {
		t.Fatalf("same app, same keys: %v", err)
	}
	f3, creds3 := withTestKeys(t, tenants.Change{ID: "shop3", APIKey: "sk_test_aaaabbbbccccdddd", AppID: "2021own", Seller: "2088other"})
	if _, err := admin.Set(ctx, f3, creds3, true); err == nil || !strings.Contains(err.Error(), "already held") {
		t.Fatalf("same app, other seller: %v", err)
	}
}

const defaultApp, defaultSeller = "2021default", "2088default"

// testApps builds gateways on a gateway URL nothing listens on: building one checks
// that its keys load.
var testApps = gateways.Alipay{GatewayURL: "http://127.0.0.1:1/gateway.do", NotifyURL: "http://127.0.0.1:2/callbacks/alipay"}

// testAdmin administers the tenants of a deployment on the app defaultApp whose keys
// are sealed with kr (nil: PAYKIT_SECRETS_KEYS is not set).
func testAdmin(st tenants.Store, kr *secrets.Keyring) tenants.Admin {
	return tenants.Admin{Store: st, DefaultApp: defaultApp, Keys: func() (*secrets.Keyring, error) { return kr, nil },
		Build: testApps.Build, Webhooks: activities.WebhookPolicy{}}
}

// withTestKeys gives f the simulator's insecure test keys as its key files.
func withTestKeys(tb testing.TB, f tenants.Change) (tenants.Change, payment.AlipayCredentials) {
	tb.Helper()
	dir := filepath.Join("..", "alipaysim", "simtest", "insecure-test-keys")
	f.AppPrivateKeyFile = filepath.Join(dir, "app_private_key.pem")
	f.AlipayPublicKeyFile = filepath.Join(dir, "alipay_public_key.pem")
	creds, _, err := f.Credentials()
	if err != nil {
		tb.Fatal(err)
	}
	return f, creds
}

// TestTenantMovesToAnotherAppAtAnyTime runs `paykit tenant` against MySQL: a tenant with
// a pending and a paid payment on its own app A is moved to app B, then back to the
// default app, each move accepted at once. A's and then B's keys are kept, so the
// payments opened on A still resolve to A (with A's seller), a new payment is opened on
// B, a refund records its payment's app, a re-run with fewer flags keeps every kept app,
// and A's notifications still find A's keys. Before, the move was refused while a
// payment was pending or paid in the last 366 days, and nothing of A was kept.
func TestTenantMovesToAnotherAppAtAnyTime(t *testing.T) {
	ctx := context.Background()
	db, _ := testenv.MySQL(t)
	st := mysql.NewStore(db)
	t.Cleanup(func() { _ = st.Close() })
	kr := gatewaystest.Keyring(t)
	admin := testAdmin(st, kr)
	gws := gateways.New(st, kr, testApps.Build, gatewaystest.Named{App: "default"}, defaultApp, defaultSeller)
	gws.SetTTL(0)

	f, creds := withTestKeys(t, tenants.Change{ID: "mover", APIKey: "sk_test_0123456789abcdef", AppID: "2021A", Seller: "2088A"})
	if _, err := admin.Set(ctx, f, creds, true); err != nil {
		t.Fatal(err)
	}
	open := func(no string) payment.Payment {
		t.Helper()
		app, err := gws.For(ctx, "mover")
		if err != nil {
			t.Fatal(err)
		}
		p, _, err := st.CreatePendingPayment(ctx, payment.NewPayment{PaymentNo: no, TenantID: "mover", OrderID: "o-" + no,
			Amount: 100, Currency: "CNY", Subject: "s", ExpireAt: time.Now().Add(time.Hour), AlipayAppID: app.ID})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	pending := open("PPENDING")
	paid := open("PPAID")
	if _, err := st.MarkPaid(ctx, paid.PaymentNo, "T-PAID", time.Now()); err != nil {
		t.Fatal(err)
	}
	refund, _, err := st.CreateRefund(ctx, payment.NewRefund{RefundNo: "R1", TenantID: "mover", PaymentNo: paid.PaymentNo, Amount: 50})
	if err != nil {
		t.Fatal(err)
	}

	// Moved to B while a payment is pending, one is paid and a refund is pending.
	f, creds = withTestKeys(t, tenants.Change{ID: "mover", AppID: "2021B", Seller: "2088B", Given: map[string]bool{"alipay-app-id": true, "alipay-seller-id": true}})
	if _, err := admin.Set(ctx, f, creds, true); err != nil {
		t.Fatalf("moving a tenant with open payments: %v, want it allowed", err)
	}
	// A re-run with fewer flags (an API key rotation) changes no app, current or kept.
	rerun := tenants.Change{ID: "mover", APIKey: "sk_test_rotated_0123456789", Given: map[string]bool{"id": true, "api-key": true}}
	if _, err := admin.Set(ctx, rerun, payment.AlipayCredentials{}, false); err != nil {
		t.Fatal(err)
	}
	if tn, _ := st.GetTenant(ctx, "mover"); tn.AlipayAppID != "2021B" || tn.AlipaySeller != "2088B" {
		t.Fatalf("after the re-run the tenant is on %s/%s, want 2021B/2088B", tn.AlipayAppID, tn.AlipaySeller)
	}
	newer := open("PNEW")

	for _, c := range []struct {
		name, appID, wantSeller string
	}{
		{"the pending payment", pending.AlipayAppID, "2088A"},
		{"the paid payment", paid.AlipayAppID, "2088A"},
		{"the pending refund", refund.AlipayAppID, "2088A"},
		{"a payment opened after the move", newer.AlipayAppID, "2088B"},
	} {
		app, err := gws.ForPayment(ctx, "mover", c.appID)
		if err != nil {
			t.Fatalf("%s (app %q): %v", c.name, c.appID, err)
		}
		if app.SellerID != c.wantSeller || app.AppID != c.appID {
			t.Fatalf("%s resolves to %s/%s, want %s/%s", c.name, app.AppID, app.SellerID, c.appID, c.wantSeller)
		}
	}
	if pending.AlipayAppID != "2021A" || refund.AlipayAppID != "2021A" || newer.AlipayAppID != "2021B" {
		t.Fatalf("recorded apps: pending %q, refund %q, new %q", pending.AlipayAppID, refund.AlipayAppID, newer.AlipayAppID)
	}
	if got, err := st.GetPayment(ctx, pending.PaymentNo); err != nil || got.AlipayAppID != "2021A" {
		t.Fatalf("the pending payment as stored: %q, %v", got.AlipayAppID, err)
	}
	if _, err := gws.ForApp(ctx, "2021A"); err != nil {
		t.Fatalf("A's notifications after the move: %v", err)
	}

	// Back to the default app: B is kept as well, and A still is.
	cleared := tenants.Change{ID: "mover", AppID: defaultApp, Seller: defaultSeller, ClearKeys: true,
		Given: map[string]bool{"alipay-app-id": true, "alipay-seller-id": true, "clear-alipay-keys": true}}
	if _, err := admin.Set(ctx, cleared, payment.AlipayCredentials{}, false); err != nil {
		t.Fatalf("back to the default app: %v", err)
	}
	for _, app := range []string{"2021A", "2021B"} {
		if _, err := gws.ForPayment(ctx, "mover", app); err != nil {
			t.Fatalf("payments on %s after moving to the default app: %v", app, err)
		}
	}
	if app, err := gws.For(ctx, "mover"); err != nil || app.ID != defaultApp {
		t.Fatalf("a new payment on the default app records %+v, %v; want %s", app, err, defaultApp)
	}
}
