package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/paykit/paykit/payment"
)

const tenantColumns = `id, name, api_key_hash, notify_url, webhook_secret, alipay_app_id, alipay_seller_id,
	auto_refund_paid_after_close, created_at, previous_webhook_secret, previous_secret_expires_at`

const (
	qTenantByID          = `SELECT ` + tenantColumns + ` FROM tenants WHERE id = ?`
	qTenantByIDForUpdate = `SELECT ` + tenantColumns + ` FROM tenants WHERE id = ? FOR UPDATE`
	qTenantByHash        = `SELECT ` + tenantColumns + ` FROM tenants WHERE api_key_hash = ?`
	qInsertTenant        = `INSERT INTO tenants
	(id, name, api_key_hash, notify_url, webhook_secret, alipay_app_id, alipay_seller_id, auto_refund_paid_after_close,
	created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qUpdateTenant = `UPDATE tenants SET name = ?, api_key_hash = ?, notify_url = ?, webhook_secret = ?,
	alipay_app_id = ?, alipay_seller_id = ?, auto_refund_paid_after_close = ?, updated_at = ?
WHERE id = ?`
)

const (
	maxAPIKeyHash     = 64
	maxUpsertAttempts = 3
)

// UpsertTenant creates or updates a tenant by id. It deliberately avoids INSERT … ON
// DUPLICATE KEY UPDATE: with two unique keys (id, api_key_hash) that statement would
// update whichever row collided, letting one tenant's upsert overwrite another tenant
// that holds the same key hash. A key hash owned by another tenant is an ECONFLICT error.
func (st *Store) UpsertTenant(ctx context.Context, t payment.Tenant) error {
	if err := payment.ValidateTenantID(t.ID); err != nil {
		return err
	}
	if t.APIKeyHash == "" || len(t.APIKeyHash) > maxAPIKeyHash {
		return payment.Errorf(payment.EINVALID, "api key hash must be 1-%d characters", maxAPIKeyHash)
	}
	var err error
	for range maxUpsertAttempts {
		err = st.inTx(ctx, func(tx *sql.Tx) error {
			now := st.clock()
			_, err := st.getTenant(ctx, tx, qTenantByIDForUpdate, t.ID)
			switch {
			case err == nil:
				_, err = st.exec(ctx, tx, qUpdateTenant, t.Name, t.APIKeyHash, t.NotifyURL, t.WebhookSecret,
					t.AlipayAppID, t.AlipaySeller, t.AutoRefundPaidAfterClose, now, t.ID)
				return err
			case errors.Is(err, payment.ErrNotFound):
				created := dbTime(t.CreatedAt)
				if created.IsZero() {
					created = now
				}
				_, err = st.exec(ctx, tx, qInsertTenant, t.ID, t.Name, t.APIKeyHash, t.NotifyURL, t.WebhookSecret,
					t.AlipayAppID, t.AlipaySeller, t.AutoRefundPaidAfterClose, created, now)
				return err
			default:
				return err
			}
		})
		if err == nil || !IsDuplicate(err) {
			break
		}
		// Either the key hash belongs to another tenant, or another upsert inserted this
		// tenant first, in which case the next attempt updates it.
		owner, oerr := st.getTenant(ctx, nil, qTenantByHash, t.APIKeyHash)
		if oerr == nil && owner.ID != t.ID {
			return &payment.Error{
				Code:    payment.ECONFLICT,
				Message: "api key hash already belongs to another tenant",
				Err:     err,
			}
		}
	}
	if err != nil {
		return fmt.Errorf("mysql: upsert tenant %s: %w", t.ID, err)
	}
	return nil
}

// TenantByAPIKeyHash finds the tenant owning an API key hash, or an error wrapping
// payment.ErrNotFound.
func (st *Store) TenantByAPIKeyHash(ctx context.Context, hash string) (payment.Tenant, error) {
	t, err := st.getTenant(ctx, nil, qTenantByHash, hash)
	if err != nil {
		return payment.Tenant{}, fmt.Errorf("mysql: tenant by key: %w", err)
	}
	return t, nil
}

// GetTenant returns a tenant by id, or an error wrapping payment.ErrNotFound.
func (st *Store) GetTenant(ctx context.Context, id string) (payment.Tenant, error) {
	t, err := st.getTenant(ctx, nil, qTenantByID, id)
	if err != nil {
		return payment.Tenant{}, fmt.Errorf("mysql: get tenant %s: %w", id, err)
	}
	return t, nil
}

func (st *Store) getTenant(ctx context.Context, tx *sql.Tx, query string, arg string) (payment.Tenant, error) {
	var (
		t              payment.Tenant
		previousExpiry sql.NullTime
	)
	err := st.queryRow(ctx, tx, query, []any{arg}, func(row *sql.Row) error {
		return row.Scan(&t.ID, &t.Name, &t.APIKeyHash, &t.NotifyURL, &t.WebhookSecret, &t.AlipayAppID,
			&t.AlipaySeller, &t.AutoRefundPaidAfterClose, &t.CreatedAt, &t.PreviousWebhookSecret, &previousExpiry)
	})
	t.PreviousSecretExpiresAt = previousExpiry.Time
	return t, err
}
