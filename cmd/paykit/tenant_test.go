package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/secrets"
)

type memTenantStore struct{ ts map[string]payment.Tenant }

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
