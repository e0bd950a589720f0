package mysql

import (
	"context"
	"database/sql"
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
)

// qAuditPage reads one page of the window by id, then looks up each payment's grant, its
// payment.paid event (by event_id, built with CONCAT from the affixes of EventID) and,
// for a PAID payment without the re-purchase opt-in, the first earlier PAID payment of
// its order (ordered as idx_payments_tenant_order is), and when its oldest unsettled
// notification arrived (by idx_channel_notifications_payment_no). Paging by id keeps each
// read bounded however large the window.
const qAuditPage = `SELECT p.*,
	EXISTS (SELECT 1 FROM benefit_grants g WHERE g.tenant_id = p.tenant_id AND g.payment_no = p.payment_no),
	CASE WHEN e.id IS NULL THEN 0 WHEN ` + auditEventDelivered + ` THEN 2 WHEN ` + auditEventDead + ` THEN 3 ELSE 1 END,
	COALESCE(e.attempts, 0), COALESCE(e.last_error, ''),
	COALESCE(CASE WHEN p.status = 1 AND p.repurchase = 0 THEN
		(SELECT q.payment_no FROM payments q
		 WHERE q.tenant_id = p.tenant_id AND q.order_id = p.order_id AND q.status = 1 AND q.id < p.id
		 ORDER BY q.created_at, q.id LIMIT 1) END, ''),
	(SELECT MIN(n.received_at) FROM channel_notifications n
	 WHERE n.payment_no = p.payment_no AND n.verified = 1 AND n.dispatch_due_at IS NOT NULL)
FROM (SELECT ` + paymentColumns + ` FROM payments
	WHERE id > ? AND created_at >= ? AND created_at < ? AND (? = '' OR tenant_id = ?) ORDER BY id LIMIT ?) AS p
LEFT JOIN payment_events e ON p.status = 1 AND e.event_id = CONCAT(?, p.payment_no, ?)
ORDER BY p.id`

// qAnomalyKinds scans payment_anomalies, whose unique index leads with kind; the audit
// asks only for the few payments Alipay reports paid that are not PAID locally.
const qAnomalyKinds = `SELECT kind FROM payment_anomalies WHERE payment_no = ? ORDER BY kind`

// AuditPage returns up to limit (default 100, at most 1000) payments created in
// [since, until) with an id greater than afterID, in id order, with what the audit
// checks about each.
func (st *Store) AuditPage(ctx context.Context, tenantID string, since, until time.Time, afterID int64, limit int) ([]audit.Record, error) {
	prefix, suffix := eventIDAffixes(payment.EventPaymentPaid)
	recs := []audit.Record{}
	err := st.query(ctx, qAuditPage, []any{afterID, dbTime(since), dbTime(until), tenantID, tenantID, clampLimit(limit), prefix, suffix},
		func(rows *sql.Rows) error {
			var r audit.Record
			var unsettled sql.NullTime
			p, err := scanPayment(extraScanner{rows, []any{&r.Granted, &r.Event, &r.EventAttempts, &r.EventLastError, &r.EarlierPaid, &unsettled}})
			r.Payment, r.UnsettledNotificationSince = p, unsettled.Time
			recs = append(recs, r)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("mysql: audit page after id %d: %w", afterID, err)
	}
	return recs, nil
}

// AnomalyKinds returns the kinds of the anomalies recorded for a payment, sorted.
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
