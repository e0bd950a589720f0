package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/secrets"
)

type memTenantStore struct {
	ts   map[string]payment.Tenant
	open map[string]string // tenant id → a payment that still depends on its app
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

func (m *memTenantStore) TenantOpenPayment(_ context.Context, id string, _ time.Time) (string, error) {
	return m.open[id], nil
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
	dir := filepath.Join("..", "..", "alipaysim", "simtest", "insecure-test-keys")
	priv, err := os.ReadFile(filepath.Join(dir, "app_private_key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	ring, _ := secrets.NewKey("k1")
	cfg := Config{AlipayAppID: "2021default", AlipaySellerID: "2088default", AlipayGatewayURL: "http://127.0.0.1:1/gateway.do",
		PublicURL: "http://127.0.0.1:2", SecretsKeys: ring}
	kr, _ := cfg.secretsKeyring()
	st := &memTenantStore{ts: map[string]payment.Tenant{}}
	base := tenantFlags{id: "shop2", apiKey: "sk_test_0123456789abcdef", appID: "2021own", seller: "2088own"}

	// Another app than the default without keys: refused.
	if err := setTenant(ctx, cfg, st, base, payment.AlipayCredentials{}, false); err == nil {
		t.Fatal("a foreign app_id without keys was accepted")
	}
	f := base
	f.appPrivateKeyFile = filepath.Join(dir, "app_private_key.pem")
	f.alipayPublicKeyFile = filepath.Join(dir, "alipay_public_key.pem")
	creds, set, err := f.credentials()
	if err != nil || !set {
		t.Fatalf("credentials: %v %v", set, err)
	}
	if err := setTenant(ctx, cfg, st, f, creds, true); err != nil {
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
	if err := setTenant(ctx, cfg, st, base, payment.AlipayCredentials{}, false); err != nil || st.ts["shop2"].AlipayCredentialsSealed != sealed {
		t.Fatalf("update without keys: %v", err)
	}
	moved := base
	moved.appID = "2021else"
	if err := setTenant(ctx, cfg, st, moved, payment.AlipayCredentials{}, false); err == nil {
		t.Fatal("stored keys moved to another app_id")
	}
	// Keys that do not load, and certificates: refused, without quoting the key.
	bad := payment.AlipayCredentials{AppPrivateKeyPEM: "NOT-A-KEY-secret-material", AlipayPublicKeyPEM: "x"}
	if err := setTenant(ctx, cfg, st, base, bad, true); err == nil || strings.Contains(err.Error(), "secret-material") {
		t.Fatalf("unloadable keys: %v", err)
	}
	certs := payment.AlipayCredentials{AppPrivateKeyPEM: string(priv), AppCertPEM: "a", AlipayCertPEM: "b", RootCertPEM: "c"}
	if err := setTenant(ctx, cfg, st, base, certs, true); err == nil {
		t.Fatal("certificate mode accepted by a public-key-only build")
	}
	// Without a keyring, keys cannot be set.
	noRing := cfg
	noRing.SecretsKeys = ""
	if err := setTenant(ctx, noRing, st, f, creds, true); err == nil {
		t.Fatal("keys set without PAYKIT_SECRETS_KEYS")
	}
	// Cleared, the tenant is back on the default app.
	cleared := base
	cleared.appID, cleared.seller, cleared.clearKeys = cfg.AlipayAppID, cfg.AlipaySellerID, true
	if err := setTenant(ctx, cfg, st, cleared, payment.AlipayCredentials{}, false); err != nil || st.ts["shop2"].AlipayCredentialsSealed != "" {
		t.Fatalf("clear: %v, %q", err, st.ts["shop2"].AlipayCredentialsSealed)
	}
}

// TestSetTenantGuardsTheAppItsPaymentsLiveOn: keys a tenant supplies never stand for the
// default app; a tenant with pending or refundable payments is not moved to another app
// (their trades, refunds and notifications live on the old one); and two tenants share an
// app only with the same keys and seller.
func TestSetTenantGuardsTheAppItsPaymentsLiveOn(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join("..", "..", "alipaysim", "simtest", "insecure-test-keys")
	ring, _ := secrets.NewKey("k1")
	cfg := Config{AlipayAppID: "2021default", AlipaySellerID: "2088default", AlipayGatewayURL: "http://127.0.0.1:1/gateway.do",
		PublicURL: "http://127.0.0.1:2", SecretsKeys: ring}
	st := &memTenantStore{ts: map[string]payment.Tenant{}, open: map[string]string{}}
	withKeys := func(f tenantFlags) (tenantFlags, payment.AlipayCredentials) {
		f.appPrivateKeyFile = filepath.Join(dir, "app_private_key.pem")
		f.alipayPublicKeyFile = filepath.Join(dir, "alipay_public_key.pem")
		creds, _, err := f.credentials()
		if err != nil {
			t.Fatal(err)
		}
		return f, creds
	}

	// Key files for the default app (the flags' default app_id): refused.
	f, creds := withKeys(tenantFlags{id: "shop1", apiKey: "sk_test_0123456789abcdef", appID: cfg.AlipayAppID, seller: cfg.AlipaySellerID})
	if err := setTenant(ctx, cfg, st, f, creds, true); err == nil || !strings.Contains(err.Error(), "default app") {
		t.Fatalf("keys for the default app: %v", err)
	}

	// shop1 on the default app with a pending payment is not moved to its own app.
	if err := setTenant(ctx, cfg, st, tenantFlags{id: "shop1", apiKey: "sk_test_0123456789abcdef", appID: cfg.AlipayAppID, seller: cfg.AlipaySellerID}, payment.AlipayCredentials{}, false); err != nil {
		t.Fatal(err)
	}
	st.open["shop1"] = "P-PENDING"
	f, creds = withKeys(tenantFlags{id: "shop1", apiKey: "sk_test_0123456789abcdef", appID: "2021own", seller: "2088own"})
	if err := setTenant(ctx, cfg, st, f, creds, true); err == nil || !strings.Contains(err.Error(), "P-PENDING") {
		t.Fatalf("moved with an open payment: %v", err)
	}
	if got := st.ts["shop1"]; got.AlipayAppID != cfg.AlipayAppID || got.AlipayCredentialsSealed != "" {
		t.Fatalf("tenant changed by a refused move: %+v", got)
	}
	// Without open payments the move is allowed; back to the default app the same rule holds.
	delete(st.open, "shop1")
	if err := setTenant(ctx, cfg, st, f, creds, true); err != nil {
		t.Fatal(err)
	}
	st.open["shop1"] = "P-PAID"
	cleared := tenantFlags{id: "shop1", apiKey: "sk_test_0123456789abcdef", appID: cfg.AlipayAppID, seller: cfg.AlipaySellerID, clearKeys: true}
	if err := setTenant(ctx, cfg, st, cleared, payment.AlipayCredentials{}, false); err == nil || st.ts["shop1"].AlipayCredentialsSealed == "" {
		t.Fatalf("keys cleared with a refundable payment: %v", err)
	}
	// New keys for the same app and seller (a key rotation at Alipay): allowed with open payments.
	if err := setTenant(ctx, cfg, st, f, creds, true); err != nil {
		t.Fatalf("same app, new keys: %v", err)
	}

	// shop2 on shop1's app: the same keys and seller are fine, another seller is not.
	f2, creds2 := withKeys(tenantFlags{id: "shop2", apiKey: "sk_test_fedcba9876543210", appID: "2021own", seller: "2088own"})
	if err := setTenant(ctx, cfg, st, f2, creds2, true); err != nil {
		t.Fatalf("same app, same keys: %v", err)
	}
	f3, creds3 := withKeys(tenantFlags{id: "shop3", apiKey: "sk_test_aaaabbbbccccdddd", appID: "2021own", seller: "2088other"})
	if err := setTenant(ctx, cfg, st, f3, creds3, true); err == nil || !strings.Contains(err.Error(), "already held") {
		t.Fatalf("same app, other seller: %v", err)
	}
}

// Re-running `paykit tenant` changes only the fields it is given: rotating the API key
// (the README's example) leaves the webhook URL, its secret, the auto-refund choice and
// the Alipay app as they are; a flag given empty clears its field; a new tenant needs
// its API key. Before, every flag left out was written as its empty default, so a key
// rotation silently stopped every webhook.
func TestTenantRerunChangesOnlyTheGivenFields(t *testing.T) {
	ctx := context.Background()
	cfg := Config{AlipayAppID: "2021default", AlipaySellerID: "2088default", AlipayGatewayURL: "http://127.0.0.1:1/gateway.do",
		PublicURL: "http://127.0.0.1:2"}
	st := &memTenantStore{ts: map[string]payment.Tenant{}}
	run := func(args ...string) error {
		t.Helper()
		f, _, err := parseTenantFlags(cfg, args)
		if err != nil {
			t.Fatal(err)
		}
		return setTenant(ctx, cfg, st, f, payment.AlipayCredentials{}, false)
	}
	if err := run("-id", "demo", "-notify-url", "https://shop.example/hooks"); err == nil || !strings.Contains(err.Error(), "-api-key") {
		t.Fatalf("new tenant without an API key: %v, want refused naming -api-key", err)
	}
	if err := run("-id", "demo", "-name", "Demo shop", "-api-key", "sk_test_0123456789abcdef", "-notify-url", "https://shop.example/hooks",
		"-webhook-secret", "whsec_first", "-auto-refund-paid-after-close"); err != nil {
		t.Fatal(err)
	}
	first := st.ts["demo"]
	if err := run("-id", "demo", "-api-key", "sk_test_rotated_0123456789"); err != nil {
		t.Fatal(err)
	}
	got := st.ts["demo"]
	if got.NotifyURL != "https://shop.example/hooks" || got.WebhookSecret != "whsec_first" || !got.AutoRefundPaidAfterClose ||
		got.Name != "Demo shop" || got.AlipayAppID != first.AlipayAppID || got.AlipaySeller != first.AlipaySeller {
		t.Fatalf("after a key rotation the tenant is %+v, want everything but the key as before (%+v)", got, first)
	}
	if got.APIKeyHash == first.APIKeyHash || got.APIKeyHash == "" {
		t.Fatal("the API key was not rotated")
	}
	if err := run("-id", "demo", "-notify-url", ""); err != nil {
		t.Fatal(err)
	}
	if got := st.ts["demo"]; got.NotifyURL != "" || got.WebhookSecret != "whsec_first" || got.APIKeyHash == "" {
		t.Fatalf("an explicitly empty -notify-url: %+v, want only notify_url cleared", got)
	}
}
