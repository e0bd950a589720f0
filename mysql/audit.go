package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/paykit/paykit/audit"
	"github.com/paykit/paykit/payment"
)

var _ audit.Store = (*Store)(nil)

// The states of a payment.paid event, evaluated on payment_events rows: delivered needs
// nothing more; a dead one (given up on, never delivered) is reported apart, since no one
// sends it again; any other is still owed to its merchant.
const (
	auditEventDelivered = `e.delivered = 1`
	auditEventDead      = `e.dead = 1`
	// A payment.paid event missing from a PAID payment was delivered and purged if the
	// purge recorded deleting it (x, purged_events, migration 0054); one it did not record
	// was never written, however long ago the payment was paid. The purges that ran before
	// they recorded anything left only their horizon: a payment paid before that
	// (payment_events_unrecorded once a recording purge has run, with an hour for
	// Alipay's clock, which stamps paid_at, running ahead of ours) is counted as purged,
	// as it was then, since only delivered events are purged and an event is written
	// after its payment was paid.
	auditEventPurged = `CASE WHEN p.status = 1 AND (x.event_id IS NOT NULL OR p.paid_at < COALESCE(
		(SELECT h.horizon FROM purge_horizons h WHERE h.name = 'payment_events_unrecorded'),
		(SELECT h.horizon FROM purge_horizons h WHERE h.name = 'payment_events')) + INTERVAL 1 HOUR) THEN 2 ELSE 0 END`
)

// auditRecordSelect reads each payment of the inner select p with its grant, its
// payment.paid event (by event_id, built with CONCAT from the affixes of EventID) or, if
// it has none, the purge's record of deleting it (uk_purged_events_event_id) and, for a
// PAID payment without the re-purchase opt-in, the first earlier PAID payment of its
// order (ordered as idx_payments_tenant_order is), for a PAID payment the first later
// PAID one of its order without the opt-in, when its oldest unsettled notification
// arrived (by idx_channel_notifications_payment_no), and the latest change
// of the payment, its refunds (idx_refunds_payment) and its events
// (idx_payment_events_payment_no).
const auditRecordSelect = `SELECT p.*,
	EXISTS (SELECT 1 FROM benefit_grants g WHERE g.tenant_id = p.tenant_id AND g.payment_no = p.payment_no),
	CASE WHEN e.id IS NULL THEN ` + auditEventPurged + ` WHEN ` + auditEventDelivered + ` THEN 2 WHEN ` + auditEventDead + ` THEN 3 ELSE 1 END,
	COALESCE(e.attempts, 0), COALESCE(e.last_error, ''),
	COALESCE(CASE WHEN p.status = 1 AND p.repurchase = 0 THEN
		(SELECT q.payment_no FROM payments q
		 WHERE q.tenant_id = p.tenant_id AND q.order_id = p.order_id AND q.status = 1 AND (q.created_at, q.id) < (p.created_at, p.id)
		 ORDER BY q.created_at, q.id LIMIT 1) END, ''),
	COALESCE(CASE WHEN p.status = 1 THEN
		(SELECT q.payment_no FROM payments q
		 WHERE q.tenant_id = p.tenant_id AND q.order_id = p.order_id AND q.status = 1 AND q.repurchase = 0 AND (q.created_at, q.id) > (p.created_at, p.id)
		 ORDER BY q.created_at, q.id LIMIT 1) END, ''),
	(SELECT MIN(n.received_at) FROM channel_notifications n
	 WHERE n.payment_no = p.payment_no AND n.verified = 1 AND n.dispatch_due_at IS NOT NULL),
	GREATEST(p.updated_at,
		COALESCE((SELECT MAX(r.updated_at) FROM refunds r WHERE r.payment_no = p.payment_no), p.updated_at),
		COALESCE((SELECT MAX(x.changed_at) FROM payment_events x WHERE x.payment_no = p.payment_no), p.updated_at))
FROM (SELECT ` + paymentColumns + ` FROM payments WHERE payment_no IN (%s)) AS p
LEFT JOIN payment_events e ON p.status = 1 AND e.event_id = CONCAT(?, p.payment_no, ?)
LEFT JOIN purged_events x ON p.status = 1 AND e.id IS NULL AND x.event_id = CONCAT(?, p.payment_no, ?)`

