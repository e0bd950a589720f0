package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/paykit/paykit/payment"
)

// The inbox's statements. Unsettled rows are exactly those with a dispatch_due_at, so
// each of them is a range of idx_channel_notifications_due, however many settled rows the
// table holds.
const (
	// qSettleNotification settles once: a second settle (a dispatch retried after its
	// first settle committed) keeps the first outcome and time.
	qSettleNotification = `UPDATE channel_notifications
SET outcome = ?, settled_at = ?, dispatch_due_at = NULL, updated_at = ? WHERE id = ? AND settled_at IS NULL`
	// qSettlePaidNotifications settles the payment notifications whose payment is PAID
	// with their trade_no: the effect a paid notification exists for. A refund
	// notification carries the same trade_no, and only its refund's outcome settles it.
	qSettlePaidNotifications = `UPDATE channel_notifications n FORCE INDEX (idx_channel_notifications_due)
JOIN payments p ON p.payment_no = n.payment_no
SET n.settled_at = ?, n.dispatch_due_at = NULL, n.updated_at = ?
WHERE n.dispatch_due_at IS NOT NULL AND n.verified = 1 AND n.refund = 0 AND p.status = ? AND p.trade_no = n.trade_no AND n.trade_no <> ''`
	qDueNotifications = `SELECT ` + notificationColumns + ` FROM channel_notifications FORCE INDEX (idx_channel_notifications_due)
WHERE dispatch_due_at <= ? ORDER BY dispatch_due_at LIMIT ?`
	qClaimNotification = `UPDATE channel_notifications
SET dispatch_attempts = dispatch_attempts + 1, dispatch_due_at = ?, updated_at = ?
WHERE id = ? AND dispatch_attempts = ? AND dispatch_due_at IS NOT NULL`
	qArmNotification = `UPDATE channel_notifications SET dispatch_due_at = ?, updated_at = ?
WHERE id = ? AND verified = 1 AND settled_at IS NULL AND dispatch_due_at IS NULL`
	// A single-table DELETE takes no index hint in MySQL's syntax; TiDB, which without
	// statistics would read the due index, reads the optimizer hint, which MySQL and MariaDB
	// ignore.
	qPurgeNotifications = `DELETE /*+ USE_INDEX(channel_notifications, idx_channel_notifications_received) */ FROM channel_notifications
WHERE received_at < ? AND dispatch_due_at IS NULL ORDER BY received_at LIMIT ?`
	qUnsettledNotifications = `SELECT COUNT(*), MIN(received_at) FROM channel_notifications FORCE INDEX (idx_channel_notifications_due)
WHERE dispatch_due_at IS NOT NULL AND received_at < ?`
)

// SettleNotification implements payment.Inbox.
func (st *Store) SettleNotification(ctx context.Context, id int64, outcome string) error {
	now := st.clock()
	if _, err := st.exec(ctx, nil, qSettleNotification, truncate(outcome, maxOutcome), now, now, id); err != nil {
		return fmt.Errorf("mysql: settle notification %d: %w", id, err)
	}
	return nil
}

// SettlePaidNotifications implements payment.Inbox.
func (st *Store) SettlePaidNotifications(ctx context.Context, now time.Time) (int64, error) {
	now = dbTime(now)
	return st.execCount(ctx, "settle paid notifications", qSettlePaidNotifications, now, now, payment.StatusPaid)
}

// DueNotifications implements payment.Inbox.
func (st *Store) DueNotifications(ctx context.Context, now time.Time, limit int) ([]payment.ChannelNotification, error) {
	var out []payment.ChannelNotification
	err := st.query(ctx, qDueNotifications, []any{dbTime(now), limit}, func(rows *sql.Rows) error {
		var n payment.ChannelNotification
		if err := scanNotification(rows, &n); err != nil {
			return err
		}
		out = append(out, n)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: due notifications: %w", err)
	}
	return out, nil
}

// ClaimNotificationDispatch implements payment.Inbox.
func (st *Store) ClaimNotificationDispatch(ctx context.Context, id int64, attempts int, next time.Time) (bool, error) {
	n, err := st.execCount(ctx, fmt.Sprintf("claim notification %d", id), qClaimNotification, dbTime(next), st.clock(), id, attempts)
	return n == 1, err
}

// ArmNotification implements payment.Inbox.
func (st *Store) ArmNotification(ctx context.Context, id int64, due time.Time) error {
	if _, err := st.exec(ctx, nil, qArmNotification, dbTime(due), st.clock(), id); err != nil {
		return fmt.Errorf("mysql: arm notification %d: %w", id, err)
	}
	return nil
}

// PurgeNotifications implements payment.Inbox.
func (st *Store) PurgeNotifications(ctx context.Context, before time.Time, limit int) (int64, error) {
	return st.execCount(ctx, "purge notifications", qPurgeNotifications, dbTime(before), limit)
}

// UnsettledNotifications implements payment.Inbox.
func (st *Store) UnsettledNotifications(ctx context.Context, before time.Time) (int64, time.Time, error) {
	var (
		n      int64
		oldest sql.NullTime
	)
	err := st.queryRow(ctx, nil, qUnsettledNotifications, []any{dbTime(before)}, func(row *sql.Row) error {
		return row.Scan(&n, &oldest)
	})
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("mysql: unsettled notifications: %w", err)
	}
	return n, oldest.Time, nil
}
