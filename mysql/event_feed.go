package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/paykit/paykit/payment"
)

const (
	// The feed pages by feed_seq (migration 0033), never by id: uk_payment_events_tenant_feed_seq.
	qTenantEvents = `SELECT feed_seq, ` + eventColumns + ` FROM payment_events
WHERE tenant_id = ? AND feed_seq > ? ORDER BY feed_seq LIMIT ?`
	qTenantEvent = `SELECT COALESCE(feed_seq, 0), ` + eventColumns + ` FROM payment_events WHERE tenant_id = ? AND event_id = ?`
	// qFeedHorizon reads the last entry of the tenant's range of purged_events' primary key.
	qFeedHorizon = `SELECT COALESCE(MAX(feed_seq), 0) FROM purged_events WHERE tenant_id = ?`
	// qClaimEventForRedelivery takes an event that no sweeper or other redelivery holds,
	// delivered or dead ones too. Moving next_attempt_at defeats the compare-and-set of a
	// sweeper that read the event before.
	qClaimEventForRedelivery = `UPDATE payment_events SET next_attempt_at = ?, claimed_until = ?
WHERE tenant_id = ? AND event_id = ? AND (claimed_until IS NULL OR claimed_until <= ?)`
	// qReleaseEventClaim ends a redelivery's hold that recording its outcome did not end
	// (that of an event delivered before), and only that hold.
	qReleaseEventClaim = `UPDATE payment_events SET claimed_until = NULL,
	next_attempt_at = CASE WHEN delivered = 1 THEN NULL ELSE next_attempt_at END
WHERE event_id = ? AND claimed_until = ?`
)

// ListTenantEvents returns up to limit (default 100, at most 1000) of a tenant's outbox
// events whose Seq is above afterSeq, in Seq order.
func (st *Store) ListTenantEvents(ctx context.Context, tenantID string, afterSeq int64, limit int) ([]payment.Event, error) {
	evs := []payment.Event{}
	err := st.query(ctx, qTenantEvents, []any{tenantID, afterSeq, clampLimit(limit)}, func(rows *sql.Rows) error {
		var seq int64
		ev, err := scanEvent(rows, &seq)
		ev.Seq = seq
		evs = append(evs, ev)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: list events of %s: %w", tenantID, err)
	}
	return evs, nil
}

// FeedHorizon returns the highest feed position of the tenant's events the purge deleted
// (migration 0054), 0 if none: the oldest cursor still valid.
func (st *Store) FeedHorizon(ctx context.Context, tenantID string) (int64, error) {
	var seq int64
	if err := st.queryRow(ctx, nil, qFeedHorizon, []any{tenantID}, func(row *sql.Row) error { return row.Scan(&seq) }); err != nil {
		return 0, fmt.Errorf("mysql: feed horizon of %s: %w", tenantID, err)
	}
	return seq, nil
}

// GetTenantEvent returns a tenant's event by id; another tenant's is ErrNotFound.
func (st *Store) GetTenantEvent(ctx context.Context, tenantID, eventID string) (payment.Event, error) {
	var ev payment.Event
	err := st.queryRow(ctx, nil, qTenantEvent, []any{tenantID, eventID}, func(row *sql.Row) error {
		var (
			seq int64
			err error
		)
		ev, err = scanEvent(row, &seq)
		ev.Seq = seq
		return err
	})
	if err != nil {
		return payment.Event{}, fmt.Errorf("mysql: get event %s: %w", eventID, err)
	}
	return ev, nil
}

// ClaimEventForRedelivery takes a tenant's event for one delivery attempt until until,
// unless a sweeper or another redelivery holds it at now (claimed=false).
func (st *Store) ClaimEventForRedelivery(ctx context.Context, tenantID, eventID string, now, until time.Time) (bool, error) {
	res, err := st.exec(ctx, nil, qClaimEventForRedelivery, dbTime(until), dbTime(until), tenantID, eventID, dbTime(now))
	if err != nil {
		return false, fmt.Errorf("mysql: claim event %s for redelivery: %w", eventID, err)
	}
	claimed, err := affected(res)
	if err != nil {
		return false, fmt.Errorf("mysql: claim event %s for redelivery: %w", eventID, err)
	}
	return claimed, nil
}

// ReleaseEventClaim ends the hold taken until until, if it is still that one.
func (st *Store) ReleaseEventClaim(ctx context.Context, eventID string, until time.Time) error {
	if _, err := st.exec(ctx, nil, qReleaseEventClaim, eventID, dbTime(until)); err != nil {
		return fmt.Errorf("mysql: release event claim %s: %w", eventID, err)
	}
	return nil
}