// The changed rows of each audit source, one page in (time, id) order past a position:
// a range of idx_payments_updated, idx_refunds_updated or idx_payment_events_changed,
// whose entries carry the primary key the ties are broken on. A refund or event whose
// payment's own row changed in the window is left out: the payments source reads it.
// Most of the events source is that (a paid payment's event is delivered right after),
// so the join spares reading those payments' facts only to skip them.
const (
	qChangedPayments = `SELECT updated_at, id, payment_no FROM payments
	WHERE updated_at >= ? AND updated_at < ? AND (updated_at > ? OR (updated_at = ? AND id > ?)) AND (? = '' OR tenant_id = ?)
	ORDER BY updated_at, id LIMIT ?`
	qChangedRefunds = `SELECT r.updated_at, r.id, r.payment_no FROM refunds r JOIN payments p ON p.payment_no = r.payment_no
	WHERE r.updated_at >= ? AND r.updated_at < ? AND (r.updated_at > ? OR (r.updated_at = ? AND r.id > ?)) AND (? = '' OR r.tenant_id = ?)
	AND NOT (p.updated_at >= ? AND p.updated_at < ?)
	ORDER BY r.updated_at, r.id LIMIT ?`
	qChangedEvents = `SELECT e.changed_at, e.id, e.payment_no FROM payment_events e JOIN payments p ON p.payment_no = e.payment_no
	WHERE e.changed_at >= ? AND e.changed_at < ? AND (e.changed_at > ? OR (e.changed_at = ? AND e.id > ?)) AND (? = '' OR e.tenant_id = ?)
	AND NOT (p.updated_at >= ? AND p.updated_at < ?)
	ORDER BY e.changed_at, e.id LIMIT ?`
)

// qAnomalyKinds scans payment_anomalies, whose unique index leads with kind; the audit
// asks only for the few payments Alipay reports paid that are not PAID locally. A kind
// recorded about several subjects is named once.
const qAnomalyKinds = `SELECT DISTINCT kind FROM payment_anomalies WHERE payment_no = ? ORDER BY kind`

// ChangedPage reads up to limit (default 100, at most 1000) rows of after.Source that
// changed in [since, until) past after, and returns their payments' facts and the cursor
// that follows them.
func (st *Store) ChangedPage(ctx context.Context, tenantID string, since, until time.Time, after audit.Cursor, limit int) ([]audit.Record, audit.Cursor, error) {
	var q string
	switch after.Source {
	case audit.SourcePayments:
		q = qChangedPayments
	case audit.SourceRefunds:
		q = qChangedRefunds
	case audit.SourceEvents:
		q = qChangedEvents
	default:
		return nil, audit.Cursor{Source: audit.SourceEnd}, nil
	}
	limit = clampLimit(limit)
	// The zero position sorts before every row of the window.
	at := after.At
	if at.IsZero() {
		at = since
	}
	next := after
	var nos []string
	seen := map[string]bool{}
	rows := 0
	args := []any{dbTime(since), dbTime(until), dbTime(at), dbTime(at), after.ID, tenantID, tenantID}
	if after.Source != audit.SourcePayments {
		args = append(args, dbTime(since), dbTime(until))
	}
	err := st.query(ctx, q, append(args, limit),
		func(r *sql.Rows) error {
			var no string
			if err := r.Scan(&next.At, &next.ID, &no); err != nil {
				return err
			}
			rows++
			if !seen[no] {
				seen[no] = true
				nos = append(nos, no)
			}
			return nil
		})
	if err != nil {
		return nil, after, fmt.Errorf("mysql: audit changes of source %d after %s/%d: %w", after.Source, after.At.Format(time.RFC3339Nano), after.ID, err)
	}
	if rows < limit {
		next = audit.Cursor{Source: after.Source + 1}
	}
	recs, err := st.AuditRecords(ctx, nos)
	if err != nil {
		return nil, after, err
	}
	return recs, next, nil
}

