package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/paykit/paykit/payment"
)

// defaultOldSecretWindow is how long a rotated-out webhook secret keeps signing.
const defaultOldSecretWindow = 72 * time.Hour

// secretRotation is what `paykit tenant -rotate-webhook-secret` or `-expire-old-secret`
// asks for.
type secretRotation struct {
	newSecret string
	window    time.Duration
	expireOld bool
}

func (r secretRotation) requested() bool { return r.newSecret != "" || r.expireOld }

// secretRotator is the part of the store a rotation uses.
type secretRotator interface {
	RotateWebhookSecret(ctx context.Context, tenantID, secret string, oldValidUntil time.Time) error
	ExpirePreviousWebhookSecret(ctx context.Context, tenantID string) error
}

// rotateSecret rotates the tenant's webhook secret (webhooks are then signed with both
// the new and the old one until the window ends) or ends a rotation at once.
func rotateSecret(ctx context.Context, st secretRotator, tenantID string, r secretRotation, now time.Time) (string, error) {
	if err := payment.ValidateTenantID(tenantID); err != nil {
		return "", err
	}
	switch {
	case r.newSecret != "" && r.expireOld:
		return "", errors.New("tenant: give -rotate-webhook-secret or -expire-old-secret, not both")
	case r.expireOld:
		if err := st.ExpirePreviousWebhookSecret(ctx, tenantID); err != nil {
			return "", err
		}
		return fmt.Sprintf("tenant %s: the previous webhook secret no longer signs", tenantID), nil
	}
	if len(r.newSecret) < 16 {
		return "", errors.New("tenant: -rotate-webhook-secret must be at least 16 characters")
	}
	if r.window <= 0 {
		return "", errors.New("tenant: -old-secret-valid-for must be positive")
	}
	until := now.Add(r.window)
	if err := st.RotateWebhookSecret(ctx, tenantID, r.newSecret, until); err != nil {
		return "", err
	}
	return fmt.Sprintf("tenant %s: webhooks are signed with the new secret, and with the previous one until %s",
		tenantID, until.UTC().Format(time.RFC3339)), nil
}
