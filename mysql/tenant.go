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
	previous_secret_expires_at, COALESCE(webhook_secret_sealed, ''), COALESCE(previous_webhook_secret_sealed, '')`

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
	created_at, updated_at, alipay_credentials, webhook_secret_sealed)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULLIF(?, ''), NULLIF(?, ''))`
	// An empty sealed value keeps the stored one.
	qUpdateTenant = `UPDATE tenants SET name = ?, api_key_hash = ?, notify_url = ?, webhook_secret = ?,
	webhook_secret_sealed = NULLIF(?, ''), alipay_app_id = ?, alipay_seller_id = ?, auto_refund_paid_after_close = ?, updated_at = ?,
	alipay_credentials = COALESCE(NULLIF(?, ''), alipay_credentials)
WHERE id = ?`
)

const (
	maxAPIKeyHash     = 64
	maxUpsertAttempts = 3
)

// UpsertTenant creates or updates a tenant by id. It writes the current webhook secret as
// given, in the clear and sealed, and leaves the previous one of a rotation. Sealed Alipay credentials, if given,
// are written with the app_id and seller in the same statement; empty ones leave the
// stored credentials as they are (SetTenantAlipayCredentials clears them). A tenant
// moved to another app_id keeps its old app's keys (keepAlipayApp), in the same
// transaction. It deliberately avoids INSERT … ON
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
		err = st.inTx(ctx, func(tx *sql.Tx) error { return st.upsertTenant(ctx, tx, t) })
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

// upsertTenant updates the tenant, keeping the keys of the app it leaves, or inserts it,
// and makes its API key hash the one that authenticates.
func (st *Store) upsertTenant(ctx context.Context, tx *sql.Tx, t payment.Tenant) error {
	now := st.clock()
	old, err := st.getTenant(ctx, tx, qTenantByIDForUpdate, t.ID)
	switch {
	case err == nil:
		if old.AlipayAppID != t.AlipayAppID {
			if err := st.keepAlipayApp(ctx, tx, old, now); err != nil {
				return err
			}
		}
		_, err = st.exec(ctx, tx, qUpdateTenant, t.Name, t.APIKeyHash, t.NotifyURL, t.WebhookSecret, t.WebhookSecretSealed,
			t.AlipayAppID, t.AlipaySeller, t.AutoRefundPaidAfterClose, now, t.AlipayCredentialsSealed, t.ID)
		if err != nil {
			return err
		}
		return st.syncAPIKey(ctx, tx, t.ID, t.APIKeyHash, old.APIKeyHash, now)
	case errors.Is(err, payment.ErrNotFound):
		created := dbTime(t.CreatedAt)
		if created.IsZero() {
			created = now
		}
		_, err = st.exec(ctx, tx, qInsertTenant, t.ID, t.Name, t.APIKeyHash, t.NotifyURL, t.WebhookSecret,
			t.AlipayAppID, t.AlipaySeller, t.AutoRefundPaidAfterClose, created, now, t.AlipayCredentialsSealed, t.WebhookSecretSealed)
		if err != nil {
			return err
		}
		return st.syncAPIKey(ctx, tx, t.ID, t.APIKeyHash, "", now)
	default:
		return err
	}
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
		&t.PreviousWebhookSecret, &previousExpiry, &t.WebhookSecretSealed, &t.PreviousWebhookSecretSealed)
	t.PreviousSecretExpiresAt = previousExpiry.Time
	return t, err
}

// SetTenantAlipayCredentials stores a tenant's sealed Alipay credentials; an empty value
// removes them (the tenant uses the default app again), and its app's keys are kept
// (keepAlipayApp) in the same transaction. A tenant that does not exist is ErrNotFound.
func (st *Store) SetTenantAlipayCredentials(ctx context.Context, tenantID, sealed string) error {
	err := st.inTx(ctx, func(tx *sql.Tx) error {
		old, err := st.getTenant(ctx, tx, qTenantByIDForUpdate, tenantID)
		if err != nil {
			return err
		}
		now := st.clock()
		if sealed == "" {
			if err := st.keepAlipayApp(ctx, tx, old, now); err != nil {
				return err
			}
		}
		_, err = st.exec(ctx, tx, qSetTenantCredentials, sealed, now, tenantID)
		return err
	})
	if err != nil {
		return fmt.Errorf("mysql: set tenant credentials %s: %w", tenantID, err)
	}
	return nil
}

// qKeepAlipayApp writes the app a tenant leaves. Leaving it again (after coming back)
// refreshes its seller, keys and left_at.
const qKeepAlipayApp = `INSERT INTO tenant_alipay_apps
	(tenant_id, app_id, alipay_seller_id, alipay_credentials, created_at, left_at)
VALUES (?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE alipay_seller_id = ?, alipay_credentials = ?, left_at = ?`

