package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/paykit/paykit/payment"
)

const eventColumns = `event_id, tenant_id, payment_no, type, payload, delivered, attempts, last_error, created_at, delivered_at,
	next_attempt_at, dead`

const (
	qEventByID = `SELECT ` + eventColumns + ` FROM payment_events WHERE event_id = ?`
	// qEventWithTenant reads an event and its tenant in one statement (both derived
	// tables merge into a join by primary and unique key); their columns are
	// eventColumns then tenantColumns.
	qEventWithTenant = `SELECT e.*, t.* FROM (SELECT ` + eventColumns + ` FROM payment_events WHERE event_id = ?) e
JOIN (SELECT ` + tenantColumns + ` FROM tenants) t ON t.id = e.tenant_id`
	qEventByIDForUpdate = `SELECT id, ` + eventColumns + ` FROM payment_events WHERE event_id = ? FOR UPDATE`
	// qDueEvents ranks the due events of each tenant in an index-only scan of
	// idx_payment_events_due and reads the payloads of the chosen ones only. Ordering by
	// the rank first interleaves the tenants, so a limit cuts every tenant's share alike.
	// NULL next_attempt_at (never failed) sorts first.
	qDueEvents = `SELECT ` + eventColumns + ` FROM payment_events JOIN (
	SELECT id AS due_id, ROW_NUMBER() OVER (PARTITION BY tenant_id ORDER BY next_attempt_at, id) AS tenant_rank
	FROM payment_events
	WHERE delivered = 0 AND dead = 0 AND (next_attempt_at IS NULL OR next_attempt_at <= ?) AND created_at < ?
) due ON due.due_id = payment_events.id
WHERE due.tenant_rank <= ?
ORDER BY due.tenant_rank, next_attempt_at, id LIMIT ?`
	// qClaimEvent compares next_attempt_at with the value read (<=> matches NULL too), so
	// of two sweepers that read the same due event only the first one moves it.
	qClaimEvent = `UPDATE payment_events SET next_attempt_at = ?, claimed_until = ?
WHERE event_id = ? AND delivered = 0 AND dead = 0 AND next_attempt_at <=> ?`
	qEventFailed = `UPDATE payment_events SET attempts = ?, last_error = ?, next_attempt_at = ?, dead = ?, claimed_until = NULL
WHERE id = ?`
	qEventDelivered = `UPDATE payment_events SET delivered = 1, delivered_at = ?, attempts = attempts + 1, last_error = '',
	next_attempt_at = NULL, dead = 0, claimed_until = NULL
WHERE event_id = ? AND delivered = 0`
)

const maxLastError = 1024

// defaultEventsPerTenant is DueEvents' share of one tenant when the caller gives none.
const defaultEventsPerTenant = 20

// GetEvent returns an outbox event by id, or an error wrapping payment.ErrNotFound.
func (st *Store) GetEvent(ctx context.Context, eventID string) (payment.Event, error) {
	var ev payment.Event
	err := st.queryRow(ctx, nil, qEventByID, []any{eventID}, func(row *sql.Row) error {
		var err error
		ev, err = scanEvent(row)
		return err
	})
	if err != nil {
		return payment.Event{}, fmt.Errorf("mysql: get event %s: %w", eventID, err)
	}
	return ev, nil
}

// GetEventWithTenant returns an event and its tenant, read in one statement. An event
// that does not exist is payment.ErrNotFound; an event whose tenant does not exist is
// another error.
func (st *Store) GetEventWithTenant(ctx context.Context, eventID string) (payment.Event, payment.Tenant, error) {
	var (
		ev payment.Event
		tn payment.Tenant
	)
	err := st.queryRow(ctx, nil, qEventWithTenant, []any{eventID}, func(row *sql.Row) error {
		var err error
		// The event's columns come first: scanEvent's Scan is scanTenant's, with the
		// event's destinations in front of the tenant's.
		ev, err = scanEvent(scanFunc(func(evDest ...any) error {
			var terr error
			tn, terr = scanTenant(scanFunc(func(tnDest ...any) error { return row.Scan(append(evDest, tnDest...)...) }))
			return terr
		}))
		return err
	})
	if errors.Is(err, payment.ErrNotFound) {
		// No event, or no tenant for it (tenants are never deleted): only the first is
		// payment.ErrNotFound.
		if ev, err = st.GetEvent(ctx, eventID); err == nil {
			err = fmt.Errorf("its tenant %s does not exist", ev.TenantID)
		}
	}
	if err != nil {
		return payment.Event{}, payment.Tenant{}, fmt.Errorf("mysql: get event %s with its tenant: %w", eventID, err)
	}
	return ev, tn, nil
}

