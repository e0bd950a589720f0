package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/paykit/paykit/payment"
)

// qInsertAnomaly keeps the first record of a (kind, payment_no, subject), so the code that
// detects an anomaly may record it on every retry, and another subject of the same kind
// on the payment (a second refund, another notification) is an anomaly of its own. Only
// last_seen_at moves: a resolved anomaly seen again shows it.
const qInsertAnomaly = `INSERT INTO payment_anomalies (kind, tenant_id, payment_no, subject, trade_no, amount_fen, detail, created_at, last_seen_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE last_seen_at = VALUES(last_seen_at)`

// maxSubject is the length of payment_anomalies.subject (migration 0042).
const maxSubject = 128

const maxDetail = 60000

// minDatetime is the earliest value of a DATETIME column.
var minDatetime = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)

// RecordAnomaly stores an operator-visible anomaly. Recording the same (Kind, PaymentNo,
// Subject) again changes nothing. A zero CreatedAt means now.
func (st *Store) RecordAnomaly(ctx context.Context, a payment.Anomaly) error {
	if a.Kind == "" || a.PaymentNo == "" {
		return payment.Errorf(payment.EINVALID, "an anomaly needs a kind and a payment_no")
	}
	at := dbTime(a.CreatedAt)
	if at.IsZero() {
		at = st.clock()
	}
	if _, err := st.exec(ctx, nil, qInsertAnomaly, truncate(a.Kind, 64), truncate(a.TenantID, maxRef),
		truncate(a.PaymentNo, maxRef), truncate(a.Subject, maxSubject), truncate(a.TradeNo, maxRef), int64(a.Amount),
		truncate(a.Detail, maxDetail), at, st.clock()); err != nil {
		return fmt.Errorf("mysql: record anomaly %s %s %q: %w", a.Kind, a.PaymentNo, a.Subject, err)
	}
	return nil
}

// qListAnomalies lists the anomalies recorded or seen again since a time, the last seen
// first: an anomaly recorded again moves only last_seen_at (NULL on a row recorded before
// migration 0049 and not since), and one that came back is listed as seen then. Its limit
// newest by GREATEST(created_at, last_seen_at) are among the limit newest by created_at
// and the limit newest by last_seen_at (a row newer on either is newer on the greatest),
// so each is a backward range of its own key, however many anomalies the table holds, and
// the rows are read by their ids from there (STRAIGHT_JOIN: the ids first, then the
// table), at most twice limit of them.
const qListAnomalies = `SELECT STRAIGHT_JOIN ` + anomalyColumns + `
FROM (
	(SELECT id FROM payment_anomalies FORCE INDEX (idx_payment_anomalies_created)
	 WHERE created_at >= ? ORDER BY created_at DESC, id DESC LIMIT ?)
	UNION
	(SELECT id FROM payment_anomalies FORCE INDEX (idx_payment_anomalies_last_seen)
	 WHERE last_seen_at >= ? ORDER BY last_seen_at DESC, id DESC LIMIT ?)
) AS seen JOIN payment_anomalies a ON a.id = seen.id
ORDER BY GREATEST(a.created_at, COALESCE(a.last_seen_at, a.created_at)) DESC, a.id DESC LIMIT ?`

