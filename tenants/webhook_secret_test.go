package tenants_test

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/gateways/gatewaystest"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/tenants"
	"github.com/paykit/paykit/webhook"
)

// A rotation keeps the old secret signing for its window, so a merchant still on the old
// secret verifies webhooks until it switches; -expire-old-secret ends that at once. The
// new secret is at least 32 bytes, as -webhook-secret's is (before, 16 were enough).
func TestRotateWebhookSecret(t *testing.T) {
	db, _ := testenv.MySQL(t)
	st := mysql.NewStore(db)
	t.Cleanup(func() { _ = st.Close() })
	ctx := context.Background()
	kr := gatewaystest.Keyring(t)
	const oldSecret, newSecret = "whsec_old_0123456789", "whsec_new_0123456789abcdef0123456"
	if err := st.UpsertTenant(ctx, payment.Tenant{ID: "rot1", APIKeyHash: api.HashAPIKey("sk_test_rot1_0123456789"), WebhookSecret: oldSecret}); err != nil {
		t.Fatal(err)
	}
	secrets := func(at time.Time) []string {
		tn, err := st.GetTenant(ctx, "rot1")
		if err != nil {
			t.Fatal(err)
		}
		s, err := tn.WebhookSecrets(at, kr)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	now := time.Now()
	for _, short := range []string{"x", "whsec_new_0123456789", newSecret[:31]} {
		if _, err := tenants.RotateSecret(ctx, st, kr, "rot1", tenants.Rotation{NewSecret: short, Window: time.Hour}, now); err == nil ||
			!strings.Contains(err.Error(), "at least 32") {
			t.Fatalf("rotation to a %d-byte secret: %v, want refused", len(short), err)
		}
	}
	if _, err := tenants.RotateSecret(ctx, st, nil, "rot1", tenants.Rotation{NewSecret: newSecret, Window: time.Hour}, now); !errors.Is(err, tenants.ErrNoSecretsKey) {
		t.Fatalf("rotation without a keyring: %v, want ErrNoSecretsKey", err)
	}
	if _, err := tenants.RotateSecret(ctx, st, kr, "rot1", tenants.Rotation{NewSecret: newSecret, Window: time.Hour}, now); err != nil {
		t.Fatal(err)
	}
	during := secrets(now.Add(time.Minute))
	if !slices.Equal(during, []string{newSecret, oldSecret}) {
		t.Fatalf("secrets during the rotation: %q", during)
	}
	body := []byte(`{"event_id":"evt_1"}`)
	header := webhook.Sign(body, now, during...)
	for _, s := range []string{oldSecret, newSecret} {
		if err := webhook.VerifyAt(header, body, s, webhook.DefaultTolerance, now); err != nil {
			t.Fatalf("merchant with %s: %v", s, err)
		}
	}
	if after := secrets(now.Add(2 * time.Hour)); !slices.Equal(after, []string{newSecret}) {
		t.Fatalf("secrets after the window: %q", after)
	}
	// Rotating to the secret in use changes nothing (a repeated command keeps the old one).
	if _, err := tenants.RotateSecret(ctx, st, kr, "rot1", tenants.Rotation{NewSecret: newSecret, Window: time.Hour}, now); err != nil {
		t.Fatal(err)
	}
	if again := secrets(now.Add(time.Minute)); !slices.Equal(again, []string{newSecret, oldSecret}) {
		t.Fatalf("secrets after repeating the rotation: %q", again)
	}
	if _, err := tenants.RotateSecret(ctx, st, kr, "rot1", tenants.Rotation{ExpireOld: true}, now); err != nil {
		t.Fatal(err)
	}
	if ended := secrets(now.Add(time.Minute)); !slices.Equal(ended, []string{newSecret}) {
		t.Fatalf("secrets after -expire-old-secret: %q", ended)
	}
	if err := webhook.VerifyAt(webhook.Sign(body, now, newSecret), body, oldSecret, webhook.DefaultTolerance, now); !errors.Is(err, webhook.ErrSignature) {
		t.Fatalf("old secret after expiry: %v", err)
	}
	if _, err := tenants.RotateSecret(ctx, st, kr, "nobody", tenants.Rotation{ExpireOld: true}, now); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("unknown tenant: %v", err)
	}
}

// TestCheckWebhookSecretStandardForm: a secret in the whsec_ form must carry the
// specification's 24 bytes at least, whatever its length as a string; any other secret,
// 32 bytes as it is. A note tells the operator how a secret not in that form is given to
// the standardwebhooks libraries, without the secret in it.
func TestCheckWebhookSecretStandardForm(t *testing.T) {
	key := func(n int) string { return "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, n)) }
	for _, tc := range []struct {
		name, secret string
		ok           bool
		note         bool
	}{
		{name: "generated form, 32 bytes", secret: key(32), ok: true},
		{name: "whsec_ and 24 bytes", secret: key(24), ok: true},
		{name: "whsec_ and 21 bytes (34 characters)", secret: key(21)},
		{name: "raw, 32 bytes", secret: "raw-secret-0123456789abcdef01234", ok: true, note: true},
		{name: "raw, 31 bytes", secret: "raw-secret-0123456789abcdef0123", note: true},
		// Base64 decoding skips line breaks: 32 bytes or more that sign with a short key.
		{name: "whsec_ and 3 bytes padded with newlines", secret: "whsec_AAAA" + strings.Repeat("\n", 26), note: true},
		{name: "whsec_ and 16 bytes padded with line breaks", secret: key(16) + "\r\n", note: true},
		{name: "whsec_ and 24 bytes with a line break", secret: key(24)[:20] + "\n" + key(24)[20:], ok: true, note: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tenants.CheckWebhookSecret("-webhook-secret", tc.secret)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckWebhookSecret(%q) = %v, want ok %v", tc.secret, err, tc.ok)
			}
			note := tenants.StandardSecretNote("t1", tc.secret)
			if (note != "") != tc.note || strings.Contains(note, tc.secret) {
				t.Fatalf("note %q, want one: %v, never the secret", note, tc.note)
			}
		})
	}
	if s, err := tenants.NewWebhookSecret(); err != nil || tenants.CheckWebhookSecret("x", s) != nil || !webhook.IsStandardSecret(s) {
		t.Fatalf("generated %q, %v: want accepted and in the whsec_ form", s, err)
	}
}
