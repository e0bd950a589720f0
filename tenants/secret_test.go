package tenants_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/gateways/gatewaystest"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/secrets"
	"github.com/paykit/paykit/tenants"
)

const secret32 = "whsec_0123456789abcdef0123456789" // 32 bytes

// TestWebhookSecretIsMandatoryAndNeverWeakened: a tenant with a notify_url always has a
// webhook secret of at least 32 bytes, sealed: one is generated (32 random bytes) and
// returned once when none is given; a given one shorter than 32 bytes is refused; a
// re-run with fewer flags, or with an empty secret, keeps the stored one. Before, a
// tenant could be set with no secret, with "x", or have its secret cleared by
// -webhook-secret "", and its webhooks went out unsigned.
func TestWebhookSecretIsMandatoryAndNeverWeakened(t *testing.T) {
	ctx := context.Background()
	kr := gatewaystest.Keyring(t)
	st := &memTenantStore{ts: map[string]payment.Tenant{}}
	admin := testAdmin(st, kr)
	given := func(c tenants.Change, flags ...string) tenants.Change {
		c.AppID, c.Seller = defaultApp, defaultSeller
		c.Given = map[string]bool{"id": true, "alipay-app-id": true, "alipay-seller-id": true}
		for _, f := range flags {
			c.Given[f] = true
		}
		return c
	}
	current := func(id string) string {
		t.Helper()
		s, err := st.ts[id].CurrentWebhookSecret(kr)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	set := func(c tenants.Change) (tenants.Issued, error) {
		t.Helper()
		return admin.Set(ctx, c, payment.AlipayCredentials{}, false)
	}

	issued, err := set(given(tenants.Change{ID: "shop", APIKey: "sk_test_0123456789abcdef", NotifyURL: "https://shop.example/hooks"},
		"api-key", "notify-url"))
	if err != nil {
		t.Fatal(err)
	}
	// In the Standard Webhooks form: whsec_ and the padded standard base64 of 32 bytes.
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(issued.WebhookSecret, "whsec_"))
	if err != nil || len(raw) != 32 || !strings.HasPrefix(issued.WebhookSecret, "whsec_") {
		t.Fatalf("generated secret %q: %d random bytes, %v; want whsec_ and 32", issued.WebhookSecret, len(raw), err)
	}
	stored := st.ts["shop"]
	if stored.WebhookSecret != "" || !strings.HasPrefix(stored.WebhookSecretSealed, "pks1:") || current("shop") != issued.WebhookSecret {
		t.Fatalf("stored %+v, want the generated secret sealed and nothing in the clear", stored)
	}

	for _, c := range []struct {
		name    string
		change  tenants.Change
		wantErr string
	}{
		{"fewer flags", given(tenants.Change{ID: "shop", APIKey: "sk_test_rotated_0123456789"}, "api-key"), ""},
		{"empty secret", given(tenants.Change{ID: "shop"}, "webhook-secret"), ""},
		{"empty secret and url given again", given(tenants.Change{ID: "shop", NotifyURL: "https://shop.example/hooks"}, "webhook-secret", "notify-url"), ""},
		{"one byte", given(tenants.Change{ID: "shop", WebhookSecret: "x"}, "webhook-secret"), "at least 32"},
		{"31 bytes", given(tenants.Change{ID: "shop", WebhookSecret: secret32[:31]}, "webhook-secret"), "at least 32"},
		{"notify_url cleared", given(tenants.Change{ID: "shop"}, "notify-url"), ""},
	} {
		got, err := set(c.change)
		if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
			t.Fatalf("%s: %v, want %q", c.name, err, c.wantErr)
		}
		if got.WebhookSecret != "" || current("shop") != issued.WebhookSecret {
			t.Fatalf("%s: the secret is now %q (issued %q), want the first one kept", c.name, current("shop"), got.WebhookSecret)
		}
	}
	if _, err := set(given(tenants.Change{ID: "shop", WebhookSecret: secret32}, "webhook-secret")); err != nil || current("shop") != secret32 {
		t.Fatalf("a 32-byte secret: %v, stored %q", err, current("shop"))
	}

	// Without a keyring no secret can be sealed, so a tenant with a notify_url is refused.
	if _, err := testAdmin(st, nil).Set(ctx, given(tenants.Change{ID: "bare", APIKey: "sk_test_0123456789abcdef",
		NotifyURL: "https://bare.example/hooks"}, "api-key", "notify-url"), payment.AlipayCredentials{}, false); !errors.Is(err, tenants.ErrNoSecretsKey) {
		t.Fatalf("notify_url without a keyring: %v, want ErrNoSecretsKey", err)
	}
	// A tenant without a notify_url gets its secret when it is given one.
	if issued, err := set(given(tenants.Change{ID: "poller", APIKey: "sk_test_fedcba9876543210"}, "api-key")); err != nil || issued.WebhookSecret != "" {
		t.Fatalf("a tenant that polls: %+v, %v; want no secret issued", issued, err)
	}
	issued, err = set(given(tenants.Change{ID: "poller", NotifyURL: "https://poller.example/hooks"}, "notify-url"))
	if err != nil || issued.WebhookSecret == "" || current("poller") != issued.WebhookSecret {
		t.Fatalf("notify_url added: %+v, %v; want a secret issued and stored", issued, err)
	}
	// A secret stored in the clear (before migration 0037) is sealed by the next run.
	st.ts["legacy"] = payment.Tenant{ID: "legacy", APIKeyHash: api.HashAPIKey("sk_test_legacy_0123456789"), NotifyURL: "https://l.example/h",
		WebhookSecret: "whsec_short_legacy", AlipayAppID: defaultApp, AlipaySeller: defaultSeller}
	if _, err := set(given(tenants.Change{ID: "legacy", Name: "Legacy"}, "name")); err != nil {
		t.Fatal(err)
	}
	if tn := st.ts["legacy"]; tn.WebhookSecret != "" || current("legacy") != "whsec_short_legacy" {
		t.Fatalf("legacy secret after a run: %+v", tn)
	}
}