// ListAnomalies returns up to limit anomalies recorded, or recorded again, at or after
// since, the last seen first. It is for operators; nothing on the payment path reads
// anomalies.
func (st *Store) ListAnomalies(ctx context.Context, since time.Time, limit int) ([]payment.Anomaly, error) {
	out := []payment.Anomaly{}
	if since.IsZero() {
		// The driver sends a zero time as 0000-00-00, which MySQL orders before every
		// date and TiDB matches with none.
		since = minDatetime
	}
	since, limit = dbTime(since), clampLimit(limit)
	err := st.query(ctx, qListAnomalies, []any{since, limit, since, limit, limit}, func(rows *sql.Rows) error {
		a, err := scanAnomaly(rows.Scan)
		out = append(out, a)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: list anomalies: %w", err)
	}
	return out, nil
}

const qAnomalyByKind = `SELECT ` + anomalyColumns + `
FROM payment_anomalies WHERE kind = ? AND payment_no = ? ORDER BY id LIMIT 1`

// GetAnomaly returns the anomaly of one kind recorded for a payment, the first recorded if
// there are several (about several subjects), or an error wrapping payment.ErrNotFound.
func (st *Store) GetAnomaly(ctx context.Context, kind, paymentNo string) (payment.Anomaly, error) {
	var a payment.Anomaly
	err := st.queryRow(ctx, nil, qAnomalyByKind, []any{kind, paymentNo}, func(row *sql.Row) error {
		var err error
		a, err = scanAnomaly(row.Scan)
		return err
	})
	if err != nil {
		return payment.Anomaly{}, fmt.Errorf("mysql: get anomaly %s %s: %w", kind, paymentNo, err)
	}
	return a, nil
}

// anomalyColumns are the columns scanAnomaly reads, in its order.
const anomalyColumns = `kind, tenant_id, payment_no, subject, trade_no, amount_fen, detail, created_at, resolved_at, resolution, last_seen_at`

// scanAnomaly reads anomalyColumns with scan.
func scanAnomaly(scan func(dest ...any) error) (payment.Anomaly, error) {
	var (
		a        payment.Anomaly
		amount   int64
		resolved sql.NullTime
		seen     sql.NullTime
	)
	err := scan(&a.Kind, &a.TenantID, &a.PaymentNo, &a.Subject, &a.TradeNo, &amount, &a.Detail, &a.CreatedAt, &resolved, &a.Resolution, &seen)
	a.Amount = payment.Amount(amount)
	a.ResolvedAt, a.LastSeenAt = resolved.Time, seen.Time
	return a, err
}

// Resolving an anomaly is a compare-and-set on resolved_at: the first resolution stands.
const (
	qResolveAnomaly = `UPDATE payment_anomalies SET resolved_at = ?, resolution = ?
WHERE kind = ? AND payment_no = ? AND subject = ? AND resolved_at IS NULL`
	qAnomalyBySubject = `SELECT ` + anomalyColumns + ` FROM payment_anomalies WHERE kind = ? AND payment_no = ? AND subject = ?`
	// A single-table DELETE takes no index hint in MySQL's syntax; TiDB reads the
	// optimizer hint, which MySQL and MariaDB ignore.
	qPurgeResolvedAnomalies = `DELETE /*+ USE_INDEX(payment_anomalies, idx_payment_anomalies_resolved) */ FROM payment_anomalies
WHERE resolved_at < ? AND (last_seen_at IS NULL OR last_seen_at < ?) ORDER BY resolved_at LIMIT ?`
)

// maxResolution is the length of payment_anomalies.resolution (migration 0047).
const maxResolution = 512

// ResolveAnomaly marks the anomaly (kind, paymentNo, subject) resolved now with the
// operator's note, and returns it; resolved is false when it was already resolved, and
// then the first resolution stands. An anomaly that does not exist is payment.ErrNotFound.
func (st *Store) ResolveAnomaly(ctx context.Context, kind, paymentNo, subject, note string) (a payment.Anomaly, resolved bool, err error) {
	if strings.TrimSpace(note) == "" {
		return payment.Anomaly{}, false, payment.Errorf(payment.EINVALID, "resolving an anomaly needs a note saying how it was resolved")
	}
	n, err := st.execCount(ctx, "resolve anomaly", qResolveAnomaly, st.clock(), truncate(note, maxResolution), kind, paymentNo, subject)
	if err != nil {
		return payment.Anomaly{}, false, err
	}
	err = st.queryRow(ctx, nil, qAnomalyBySubject, []any{kind, paymentNo, subject}, func(row *sql.Row) error {
		var err error
		a, err = scanAnomaly(row.Scan)
		return err
	})
	if err != nil {
		return payment.Anomaly{}, false, fmt.Errorf("mysql: resolve anomaly %s %s %q: %w", kind, paymentNo, subject, err)
	}
	return a, n == 1, nil
}

// PurgeResolvedAnomalies implements payment.AnomalyRetention.
func (st *Store) PurgeResolvedAnomalies(ctx context.Context, before time.Time, limit int) (int64, error) {
	return st.execCount(ctx, "purge resolved anomalies", qPurgeResolvedAnomalies, dbTime(before), dbTime(before), clampLimit(limit))
}
