package mysql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/paykit/paykit/payment"
)

// The deployment's own Alipay apps (ALIPAY_*) are kept in tenant_alipay_apps like the
// apps tenants have left, under payment.DeploymentAppsTenant, which no tenant can have:
// every process records its default app there at start (KeepDeploymentApp), so that
// after ALIPAY_APP_ID changes the payments opened on the earlier default app are still
// queried, closed, refunded, verified and reconciled there (gateways.Resolver falls back
// to these rows as it does to a tenant's kept apps, and statement.Apps lists them).

const (
	qDeploymentAppCount = `SELECT COUNT(*) FROM tenant_alipay_apps WHERE tenant_id = ?`
	// A process without the keyring records the app with no keys, never wiping keys a
	// process with the keyring kept.
	qKeepDeploymentApp = `INSERT INTO tenant_alipay_apps
	(tenant_id, app_id, alipay_seller_id, alipay_credentials, created_at, left_at)
VALUES (?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE alipay_seller_id = VALUES(alipay_seller_id),
	alipay_credentials = IF(VALUES(alipay_credentials) <> '', VALUES(alipay_credentials), alipay_credentials),
	left_at = VALUES(left_at)`
	qDeploymentApps      = `SELECT ` + keptAppColumns + ` FROM tenant_alipay_apps WHERE tenant_id = ? ORDER BY app_id`
	qForgetDeploymentApp = `DELETE FROM tenant_alipay_apps WHERE tenant_id = ? AND app_id = ?`
	qMaxPaymentID        = `SELECT COALESCE(MAX(id), 0) FROM payments`
	// As migration 0032 does for the tenants with their own app: a refund takes its
	// payment's app in the same statement.
	qBackfillDefaultApp = `UPDATE payments p
LEFT JOIN refunds r ON r.payment_no = p.payment_no AND r.alipay_app_id = ''
SET p.alipay_app_id = ?, r.alipay_app_id = ?
WHERE p.id > ? AND p.id <= ? AND p.alipay_app_id = ''`
)

// KeepDeploymentApp records appID as the deployment's default app, with its seller and
// its keys sealed for payment.AlipayCredentialsAAD(payment.DeploymentAppsTenant) (""
// when the process has no keyring: the row then says only that the app was the
// default). left_at is the last time a process started on it. It reports whether the
// deployment had no app recorded before (the first start since apps are recorded).
func (st *Store) KeepDeploymentApp(ctx context.Context, appID, seller, sealed string) (first bool, err error) {
	err = st.inTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, qDeploymentAppCount, payment.DeploymentAppsTenant).Scan(&n); err != nil {
			return err
		}
		first = n == 0
		now := st.clock()
		_, err := st.exec(ctx, tx, qKeepDeploymentApp, payment.DeploymentAppsTenant, appID, seller, sealed, now, now)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("mysql: keep deployment app %s: %w", appID, err)
	}
	return first, nil
}

// DeploymentApps returns every app the deployment has had as its default.
func (st *Store) DeploymentApps(ctx context.Context) ([]payment.KeptAlipayApp, error) {
	var out []payment.KeptAlipayApp
	err := st.query(ctx, qDeploymentApps, []any{payment.DeploymentAppsTenant}, func(rows *sql.Rows) error {
		k, err := scanKeptApp(rows)
		out = append(out, k)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: deployment apps: %w", err)
	}
	return out, nil
}

// ForgetDeploymentApp drops an earlier default app of the deployment; it reports whether
// there was one.
func (st *Store) ForgetDeploymentApp(ctx context.Context, appID string) (bool, error) {
	res, err := st.exec(ctx, nil, qForgetDeploymentApp, payment.DeploymentAppsTenant, appID)
	if err != nil {
		return false, fmt.Errorf("mysql: forget deployment app %s: %w", appID, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// BackfillDefaultApp writes appID on the payments (and their refunds) recorded before
// payments recorded their app (alipay_app_id ”), walking the primary key batch ids at a
// time so that each statement locks a bounded range and a big table is never scanned
// whole per statement. Run again, or after an interruption, it changes nothing it wrote.
// It returns the number of rows written, payments and refunds together.
func (st *Store) BackfillDefaultApp(ctx context.Context, appID string, batch int64) (int64, error) {
	if batch <= 0 {
		batch = 5000
	}
	var maxID, total int64
	if err := st.db.QueryRowContext(ctx, qMaxPaymentID).Scan(&maxID); err != nil {
		return 0, fmt.Errorf("mysql: backfill default app: %w", err)
	}
	for lo := int64(0); lo < maxID; lo += batch {
		res, err := st.exec(ctx, nil, qBackfillDefaultApp, appID, appID, lo, lo+batch)
		if err != nil {
			return total, fmt.Errorf("mysql: backfill default app %s after id %d: %w", appID, lo, err)
		}
		n, _ := res.RowsAffected()
		total += n
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
	return total, nil
}