// DueEvents returns up to limit (default 100, at most 1000) undelivered, live events
// created before createdBefore and due at now, at most perTenant (default 20) of each
// tenant, round robin across tenants and most overdue first within each.
func (st *Store) DueEvents(ctx context.Context, now, createdBefore time.Time, perTenant, limit int) ([]payment.Event, error) {
	if perTenant <= 0 {
		perTenant = defaultEventsPerTenant
	}
	evs := []payment.Event{}
	args := []any{dbTime(now), dbTime(createdBefore), perTenant, clampLimit(limit)}
	err := st.query(ctx, qDueEvents, args, func(rows *sql.Rows) error {
		ev, err := scanEvent(rows)
		evs = append(evs, ev)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: due events: %w", err)
	}
	return evs, nil
}

// ClaimEvent moves ev's next_attempt_at to until if it still holds the value ev was
// read with and the event is undelivered and not dead.
func (st *Store) ClaimEvent(ctx context.Context, ev payment.Event, until time.Time) (bool, error) {
	res, err := st.exec(ctx, nil, qClaimEvent, dbTime(until), dbTime(until), ev.EventID, nullTime(ev.NextAttemptAt))
	if err != nil {
		return false, fmt.Errorf("mysql: claim event %s: %w", ev.EventID, err)
	}
	claimed, err := affected(res)
	if err != nil {
		return false, fmt.Errorf("mysql: claim event %s: %w", ev.EventID, err)
	}
	return claimed, nil
}

// MarkEventAttempt records a failed delivery attempt made at the given time, under the
// event's row lock, and schedules the next one by retry. It does nothing to an event
// that was delivered meanwhile.
func (st *Store) MarkEventAttempt(ctx context.Context, eventID, lastError string, at time.Time, retry payment.EventRetry) (payment.Event, bool, error) {
	retry = retry.WithDefaults()
	var (
		ev   payment.Event
		died bool
	)
	err := st.inTx(ctx, func(tx *sql.Tx) error {
		died = false
		var id int64
		err := st.queryRow(ctx, tx, qEventByIDForUpdate, []any{eventID}, func(row *sql.Row) error {
			var err error
			ev, err = scanEvent(row, &id)
			return err
		})
		if err != nil || ev.Delivered {
			return err
		}
		attempts := ev.Attempts + 1
		next := dbTime(at.Add(retry.Delay(attempts)))
		dead := ev.Dead || attempts >= retry.MaxAttempts
		msg := truncate(lastError, maxLastError)
		if _, err := st.exec(ctx, tx, qEventFailed, attempts, msg, next, dead, id); err != nil {
			return err
		}
		died = dead && !ev.Dead
		ev.Attempts, ev.LastError, ev.NextAttemptAt, ev.Dead = attempts, msg, next, dead
		return nil
	})
	if err != nil {
		return payment.Event{}, false, fmt.Errorf("mysql: mark event attempt %s: %w", eventID, err)
	}
	return ev, died, nil
}

// MarkEventDelivered records a successful delivery; repeating it changes nothing. A
// dead event that an operator got delivered after all is delivered and no longer dead.
func (st *Store) MarkEventDelivered(ctx context.Context, eventID string) error {
	res, err := st.exec(ctx, nil, qEventDelivered, st.clock(), eventID)
	if err != nil {
		return fmt.Errorf("mysql: mark event delivered %s: %w", eventID, err)
	}
	if err := st.eventTouched(ctx, eventID, res); err != nil {
		return fmt.Errorf("mysql: mark event delivered %s: %w", eventID, err)
	}
	return nil
}

// eventTouched returns nil if the update changed the event or the event exists (it was
// delivered already), and an error wrapping payment.ErrNotFound if it does not.
func (st *Store) eventTouched(ctx context.Context, eventID string, res sql.Result) error {
	changed, err := affected(res)
	if err != nil || changed {
		return err
	}
	_, err = st.GetEvent(ctx, eventID)
	return err
}

// scanEvent scans eventColumns, after the destinations in pre (such as the row id).
// scanFunc is a scanner made of a function.
type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }

func scanEvent(s scanner, pre ...any) (payment.Event, error) {
	var (
		ev          payment.Event
		payload     string
		deliveredAt sql.NullTime
		nextAt      sql.NullTime
	)
	dest := append(pre, &ev.EventID, &ev.TenantID, &ev.PaymentNo, &ev.Type, &payload, &ev.Delivered,
		&ev.Attempts, &ev.LastError, &ev.CreatedAt, &deliveredAt, &nextAt, &ev.Dead)
	if err := s.Scan(dest...); err != nil {
		return payment.Event{}, err
	}
	ev.Payload = []byte(payload)
	ev.DeliveredAt = deliveredAt.Time
	ev.NextAttemptAt = nextAt.Time
	return ev, nil
}

// qUTCNow is the database's clock, in UTC as DATETIME(6) columns are written.
const qUTCNow = `SELECT UTC_TIMESTAMP(6)`

// MinEventRetention is the least time a delivered event is kept, whatever the caller's
// clock says: the purge's horizon is never later than this before the database's clock.
const MinEventRetention = 7 * 24 * time.Hour

