package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/paykit/paykit/payment"
)

const tenantColumns = `id, name, api_key_hash, notify_url, webhook_secret, alipay_app_id, alipay_seller_id,
	auto_refund_paid_after_close, created_at, COALESCE(alipay_credentials, ''), previous_webhook_secret,
	previous_secret_expires_at`

const (
	qTenantByID          = `SELECT ` + tenantColumns + ` FROM tenants WHERE id = ?`
	qTenantByIDForUpdate = `SELECT ` + tenantColumns + ` FROM tenants WHERE id = ? FOR UPDATE`
	qTenantByHash        = `SELECT ` + tenantColumns + ` FROM tenants WHERE api_key_hash = ?`
	qTenantsByAlipayApp  = `SELECT ` + tenantColumns + ` FROM tenants
WHERE alipay_app_id = ? AND alipay_credentials IS NOT NULL ORDER BY id LIMIT 100`
	qTenantsWithCreds = `SELECT ` + tenantColumns + ` FROM tenants WHERE alipay_credentials IS NOT NULL AND id > ?
ORDER BY id LIMIT 100`
	qSetTenantCredentials  = `UPDATE tenants SET alipay_credentials = NULLIF(?, ''), updated_at = ? WHERE id = ?`
	qSwapTenantCredentials = `UPDATE tenants SET alipay_credentials = ?, updated_at = ? WHERE id = ? AND alipay_credentials = ?`
	qInsertTenant          = `INSERT INTO tenants
	(id, name, api_key_hash, notify_url, webhook_secret, alipay_app_id, alipay_seller_id, auto_refund_paid_after_close,
	created_at, updated_at, alipay_credentials)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULLIF(?, ''))`
	// An empty sealed value keeps the stored one.
	qUpdateTenant = `UPDATE tenants SET name = ?, api_key_hash = ?, notify_url = ?, webhook_secret = ?,
	alipay_app_id = ?, alipay_seller_id = ?, auto_refund_paid_after_close = ?, updated_at = ?,
	alipay_credentials = COALESCE(NULLIF(?, ''), alipay_credentials)
WHERE id = ?`
)

const (
	maxAPIKeyHash     = 64
	maxUpsertAttempts = 3
)

// UpsertTenant creates or updates a tenant by id. Sealed Alipay credentials, if given,
// are written with the app_id and seller in the same statement; empty ones leave the
// stored credentials as they are (SetTenantAlipayCredentials clears them). It deliberately avoids INSERT … ON
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
					t.AlipayAppID, t.AlipaySeller, t.AutoRefundPaidAfterClose, now, t.AlipayCredentialsSealed, t.ID)
				return err
			case errors.Is(err, payment.ErrNotFound):
				created := dbTime(t.CreatedAt)
				if created.IsZero() {
					created = now
				}
				_, err = st.exec(ctx, tx, qInsertTenant, t.ID, t.Name, t.APIKeyHash, t.NotifyURL, t.WebhookSecret,
					t.AlipayAppID, t.AlipaySeller, t.AutoRefundPaidAfterClose, created, now, t.AlipayCredentialsSealed)
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
	var t payment.Tenant
	err := st.queryRow(ctx, tx, query, []any{arg}, func(row *sql.Row) error {
		var err error
		t, err = scanTenant(row)
		return err
	})
	return t, err
}

// scanTenant reads one row of tenantColumns.
func scanTenant(row interface{ Scan(...any) error }) (payment.Tenant, error) {
	var (
		t              payment.Tenant
		previousExpiry sql.NullTime
	)
	err := row.Scan(&t.ID, &t.Name, &t.APIKeyHash, &t.NotifyURL, &t.WebhookSecret, &t.AlipayAppID,
		&t.AlipaySeller, &t.AutoRefundPaidAfterClose, &t.CreatedAt, &t.AlipayCredentialsSealed,
		&t.PreviousWebhookSecret, &previousExpiry)
	t.PreviousSecretExpiresAt = previousExpiry.Time
	return t, err
}

// SetTenantAlipayCredentials stores a tenant's sealed Alipay credentials; an empty value
// removes them (the tenant uses the default app again). A tenant that does not exist is
// ErrNotFound.
func (st *Store) SetTenantAlipayCredentials(ctx context.Context, tenantID, sealed string) error {
	res, err := st.exec(ctx, nil, qSetTenantCredentials, sealed, st.clock(), tenantID)
	if err != nil {
		return fmt.Errorf("mysql: set tenant credentials %s: %w", tenantID, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		if _, err := st.GetTenant(ctx, tenantID); err != nil {
			return err
		}
	}
	return nil
}

// SwapTenantAlipayCredentials replaces a tenant's sealed credentials only if they are
// still old, so a re-encryption never overwrites keys set meanwhile. It reports whether
// it replaced them.
func (st *Store) SwapTenantAlipayCredentials(ctx context.Context, tenantID, old, sealed string) (bool, error) {
	res, err := st.exec(ctx, nil, qSwapTenantCredentials, sealed, st.clock(), tenantID, old)
	if err != nil {
		return false, fmt.Errorf("mysql: swap tenant credentials %s: %w", tenantID, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// TenantsByAlipayApp returns the tenants that hold their own keys for an Alipay app_id
// (at most 100; tenants on the default app without keys of their own are not listed).
func (st *Store) TenantsByAlipayApp(ctx context.Context, appID string) ([]payment.Tenant, error) {
	ts, err := st.listTenants(ctx, qTenantsByAlipayApp, appID)
	if err != nil {
		return nil, fmt.Errorf("mysql: tenants by alipay app: %w", err)
	}
	return ts, nil
}

// TenantsWithAlipayCredentials returns up to 100 tenants with sealed credentials whose
// id is greater than afterID, in id order.
func (st *Store) TenantsWithAlipayCredentials(ctx context.Context, afterID string) ([]payment.Tenant, error) {
	ts, err := st.listTenants(ctx, qTenantsWithCreds, afterID)
	if err != nil {
		return nil, fmt.Errorf("mysql: tenants with credentials: %w", err)
	}
	return ts, nil
}

func (st *Store) listTenants(ctx context.Context, query, arg string) ([]payment.Tenant, error) {
	var out []payment.Tenant
	err := st.query(ctx, query, []any{arg}, func(rows *sql.Rows) error {
		t, err := scanTenant(rows)
		if err != nil {
			return err
		}
		out = append(out, t)
		return nil
	})
	return out, err
}

// qTenantOpenPayment finds one payment of a tenant that still depends on the tenant's
// Alipay app: pending (the buyer can pay it there), or paid since a time (it can be
// refunded there). It reads through idx_payments_tenant_order.
const qTenantOpenPayment = `SELECT payment_no FROM payments
WHERE tenant_id = ? AND (status = 0 OR (status = 1 AND paid_at >= ?)) LIMIT 1`

// TenantOpenPayment returns the payment_no of one payment of the tenant that is pending
// or was paid since paidSince, or "" if there is none.
func (st *Store) TenantOpenPayment(ctx context.Context, tenantID string, paidSince time.Time) (string, error) {
	var no string
	err := st.queryRow(ctx, nil, qTenantOpenPayment, []any{tenantID, dbTime(paidSince)}, func(row *sql.Row) error {
		return row.Scan(&no)
	})
	if errors.Is(err, payment.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("mysql: open payment of tenant %s: %w", tenantID, err)
	}
	return no, nil
}
