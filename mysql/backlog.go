package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/paykit/paykit/payment"
)

const (
	// qOldestUndelivered reads only idx_payment_events_due (delivered, dead, …,
	// created_at): the live undelivered events, which a healthy outbox keeps near none.
	qOldestUndelivered = `SELECT MIN(created_at) FROM payment_events WHERE delivered = 0 AND dead = 0`
	// qDeadEvents counts a range of idx_payment_events_due; a dead event delivered after
	// all is no longer dead.
	qDeadEvents = `SELECT COUNT(*) FROM payment_events WHERE delivered = 0 AND dead = 1`
	// qPendingExpired counts a range of idx_payments_status_expire.
	qPendingExpired = `SELECT COUNT(*) FROM payments WHERE status = 0 AND expire_at < ?`
	// qOldestUnsettled reads a range of idx_channel_notifications_due: the unsettled
	// notifications only.
	qOldestUnsettled = `SELECT MIN(received_at) FROM channel_notifications FORCE INDEX (idx_channel_notifications_due) WHERE dispatch_due_at IS NOT NULL`
)

// Backlog returns the outbox's oldest live undelivered event and its dead events, and
// the number of pending payments whose expire_at is before expiredBefore, and the oldest
// unsettled notification. Each is one query on an index.
func (st *Store) Backlog(ctx context.Context, expiredBefore time.Time) (payment.Backlog, error) {
	var (
		b         payment.Backlog
		oldest    sql.NullTime
		unsettled sql.NullTime
	)
	steps := []struct {
		query string
		args  []any
		dest  any
	}{
		{qOldestUndelivered, nil, &oldest},
		{qDeadEvents, nil, &b.DeadEvents},
		{qPendingExpired, []any{dbTime(expiredBefore)}, &b.PendingExpired},
		{qOldestUnsettled, nil, &unsettled},
	}
	for _, s := range steps {
		err := st.queryRow(ctx, nil, s.query, s.args, func(row *sql.Row) error { return row.Scan(s.dest) })
		if err != nil {
			return payment.Backlog{}, fmt.Errorf("mysql: backlog: %w", err)
		}
	}
	b.OldestUndeliveredAt, b.OldestUnsettledNotificationAt = oldest.Time, unsettled.Time
	return b, nil
}
