package tenants

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/secrets"
	"github.com/paykit/paykit/webhook"
)

// DefaultOldSecretWindow is how long a rotated-out webhook secret keeps signing.
const DefaultOldSecretWindow = 72 * time.Hour

// webhookSecretBytes is the randomness of a generated webhook secret; apiKeyBytes that
// of a generated API key (192 bits).
const (
	webhookSecretBytes = 32
	apiKeyBytes        = 24
)

// NewWebhookSecret returns a random webhook secret in the Standard Webhooks form:
// "whsec_" and 32 random bytes in standard, padded base64. Paykit-Signature uses the
// whole string as its key, webhook-signature the 32 bytes (webhook.StandardKey); a
// merchant verifies either with the string as shown.
func NewWebhookSecret() (string, error) {
	b := make([]byte, webhookSecretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("tenant: random: %w", err)
	}
	return webhook.StandardSecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// NewAPIKey returns a random API key: "sk_" and 24 random bytes (192 bits) in unpadded
// base64url.
func NewAPIKey() (string, error) { return randomToken("sk_", apiKeyBytes) }

func randomToken(prefix string, n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("tenant: random: %w", err)
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// MinStandardKeyLen is the shortest key a secret in the Standard Webhooks form may
// encode: the specification's 24 bytes.
const MinStandardKeyLen = 24

// CheckWebhookSecret refuses a webhook secret shorter than payment.MinWebhookSecretLen
// bytes, and one in the Standard Webhooks form ("whsec_" and standard base64) whose key
// is shorter than MinStandardKeyLen bytes. Paykit-Signature's key is the secret byte for
// byte, whatever its encoding, so the bytes are counted as they are given:
// NewWebhookSecret's are 50, "openssl rand -base64 32" gives 44.
func CheckWebhookSecret(flag, secret string) error {
	if len(secret) < payment.MinWebhookSecretLen {
		return fmt.Errorf("tenant: %s must be at least %d bytes (it is %d); leave it out to have one generated",
			flag, payment.MinWebhookSecretLen, len(secret))
	}
	// The key a secret signs with is what counts: base64 decoding skips line breaks, so
	// a whsec_ secret padded with them can be long and sign with a few bytes.
	if key := webhook.StandardKey(secret); string(key) != secret {
		if n := len(key); n < MinStandardKeyLen {
			return fmt.Errorf("tenant: %s is in the whsec_ form, whose key must be at least %d bytes (it is %d); leave it out to have one generated",
				flag, MinStandardKeyLen, n)
		}
	}
	return nil
}

// StandardSecretNote is what to tell the operator who set secret: nothing if it is in
// the Standard Webhooks form, which a merchant gives the standardwebhooks libraries as
// it is; otherwise where that form comes from. It never contains the secret.
func StandardSecretNote(tenantID, secret string) string {
	if secret == "" || webhook.IsStandardSecret(secret) {
		return ""
	}
	return fmt.Sprintf("tenant %s: this webhook secret is not in the Standard Webhooks form (whsec_ and base64); "+
		"the merchant verifies webhook-signature with whsec_ followed by the base64 of the secret, "+
		"which `paykit tenant -standard-webhook-secret-file F` prints", tenantID)
}

// checkWebhookSecret checks a given webhook secret; an empty one is no change (a re-run
// never removes the secret).
func (c Change) checkWebhookSecret() error {
	if !c.Has("webhook-secret") || c.WebhookSecret == "" {
		return nil
	}
	return CheckWebhookSecret("-webhook-secret", c.WebhookSecret)
}

// webhookSecret is the current webhook secret c leaves the tenant stored with, in the
// clear (a row of before migration 0037 without a keyring to seal it) or sealed, and the
// secret generated for it if any. A given secret replaces the stored one; none given, or
// one given empty, keeps it, sealed if it was in the clear; a tenant with a notify_url
// and no secret gets a new one.
func (a Admin) webhookSecret(c Change, stored payment.Tenant) (plain, sealed, generated string, err error) {
	secret := ""
	if c.Has("webhook-secret") {
		secret = c.WebhookSecret
	}
	switch {
	case secret != "":
	case stored.WebhookSecretSealed != "":
		return "", stored.WebhookSecretSealed, "", nil
	case stored.WebhookSecret != "":
		kr, err := a.Keys()
		if err != nil {
			return "", "", "", err
		}
		if kr == nil {
			// Left as it was: `paykit tenant -reencrypt` seals it once a keyring is set.
			return stored.WebhookSecret, "", "", nil
		}
		secret = stored.WebhookSecret
	case c.NotifyURL == "":
		return "", "", "", nil
	default:
		if secret, err = NewWebhookSecret(); err != nil {
			return "", "", "", err
		}
		generated = secret
	}
	kr, err := a.keyring()
	if err != nil {
		return "", "", "", err
	}
	if sealed, err = kr.Seal([]byte(secret), payment.WebhookSecretAAD(c.ID)); err != nil {
		return "", "", "", err
	}
	return "", sealed, generated, nil
}

// Rotation is what `paykit tenant -rotate-webhook-secret` or `-expire-old-secret` asks
// for: a new secret, with the old one signing for Window more, or the end of that at once.
type Rotation struct {
	NewSecret string
	Window    time.Duration
	ExpireOld bool
}

// Requested reports whether a rotation is asked for.
func (r Rotation) Requested() bool { return r.NewSecret != "" || r.ExpireOld }

// SecretRotator is the part of the store a rotation uses.
type SecretRotator interface {
	GetTenant(ctx context.Context, id string) (payment.Tenant, error)
	SwapTenantWebhookSecrets(ctx context.Context, old, next payment.Tenant) (bool, error)
	ExpirePreviousWebhookSecret(ctx context.Context, tenantID string) error
}

// RotateSecret rotates the tenant's webhook secret (webhooks are then signed with both
// the new and the old one until the window ends) or ends a rotation at once. The new
// secret is at least payment.MinWebhookSecretLen bytes and is sealed with kr, and so is
// the old one. It returns what it did, in a sentence.
func RotateSecret(ctx context.Context, st SecretRotator, kr *secrets.Keyring, tenantID string, r Rotation, now time.Time) (string, error) {
	if err := payment.ValidateTenantID(tenantID); err != nil {
		return "", err
	}
	switch {
	case r.NewSecret != "" && r.ExpireOld:
		return "", errors.New("tenant: give -rotate-webhook-secret or -expire-old-secret, not both")
	case r.ExpireOld:
		if err := st.ExpirePreviousWebhookSecret(ctx, tenantID); err != nil {
			return "", err
		}
		return fmt.Sprintf("tenant %s: the previous webhook secret no longer signs", tenantID), nil
	}
	if err := CheckWebhookSecret("-rotate-webhook-secret", r.NewSecret); err != nil {
		return "", err
	}
	if r.Window <= 0 {
		return "", errors.New("tenant: -old-secret-valid-for must be positive")
	}
	if kr == nil {
		return "", ErrNoSecretsKey
	}
	return rotate(ctx, st, kr, tenantID, r.NewSecret, now.Add(r.Window))
}

// rotate makes secret the tenant's webhook secret, and its current one the previous
// until until, in one compare-and-set; the same secret again changes nothing.
func rotate(ctx context.Context, st SecretRotator, kr *secrets.Keyring, tenantID, secret string, until time.Time) (string, error) {
	old, err := st.GetTenant(ctx, tenantID)
	if err != nil {
		return "", err
	}
	current, err := old.CurrentWebhookSecret(kr)
	if err != nil {
		return "", err
	}
	if current == secret {
		// A repeated command keeps the rotation it made, old secret and window included.
		return fmt.Sprintf("tenant %s: the webhook secret is already this one; nothing changed", tenantID), nil
	}
	next := old
	next.WebhookSecret, next.PreviousWebhookSecret, next.PreviousSecretExpiresAt = "", "", until
	if next.WebhookSecretSealed, err = kr.Seal([]byte(secret), payment.WebhookSecretAAD(tenantID)); err != nil {
		return "", err
	}
	// The seal is bound to the tenant, not to the column: the current ciphertext moves
	// as it is.
	next.PreviousWebhookSecretSealed = old.WebhookSecretSealed
	if old.WebhookSecretSealed == "" && old.WebhookSecret != "" {
		if next.PreviousWebhookSecretSealed, err = kr.Seal([]byte(old.WebhookSecret), payment.WebhookSecretAAD(tenantID)); err != nil {
			return "", err
		}
	}
	swapped, err := st.SwapTenantWebhookSecrets(ctx, old, next)
	if err != nil {
		return "", err
	}
	if !swapped {
		return "", fmt.Errorf("tenant %s: its webhook secret changed meanwhile; run the rotation again", tenantID)
	}
	return fmt.Sprintf("tenant %s: webhooks are signed with the new secret, and with the previous one until %s",
		tenantID, until.UTC().Format(time.RFC3339)), nil
}
