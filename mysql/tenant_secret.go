package mysql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/paykit/paykit/payment"
)

const (
	qExpirePreviousWebhookSecret = `UPDATE tenants SET previous_webhook_secret = '', previous_webhook_secret_sealed = NULL,
	previous_secret_expires_at = NULL, updated_at = ?
WHERE id = ?`
	// qSwapWebhookSecrets is a compare-and-set on the four secret columns, so that a
	// rotation or a re-encryption never overwrites a secret set meanwhile.
	qSwapWebhookSecrets = `UPDATE tenants SET webhook_secret = ?, webhook_secret_sealed = NULLIF(?, ''),
	previous_webhook_secret = ?, previous_webhook_secret_sealed = NULLIF(?, ''), previous_secret_expires_at = ?,
	updated_at = ?
WHERE id = ? AND webhook_secret = ? AND COALESCE(webhook_secret_sealed, '') = ?
	AND previous_webhook_secret = ? AND COALESCE(previous_webhook_secret_sealed, '') = ?`
	qTenantsWithWebhookSecrets = `SELECT ` + tenantColumns + ` FROM tenants WHERE id > ? AND (webhook_secret <> ''
	OR previous_webhook_secret <> '' OR webhook_secret_sealed IS NOT NULL OR previous_webhook_secret_sealed IS NOT NULL)
ORDER BY id LIMIT 100`
)

// SwapTenantWebhookSecrets writes next's webhook secrets, current and previous, in the
// clear and sealed, with the previous one's expiry, only if the stored ones are still
// old's. It reports whether it wrote them.
func (st *Store) SwapTenantWebhookSecrets(ctx context.Context, old, next payment.Tenant) (bool, error) {
	if old.ID != next.ID {
		return false, payment.Errorf(payment.EINVALID, "webhook secrets of %s swapped for those of %s", old.ID, next.ID)
	}
	var expires sql.NullTime
	if !next.PreviousSecretExpiresAt.IsZero() {
		expires = sql.NullTime{Time: dbTime(next.PreviousSecretExpiresAt), Valid: true}
	}
	res, err := st.exec(ctx, nil, qSwapWebhookSecrets, next.WebhookSecret, next.WebhookSecretSealed,
		next.PreviousWebhookSecret, next.PreviousWebhookSecretSealed, expires, st.clock(),
		old.ID, old.WebhookSecret, old.WebhookSecretSealed, old.PreviousWebhookSecret, old.PreviousWebhookSecretSealed)
	if err != nil {
		return false, fmt.Errorf("mysql: swap webhook secrets of %s: %w", old.ID, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// TenantsWithWebhookSecrets returns up to 100 tenants holding a webhook secret, in the
// clear or sealed, whose id is greater than afterID, in id order.
func (st *Store) TenantsWithWebhookSecrets(ctx context.Context, afterID string) ([]payment.Tenant, error) {
	ts, err := st.listTenants(ctx, qTenantsWithWebhookSecrets, afterID)
	if err != nil {
		return nil, fmt.Errorf("mysql: tenants with webhook secrets: %w", err)
	}
	return ts, nil
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