// TestNewTenantGetsAGeneratedAPIKey: a new tenant without -api-key is given a random key
// of at least 128 bits, returned once; only its hash is stored. Before, it was refused.
func TestNewTenantGetsAGeneratedAPIKey(t *testing.T) {
	ctx := context.Background()
	st := &memTenantStore{ts: map[string]payment.Tenant{}}
	issued, err := testAdmin(st, gatewaystest.Keyring(t)).Set(ctx, tenants.Change{ID: "fresh", AppID: defaultApp, Seller: defaultSeller,
		Given: map[string]bool{"id": true, "alipay-app-id": true, "alipay-seller-id": true}},
		payment.AlipayCredentials{}, false)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(issued.APIKey, "sk_"))
	if err != nil || len(raw) < 16 || !strings.HasPrefix(issued.APIKey, "sk_") {
		t.Fatalf("generated key %q: %d random bytes, %v", issued.APIKey, len(raw), err)
	}
	if st.ts["fresh"].APIKeyHash != api.HashAPIKey(issued.APIKey) {
		t.Fatal("the stored hash is not the generated key's")
	}
	again, err := testAdmin(st, nil).Set(ctx, tenants.Change{ID: "fresh", Name: "Fresh", Given: map[string]bool{"name": true}},
		payment.AlipayCredentials{}, false)
	if err != nil || again.APIKey != "" || st.ts["fresh"].APIKeyHash != api.HashAPIKey(issued.APIKey) {
		t.Fatalf("re-run: %+v, %v; want the key kept and none issued", again, err)
	}
}