// AuditRecords reads the audit's facts of the given payments, up to 1000.
func (st *Store) AuditRecords(ctx context.Context, paymentNos []string) ([]audit.Record, error) {
	recs := []audit.Record{}
	if len(paymentNos) == 0 {
		return recs, nil
	}
	if len(paymentNos) > maxListLimit {
		return nil, fmt.Errorf("mysql: audit records: %d payments, at most %d at once", len(paymentNos), maxListLimit)
	}
	// The list is padded with its last entry to a power of two (at least 8), so that a
	// handful of prepared statements serve every page size.
	n := 8
	for n < len(paymentNos) {
		n *= 2
	}
	args := make([]any, 0, n+2)
	for i := range n {
		args = append(args, paymentNos[min(i, len(paymentNos)-1)])
	}
	prefix, suffix := eventIDAffixes(payment.EventPaymentPaid)
	args = append(args, prefix, suffix, prefix, suffix)
	q := fmt.Sprintf(auditRecordSelect, strings.TrimSuffix(strings.Repeat("?, ", n), ", "))
	err := st.query(ctx, q, args, func(rows *sql.Rows) error {
		var r audit.Record
		var unsettled sql.NullTime
		p, err := scanPayment(extraScanner{rows, []any{&r.Granted, &r.Event, &r.EventAttempts, &r.EventLastError, &r.EarlierPaid, &r.LaterPaid, &unsettled, &r.Changed}})
		r.Payment, r.UnsettledNotificationSince = p, unsettled.Time
		recs = append(recs, r)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: audit records of %d payments: %w", len(paymentNos), err)
	}
	return recs, nil
}

// AnomalyKinds returns the kinds of the anomalies recorded for a payment, sorted, each once.
func (st *Store) AnomalyKinds(ctx context.Context, paymentNo string) ([]string, error) {
	kinds := []string{}
	err := st.query(ctx, qAnomalyKinds, []any{paymentNo}, func(rows *sql.Rows) error {
		var k string
		err := rows.Scan(&k)
		kinds = append(kinds, k)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: anomaly kinds of %s: %w", paymentNo, err)
	}
	return kinds, nil
}

// eventIDAffixes returns what EventID puts before and after the payment_no, so that SQL
// can build a row's event id without a second copy of the format.
func eventIDAffixes(eventType string) (prefix, suffix string) {
	const marker = "\x00"
	prefix, suffix, _ = strings.Cut(EventID(marker, eventType), marker)
	return prefix, suffix
}

// extraScanner scans a payment row followed by more columns.
type extraScanner struct {
	s     scanner
	extra []any
}

func (e extraScanner) Scan(dest ...any) error { return e.s.Scan(append(dest, e.extra...)...) }

// The watermark of a scheduled audit: read, created, and moved on only from where the
// caller read it.
const (
	qAuditWatermark       = `SELECT audited_until FROM audit_watermarks WHERE scope = ?`
	qCreateAuditWatermark = `INSERT IGNORE INTO audit_watermarks (scope, audited_until, updated_at) VALUES (?, ?, ?)`
	qMoveAuditWatermark   = `UPDATE audit_watermarks SET audited_until = ?, updated_at = ? WHERE scope = ? AND audited_until = ?`
)

// AuditWatermark returns the end of the last window the audit of scope completed; zero
// if it never completed one.
func (st *Store) AuditWatermark(ctx context.Context, scope string) (time.Time, error) {
	var at time.Time
	err := st.queryRow(ctx, nil, qAuditWatermark, []any{scope}, func(r *sql.Row) error { return r.Scan(&at) })
	if errors.Is(err, payment.ErrNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("mysql: audit watermark of %s: %w", scope, err)
	}
	return at, nil
}

// maxWatermarkScope is the width of audit_watermarks.scope.
const maxWatermarkScope = 191

// AdvanceAuditWatermark moves the watermark of scope from from (zero: there is none
// yet) to to. It reports false, and changes nothing, if the watermark is elsewhere; a
// watermark already at to (a retried advance) counts as moved.
func (st *Store) AdvanceAuditWatermark(ctx context.Context, scope string, from, to time.Time) (bool, error) {
	if len(scope) > maxWatermarkScope {
		// INSERT IGNORE would store it truncated, never to be found again.
		return false, fmt.Errorf("mysql: audit watermark scope %q is longer than %d bytes", scope, maxWatermarkScope)
	}
	q, args := qMoveAuditWatermark, []any{dbTime(to), st.clock(), scope, dbTime(from)}
	if from.IsZero() {
		q, args = qCreateAuditWatermark, []any{scope, dbTime(to), st.clock()}
	}
	n, err := st.execCount(ctx, "advance audit watermark of "+scope, q, args...)
	if err != nil || n == 1 {
		return n == 1, err
	}
	cur, err := st.AuditWatermark(ctx, scope)
	if err != nil {
		return false, err
	}
	return cur.Equal(dbTime(to)), nil
}
