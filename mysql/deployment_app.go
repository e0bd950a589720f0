package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/paykit/paykit/payment"
)

// The deployment's own Alipay apps (ALIPAY_*) are kept in tenant_alipay_apps like the
// apps tenants have left, under payment.DeploymentAppsTenant, which no tenant can have:
// every process records its default app there at start (KeepDeploymentApp), so that
// after ALIPAY_APP_ID changes the payments opened on the earlier default app are still
// queried, closed, refunded, verified and reconciled there (gateways.Resolver falls back
// to these rows as it does to a tenant's kept apps, and statement.Apps lists them).
// The first of them (the earliest created_at) is the app the payments recorded before
// payments named their app were opened on: BackfillDefaultApp writes it on them, and
// records on every row of the deployment that it finished (backfilled_at, migration
// 0055), so that any start resumes a walk an earlier one did not finish.

const (
	qDeploymentAppCount = `SELECT COUNT(*), MAX(backfilled_at) FROM tenant_alipay_apps WHERE tenant_id = ?`
	// A process without the keyring records the app with no keys, never wiping keys a
	// process with the keyring kept. A new row takes the deployment's backfilled_at, so
	// that forgetting the apps recorded before it never makes the walk look unfinished.
	qKeepDeploymentApp = `INSERT INTO tenant_alipay_apps
	(tenant_id, app_id, alipay_seller_id, alipay_credentials, created_at, left_at, backfilled_at)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE alipay_seller_id = VALUES(alipay_seller_id),
	alipay_credentials = IF(VALUES(alipay_credentials) <> '', VALUES(alipay_credentials), alipay_credentials),
	left_at = VALUES(left_at), backfilled_at = COALESCE(backfilled_at, VALUES(backfilled_at))`
	qDeploymentApps      = `SELECT ` + keptAppColumns + ` FROM tenant_alipay_apps WHERE tenant_id = ? ORDER BY app_id`
	qForgetDeploymentApp = `DELETE FROM tenant_alipay_apps WHERE tenant_id = ? AND app_id = ?`
	// The deployment's first app while no row of it says the walk finished, and no row
	// once one does: a handful of rows, read through the primary key.
	qDefaultAppToBackfill = `SELECT app_id FROM tenant_alipay_apps WHERE tenant_id = ?
AND NOT EXISTS (SELECT 1 FROM tenant_alipay_apps d WHERE d.tenant_id = ? AND d.backfilled_at IS NOT NULL)
ORDER BY created_at, app_id LIMIT 1`
	qDefaultAppBackfilled = `UPDATE tenant_alipay_apps SET backfilled_at = ? WHERE tenant_id = ? AND backfilled_at IS NULL`
	qMaxPaymentID         = `SELECT COALESCE(MAX(id), 0) FROM payments`
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
		var backfilled sql.NullTime
		if err := tx.QueryRowContext(ctx, qDeploymentAppCount, payment.DeploymentAppsTenant).Scan(&n, &backfilled); err != nil {
			return err
		}
		first = n == 0
		now := st.clock()
		_, err := st.exec(ctx, tx, qKeepDeploymentApp, payment.DeploymentAppsTenant, appID, seller, sealed, now, now, backfilled)
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
// there was one. The first app is refused while the payments from before payments named
// their app may not all be written with it: the walk would then write a later app.
func (st *Store) ForgetDeploymentApp(ctx context.Context, appID string) (bool, error) {
	pending, ok, err := st.DefaultAppToBackfill(ctx)
	if err != nil {
		return false, err
	}
	if ok && pending == appID {
		return false, fmt.Errorf("mysql: forget deployment app %s: the payments from before payments named their app are not all written with it yet; start a process on this build (or run paykit apps -keep) first", appID)
	}
	res, err := st.exec(ctx, nil, qForgetDeploymentApp, payment.DeploymentAppsTenant, appID)
	if err != nil {
		return false, fmt.Errorf("mysql: forget deployment app %s: %w", appID, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// DefaultAppToBackfill returns the deployment's first recorded app (the earliest
// created_at) while the payments recorded before payments named their app may not all
// be written with it (no row of the deployment has backfilled_at); ok is false once
// BackfillDefaultApp has finished, or while no app is recorded. It reads only the
// deployment's own rows, so that every start can afford it.
func (st *Store) DefaultAppToBackfill(ctx context.Context) (appID string, ok bool, err error) {
	err = st.queryRow(ctx, nil, qDefaultAppToBackfill, []any{payment.DeploymentAppsTenant, payment.DeploymentAppsTenant},
		func(row *sql.Row) error { return row.Scan(&appID) })
	switch {
	case errors.Is(err, payment.ErrNotFound):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("mysql: default app to backfill: %w", err)
	}
	return appID, true, nil
}

// BackfillDefaultApp writes appID on the payments (and their refunds) recorded before
// payments recorded their app (alipay_app_id ”), walking the primary key batch ids at a
// time so that each statement locks a bounded range and a big table is never scanned
// whole per statement; having walked them all, it records on the deployment's apps that
// it finished (DefaultAppToBackfill then has nothing to return). Run again, after an
// interruption, or by several processes at once, it changes nothing a run wrote: a row is
// written only while it names no app. It returns the number of rows written, payments and
// refunds together.
func (st *Store) BackfillDefaultApp(ctx context.Context, appID string, batch int64) (int64, error) {
	if batch <= 0 {
		batch = 5000
	}
	var maxID, total int64
	if err := st.db.QueryRowContext(ctx, qMaxPaymentID).Scan(&maxID); err != nil {
		return 0, fmt.Errorf("mysql: backfill default app: %w", err)
	}
	for lo := int64(0); lo < maxID; lo += batch {
		// In a transaction of its own for inTx's retries: processes starting at once walk
		// the same rows, and a lock conflict between them is no reason to fail a start.
		var n int64
		err := st.inTx(ctx, func(tx *sql.Tx) error {
			res, err := st.exec(ctx, tx, qBackfillDefaultApp, appID, appID, lo, lo+batch)
			if err != nil {
				return err
			}
			n, _ = res.RowsAffected()
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("mysql: backfill default app %s after id %d: %w", appID, lo, err)
		}
		total += n
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
	// The payments recorded after maxID was read name their app: none is left to write.
	if _, err := st.exec(ctx, nil, qDefaultAppBackfilled, st.clock(), payment.DeploymentAppsTenant); err != nil {
		return total, fmt.Errorf("mysql: backfill default app %s: record it finished: %w", appID, err)
	}
	return total, nil
}
