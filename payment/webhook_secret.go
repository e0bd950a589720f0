package payment

import (
	"errors"
	"fmt"
	"time"
)

// MinWebhookSecretLen is the shortest webhook secret a tenant is given, in bytes: the
// secret is the HMAC-SHA256 key as it is, and a generated one carries 32 random bytes.
const MinWebhookSecretLen = 32

// ErrNoWebhookSecret means a tenant has no webhook secret to sign with; its webhooks are
// not sent.
var ErrNoWebhookSecret = errors.New("the tenant has no webhook secret: webhooks are never sent unsigned; set one with `paykit tenant -id ID -webhook-secret-file F`")

// Opener opens values sealed at rest; *secrets.Keyring implements it.
type Opener interface {
	Open(ciphertext, aad string) ([]byte, error)
}

// WebhookSecretAAD is the additional data a tenant's sealed webhook secrets are bound
// to: they open only for that tenant. The current and the previous secret share it, so
// that a rotation moves the current ciphertext to the previous column as it is.
func WebhookSecretAAD(tenantID string) string {
	return "tenants/" + tenantID + "/webhook_secret"
}

// CurrentWebhookSecret returns the tenant's current webhook secret, opened with keys if
// it is sealed; "" if it has none.
func (t Tenant) CurrentWebhookSecret(keys Opener) (string, error) {
	return t.openWebhookSecret(t.WebhookSecret, t.WebhookSecretSealed, keys)
}

// PreviousWebhookSecretOpened returns the secret a rotation replaced, opened with keys if
// it is sealed; "" if there is none.
func (t Tenant) PreviousWebhookSecretOpened(keys Opener) (string, error) {
	return t.openWebhookSecret(t.PreviousWebhookSecret, t.PreviousWebhookSecretSealed, keys)
}

func (t Tenant) openWebhookSecret(plain, sealed string, keys Opener) (string, error) {
	if sealed == "" {
		return plain, nil
	}
	if keys == nil {
		return "", fmt.Errorf("tenant %s: its webhook secret is sealed and PAYKIT_SECRETS_KEYS is not set", t.ID)
	}
	b, err := keys.Open(sealed, WebhookSecretAAD(t.ID))
	if err != nil {
		return "", fmt.Errorf("tenant %s: webhook secret: %w", t.ID, err)
	}
	return string(b), nil
}

// WebhookSecrets returns the secrets webhooks are signed with at now: the current one
// and, during a rotation, the previous one, each opened with keys (nil when no keyring
// is configured) if sealed. A tenant without a current secret is ErrNoWebhookSecret,
// and a secret that does not open is an error too: a webhook is signed with every
// secret the merchant may hold, or not sent.
func (t Tenant) WebhookSecrets(now time.Time, keys Opener) ([]string, error) {
	cur, err := t.CurrentWebhookSecret(keys)
	if err != nil {
		return nil, err
	}
	if cur == "" {
		return nil, ErrNoWebhookSecret
	}
	secrets := []string{cur}
	if now.Before(t.PreviousSecretExpiresAt) {
		prev, err := t.PreviousWebhookSecretOpened(keys)
		if err != nil {
			return nil, err
		}
		if prev != "" {
			secrets = append(secrets, prev)
		}
	}
	return secrets, nil
}