// TestWebhookSecretsSealedAtRest reads the tenants row as MariaDB holds it: a secret set
// by `paykit tenant` or a rotation is only in the sealed columns, and one stored in the
// clear before migration 0037 is sealed by SealWebhookSecrets (`paykit tenant
// -reencrypt`), which a second run leaves alone. Before, the secret was in the clear.
func TestWebhookSecretsSealedAtRest(t *testing.T) {
	ctx := context.Background()
	db, _ := testenv.MySQL(t)
	st := mysql.NewStore(db)
	t.Cleanup(func() { _ = st.Close() })
	k1, _ := secrets.NewKey("k1")
	kr, err := secrets.ParseKeyring(k1)
	if err != nil {
		t.Fatal(err)
	}
	admin := testAdmin(st, kr)
	row := func(id string) (plain, sealed, prevPlain, prevSealed string) {
		t.Helper()
		if err := db.QueryRowContext(ctx, `SELECT webhook_secret, COALESCE(webhook_secret_sealed, ''), previous_webhook_secret,
			COALESCE(previous_webhook_secret_sealed, '') FROM tenants WHERE id = ?`, id).Scan(&plain, &sealed, &prevPlain, &prevSealed); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := admin.Set(ctx, tenants.Change{ID: "sealed", APIKey: "sk_test_0123456789abcdef", NotifyURL: "https://s.example/hooks",
		WebhookSecret: secret32, AppID: defaultApp, Seller: defaultSeller}, payment.AlipayCredentials{}, false); err != nil {
		t.Fatal(err)
	}
	if plain, sealed, _, _ := row("sealed"); plain != "" || !strings.HasPrefix(sealed, "pks1:") || strings.Contains(sealed, secret32) {
		t.Fatalf("at rest: clear %q, sealed %.20q", plain, sealed)
	}
	const next = "whsec_next_0123456789abcdef012345"
	if _, err := tenants.RotateSecret(ctx, st, kr, "sealed", tenants.Rotation{NewSecret: next, Window: time.Hour}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if plain, sealed, prevPlain, prevSealed := row("sealed"); plain != "" || prevPlain != "" || sealed == "" || prevSealed == "" {
		t.Fatalf("after a rotation: clear %q/%q, sealed %q/%q", plain, prevPlain, sealed, prevSealed)
	}
	tn, err := st.GetTenant(ctx, "sealed")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tn.WebhookSecrets(time.Now(), kr); err != nil || len(got) != 2 || got[0] != next || got[1] != secret32 {
		t.Fatalf("signing secrets after the rotation: %q, %v", got, err)
	}

	// Rows of before 0037: the secrets in the clear, read as they are until sealed.
	legacy := payment.Tenant{ID: "legacy", APIKeyHash: api.HashAPIKey("sk_test_legacy_0123456789"), NotifyURL: "https://l.example/h",
		WebhookSecret: "whsec_legacy_current"}
	if err := st.UpsertTenant(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE tenants SET previous_webhook_secret = 'whsec_legacy_previous',
		previous_secret_expires_at = ? WHERE id = 'legacy'`, time.Now().Add(time.Hour).UTC()); err != nil {
		t.Fatal(err)
	}
	before, _ := st.GetTenant(ctx, "legacy")
	if got, err := before.WebhookSecrets(time.Now(), nil); err != nil || len(got) != 2 {
		t.Fatalf("secrets in the clear, no keyring: %q, %v", got, err)
	}
	changed, total, err := tenants.SealWebhookSecrets(ctx, st, kr)
	if err != nil || changed != 1 || total != 2 {
		t.Fatalf("SealWebhookSecrets = %d of %d, %v; want 1 of 2", changed, total, err)
	}
	plain, sealed, prevPlain, prevSealed := row("legacy")
	if plain != "" || prevPlain != "" || sealed == "" || prevSealed == "" {
		t.Fatalf("legacy row after sealing: clear %q/%q, sealed %q/%q", plain, prevPlain, sealed, prevSealed)
	}
	after, _ := st.GetTenant(ctx, "legacy")
	if got, err := after.WebhookSecrets(time.Now(), kr); err != nil || len(got) != 2 || got[0] != "whsec_legacy_current" || got[1] != "whsec_legacy_previous" {
		t.Fatalf("legacy secrets after sealing: %q, %v", got, err)
	}
	if changed, _, err := tenants.SealWebhookSecrets(ctx, st, kr); err != nil || changed != 0 {
		t.Fatalf("second run changed %d, %v", changed, err)
	}
	// After a key rotation, the same pass seals them again under the new first key.
	newKey, _ := secrets.NewKey("k2")
	ring, err := secrets.ParseKeyring(newKey + "," + k1)
	if err != nil {
		t.Fatal(err)
	}
	if changed, _, err := tenants.SealWebhookSecrets(ctx, st, ring); err != nil || changed != 2 {
		t.Fatalf("resealed %d after a key rotation, %v; want 2", changed, err)
	}
}