// The purge of delivered events: the horizon moves first (never back), then one batch,
// oldest first, a range of idx_payment_events_undelivered (delivered, created_at), is
// recorded in purged_events (migration 0054) and deleted in one transaction.
const (
	qMoveEventHorizon = `INSERT INTO purge_horizons (name, horizon, updated_at) VALUES ('payment_events', ?, ?)
ON DUPLICATE KEY UPDATE horizon = GREATEST(horizon, VALUES(horizon)), updated_at = VALUES(updated_at)`
	// qKeepUnrecordedEventHorizon keeps, once, the horizon the purges reached before they
	// recorded what they deleted (the earliest DATETIME if none ran): the audit counts a
	// payment.paid event missing from a payment paid before it as purged, as it did.
	qKeepUnrecordedEventHorizon = `INSERT IGNORE INTO purge_horizons (name, horizon, updated_at)
SELECT 'payment_events_unrecorded', x.h, ? FROM
	(SELECT COALESCE(MAX(horizon), '1000-01-01') AS h FROM purge_horizons WHERE name = 'payment_events') AS x`
	qDeliveredEventsToPurge = `SELECT /*+ USE_INDEX(payment_events, idx_payment_events_undelivered) */ id, tenant_id, COALESCE(feed_seq, id), event_id
FROM payment_events WHERE delivered = 1 AND created_at < ? ORDER BY created_at LIMIT ? FOR UPDATE`
	// The rows to record and delete, as many as the batch has (%s).
	qRecordPurgedEvents = `INSERT INTO purged_events (tenant_id, feed_seq, event_id, purged_at) VALUES %s
ON DUPLICATE KEY UPDATE purged_at = VALUES(purged_at)`
	qDeletePurgedEvents = `DELETE FROM payment_events WHERE id IN (%s)`
)

// PurgeDeliveredEvents implements payment.EventRetention. The horizon is recorded before
// anything is deleted, and each event deleted leaves its row in purged_events, so that the
// events feed refuses a cursor a purge has passed and the audit tells a payment.paid event
// that was purged from one that was never written.
func (st *Store) PurgeDeliveredEvents(ctx context.Context, before time.Time, limit int) (int64, error) {
	if limit <= 0 || limit > maxListLimit {
		limit = maxListLimit
	}
	// A worker whose clock runs ahead must not move the horizon (which never moves back)
	// into the recent past: it is held to a week before the database's clock.
	var dbNow time.Time
	if err := st.queryRow(ctx, nil, qUTCNow, nil, func(row *sql.Row) error { return row.Scan(&dbNow) }); err != nil {
		return 0, fmt.Errorf("mysql: purge delivered events: read the clock: %w", err)
	}
	if latest := dbNow.Add(-MinEventRetention); before.After(latest) {
		before = latest
	}
	now := st.clock()
	if _, err := st.exec(ctx, nil, qKeepUnrecordedEventHorizon, now); err != nil {
		return 0, fmt.Errorf("mysql: purge delivered events: keep the unrecorded horizon: %w", err)
	}
	if _, err := st.exec(ctx, nil, qMoveEventHorizon, dbTime(before), now); err != nil {
		return 0, fmt.Errorf("mysql: purge delivered events: move the horizon: %w", err)
	}
	var n int64
	err := st.inTx(ctx, func(tx *sql.Tx) (err error) {
		n, err = st.purgeEventsTx(ctx, tx, before, limit, now)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("mysql: purge delivered events: %w", err)
	}
	return n, nil
}

// purgeEventsTx deletes up to limit delivered events created before before in tx, each
// recorded in purged_events at now, and returns how many it deleted.
func (st *Store) purgeEventsTx(ctx context.Context, tx *sql.Tx, before time.Time, limit int, now time.Time) (int64, error) {
	s, err := st.stmt(ctx, tx, qDeliveredEventsToPurge)
	if err != nil {
		return 0, err
	}
	rows, err := s.QueryContext(ctx, dbTime(before), limit)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var ids, purged []any
	for rows.Next() {
		var (
			id, seq         int64
			tenantID, evtID string
		)
		if err := rows.Scan(&id, &tenantID, &seq, &evtID); err != nil {
			return 0, err
		}
		ids = append(ids, id)
		purged = append(purged, tenantID, seq, evtID, now)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	if _, err := st.exec(ctx, tx, fmt.Sprintf(qRecordPurgedEvents, strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?), ", len(ids)), ", ")), purged...); err != nil {
		return 0, fmt.Errorf("record: %w", err)
	}
	res, err := st.exec(ctx, tx, fmt.Sprintf(qDeletePurgedEvents, placeholders(len(ids))), ids...)
	if err != nil {
		return 0, fmt.Errorf("delete: %w", err)
	}
	return res.RowsAffected()
}