// keepAlipayApp keeps the keys of the app old holds, as it leaves it: the payments opened
// on it are still acted on there (payment.Gateways.ForPayment). A tenant on the default
// app holds no keys of its own, and there is nothing to keep. The sealed bytes are kept
// as they are: the seal is bound to the tenant, not to the app.
func (st *Store) keepAlipayApp(ctx context.Context, tx *sql.Tx, old payment.Tenant, now time.Time) error {
	if old.AlipayCredentialsSealed == "" || old.AlipayAppID == "" {
		return nil
	}
	if _, err := st.exec(ctx, tx, qKeepAlipayApp, old.ID, old.AlipayAppID, old.AlipaySeller, old.AlipayCredentialsSealed, now, now,
		old.AlipaySeller, old.AlipayCredentialsSealed, now); err != nil {
		return fmt.Errorf("keep alipay app %s of tenant %s: %w", old.AlipayAppID, old.ID, err)
	}
	return nil
}

const keptAppColumns = `tenant_id, app_id, alipay_seller_id, alipay_credentials, left_at`

const (
	qKeptAlipayApp       = `SELECT ` + keptAppColumns + ` FROM tenant_alipay_apps WHERE tenant_id = ? AND app_id = ?`
	qKeptAlipayAppsByApp = `SELECT ` + keptAppColumns + ` FROM tenant_alipay_apps WHERE app_id = ?
ORDER BY tenant_id LIMIT 100`
	qKeptAlipayAppIDs = `SELECT DISTINCT app_id FROM tenant_alipay_apps WHERE left_at >= ? AND alipay_credentials <> '' ORDER BY app_id`
	qKeptAlipayApps   = `SELECT ` + keptAppColumns + ` FROM tenant_alipay_apps WHERE (tenant_id, app_id) > (?, ?)
ORDER BY tenant_id, app_id LIMIT 100`
	qSwapKeptCredentials = `UPDATE tenant_alipay_apps SET alipay_credentials = ?
WHERE tenant_id = ? AND app_id = ? AND alipay_credentials = ?`
)

func scanKeptApp(row interface{ Scan(...any) error }) (payment.KeptAlipayApp, error) {
	var k payment.KeptAlipayApp
	err := row.Scan(&k.TenantID, &k.AppID, &k.SellerID, &k.CredentialsSealed, &k.LeftAt)
	return k, err
}

// KeptAlipayApp returns the app appID a tenant has left, with its kept keys, or an error
// wrapping payment.ErrNotFound.
func (st *Store) KeptAlipayApp(ctx context.Context, tenantID, appID string) (payment.KeptAlipayApp, error) {
	var k payment.KeptAlipayApp
	err := st.queryRow(ctx, nil, qKeptAlipayApp, []any{tenantID, appID}, func(row *sql.Row) error {
		var err error
		k, err = scanKeptApp(row)
		return err
	})
	if err != nil {
		return k, fmt.Errorf("mysql: kept alipay app %s of tenant %s: %w", appID, tenantID, err)
	}
	return k, nil
}

// KeptAlipayAppsByApp returns the tenants' kept keys of an app_id (at most 100).
func (st *Store) KeptAlipayAppsByApp(ctx context.Context, appID string) ([]payment.KeptAlipayApp, error) {
	var out []payment.KeptAlipayApp
	err := st.query(ctx, qKeptAlipayAppsByApp, []any{appID}, func(rows *sql.Rows) error {
		k, err := scanKeptApp(rows)
		out = append(out, k)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: kept alipay apps of %s: %w", appID, err)
	}
	return out, nil
}

// KeptAlipayAppIDs returns the app_ids some tenant, or the deployment, has left since a
// time, each once: those whose keys are kept (an earlier default app of a deployment
// without PAYKIT_SECRETS_KEYS has none, and no bill of it can be fetched).
func (st *Store) KeptAlipayAppIDs(ctx context.Context, leftSince time.Time) ([]string, error) {
	var out []string
	err := st.query(ctx, qKeptAlipayAppIDs, []any{dbTime(leftSince)}, func(rows *sql.Rows) error {
		var id string
		out = append(out, id)
		return rows.Scan(&out[len(out)-1])
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: kept alipay app ids: %w", err)
	}
	return out, nil
}

// KeptAlipayApps returns up to 100 kept apps after (afterTenant, afterApp), in that
// order, to page through them all.
func (st *Store) KeptAlipayApps(ctx context.Context, afterTenant, afterApp string) ([]payment.KeptAlipayApp, error) {
	var out []payment.KeptAlipayApp
	err := st.query(ctx, qKeptAlipayApps, []any{afterTenant, afterApp}, func(rows *sql.Rows) error {
		k, err := scanKeptApp(rows)
		out = append(out, k)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: kept alipay apps: %w", err)
	}
	return out, nil
}

// SwapKeptAlipayCredentials replaces a kept app's sealed keys only if they are still
// old, as SwapTenantAlipayCredentials does; it reports whether it replaced them.
func (st *Store) SwapKeptAlipayCredentials(ctx context.Context, tenantID, appID, old, sealed string) (bool, error) {
	res, err := st.exec(ctx, nil, qSwapKeptCredentials, sealed, tenantID, appID, old)
	if err != nil {
		return false, fmt.Errorf("mysql: swap kept credentials %s/%s: %w", tenantID, appID, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
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
