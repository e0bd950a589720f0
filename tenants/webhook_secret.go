package tenants

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/paykit/paykit/payment"
)

// DefaultOldSecretWindow is how long a rotated-out webhook secret keeps signing.
const DefaultOldSecretWindow = 72 * time.Hour

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
	RotateWebhookSecret(ctx context.Context, tenantID, secret string, oldValidUntil time.Time) error
	ExpirePreviousWebhookSecret(ctx context.Context, tenantID string) error
}

// RotateSecret rotates the tenant's webhook secret (webhooks are then signed with both
// the new and the old one until the window ends) or ends a rotation at once. It returns
// what it did, in a sentence.
func RotateSecret(ctx context.Context, st SecretRotator, tenantID string, r Rotation, now time.Time) (string, error) {
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
	if len(r.NewSecret) < 16 {
		return "", errors.New("tenant: -rotate-webhook-secret must be at least 16 characters")
	}
	if r.Window <= 0 {
		return "", errors.New("tenant: -old-secret-valid-for must be positive")
	}
	until := now.Add(r.Window)
	if err := st.RotateWebhookSecret(ctx, tenantID, r.NewSecret, until); err != nil {
		return "", err
	}
	return fmt.Sprintf("tenant %s: webhooks are signed with the new secret, and with the previous one until %s",
		tenantID, until.UTC().Format(time.RFC3339)), nil
}
