package mysql

import (
	"context"
	"fmt"
	"time"

	"github.com/paykit/paykit/payment"
)

const (
	// qRotateWebhookSecret keeps the replaced secret valid until the given time. Rotating
	// to the secret already in use changes nothing.
	qRotateWebhookSecret = `UPDATE tenants SET previous_webhook_secret = webhook_secret, previous_secret_expires_at = ?,
	webhook_secret = ?, updated_at = ?
WHERE id = ? AND webhook_secret <> ?`
	qExpirePreviousWebhookSecret = `UPDATE tenants SET previous_webhook_secret = '', previous_secret_expires_at = NULL,
	updated_at = ?
WHERE id = ?`
)

// RotateWebhookSecret makes secret the tenant's webhook secret and keeps the one it
// replaces valid (webhooks carry a signature with each) until oldValidUntil.
func (st *Store) RotateWebhookSecret(ctx context.Context, tenantID, secret string, oldValidUntil time.Time) error {
	if secret == "" {
		return payment.Errorf(payment.EINVALID, "the new webhook secret is empty")
	}
	if _, err := st.GetTenant(ctx, tenantID); err != nil {
		return err
	}
	if _, err := st.exec(ctx, nil, qRotateWebhookSecret, dbTime(oldValidUntil), secret, st.clock(), tenantID, secret); err != nil {
		return fmt.Errorf("mysql: rotate webhook secret of %s: %w", tenantID, err)
	}
	return nil
}

// ExpirePreviousWebhookSecret ends a rotation now: only the current secret signs.
func (st *Store) ExpirePreviousWebhookSecret(ctx context.Context, tenantID string) error {
	if _, err := st.GetTenant(ctx, tenantID); err != nil {
		return err
	}
	if _, err := st.exec(ctx, nil, qExpirePreviousWebhookSecret, st.clock(), tenantID); err != nil {
		return fmt.Errorf("mysql: expire previous webhook secret of %s: %w", tenantID, err)
	}
	return nil
}
