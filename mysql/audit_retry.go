package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/paykit/paykit/audit"
)

const (
	// A payment found unverifiable again by a later window keeps its first_at and its
	// schedule: only its detail is refreshed.
	qAddAuditRetry = `INSERT INTO audit_retries (scope, payment_no, first_at, next_at, attempts, detail)
VALUES (?, ?, ?, ?, 0, ?) ON DUPLICATE KEY UPDATE detail = VALUES(detail)`
	qDueAuditRetries = `SELECT payment_no, first_at, next_at, attempts, detail FROM audit_retries
WHERE scope = ? AND next_at <= ? ORDER BY next_at, payment_no LIMIT ?`
	qRescheduleAuditRetry = `UPDATE audit_retries SET next_at = ?, attempts = attempts + 1, detail = ?
WHERE scope = ? AND payment_no = ? AND attempts = ?`
	qDeleteAuditRetry = `DELETE FROM audit_retries WHERE scope = ? AND payment_no = ?`
)

// AddAuditRetry records that the audit of scope could not verify a payment: it is due
// again at next.
func (st *Store) AddAuditRetry(ctx context.Context, scope, paymentNo, detail string, next time.Time) error {
	if len(scope) > maxWatermarkScope {
		return fmt.Errorf("mysql: audit scope %q is longer than %d bytes", scope, maxWatermarkScope)
	}
	if _, err := st.exec(ctx, nil, qAddAuditRetry, scope, paymentNo, st.clock(), dbTime(next), truncate(detail, 512)); err != nil {
		return fmt.Errorf("mysql: add audit retry %s/%s: %w", scope, paymentNo, err)
	}
	return nil
}

// DueAuditRetries returns up to limit payments of scope due to be checked again at now,
// the longest due first.
func (st *Store) DueAuditRetries(ctx context.Context, scope string, now time.Time, limit int) ([]audit.Retry, error) {
	var out []audit.Retry
	err := st.query(ctx, qDueAuditRetries, []any{scope, dbTime(now), limit}, func(rows *sql.Rows) error {
		var r audit.Retry
		err := rows.Scan(&r.PaymentNo, &r.FirstAt, &r.NextAt, &r.Attempts, &r.Detail)
		out = append(out, r)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: due audit retries of %s: %w", scope, err)
	}
	return out, nil
}

// RescheduleAuditRetry moves a payment still unverifiable to next, counting the attempt;
// a retried call (attempts already moved) changes nothing.
func (st *Store) RescheduleAuditRetry(ctx context.Context, scope string, r audit.Retry, next time.Time, detail string) error {
	if _, err := st.exec(ctx, nil, qRescheduleAuditRetry, dbTime(next), truncate(detail, 512), scope, r.PaymentNo, r.Attempts); err != nil {
		return fmt.Errorf("mysql: reschedule audit retry %s/%s: %w", scope, r.PaymentNo, err)
	}
	return nil
}

// DeleteAuditRetry forgets a payment the audit of scope has checked, or given up on.
func (st *Store) DeleteAuditRetry(ctx context.Context, scope, paymentNo string) error {
	if _, err := st.exec(ctx, nil, qDeleteAuditRetry, scope, paymentNo); err != nil {
		return fmt.Errorf("mysql: delete audit retry %s/%s: %w", scope, paymentNo, err)
	}
	return nil
}
