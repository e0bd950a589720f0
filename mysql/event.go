package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/paykit/paykit/payment"
)

const eventColumns = `event_id, tenant_id, payment_no, type, payload, delivered, attempts, last_error, created_at, delivered_at`

const (
	qEventByID   = `SELECT ` + eventColumns + ` FROM payment_events WHERE event_id = ?`
	qUndelivered = `SELECT ` + eventColumns + ` FROM payment_events WHERE delivered = 0 AND created_at < ?
ORDER BY created_at, id LIMIT ?`
	qEventAttempt = `UPDATE payment_events SET attempts = attempts + 1, last_error = ?
WHERE event_id = ? AND delivered = 0`
	qEventDelivered = `UPDATE payment_events SET delivered = 1, delivered_at = ?, attempts = attempts + 1, last_error = ''
WHERE event_id = ? AND delivered = 0`
)

const maxLastError = 1024

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

// UndeliveredEvents returns up to limit (default 100, at most 1000) undelivered events
// created before the given time, oldest first.
func (st *Store) UndeliveredEvents(ctx context.Context, before time.Time, limit int) ([]payment.Event, error) {
	evs := []payment.Event{}
	err := st.query(ctx, qUndelivered, []any{dbTime(before), clampLimit(limit)}, func(rows *sql.Rows) error {
		ev, err := scanEvent(rows)
		evs = append(evs, ev)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: undelivered events: %w", err)
	}
	return evs, nil
}

// MarkEventAttempt records a failed delivery attempt. It does nothing to an event that
// was delivered meanwhile.
func (st *Store) MarkEventAttempt(ctx context.Context, eventID, lastError string) error {
	res, err := st.exec(ctx, nil, qEventAttempt, truncate(lastError, maxLastError), eventID)
	if err != nil {
		return fmt.Errorf("mysql: mark event attempt %s: %w", eventID, err)
	}
	if err := st.eventTouched(ctx, eventID, res); err != nil {
		return fmt.Errorf("mysql: mark event attempt %s: %w", eventID, err)
	}
	return nil
}

// MarkEventDelivered records a successful delivery; repeating it changes nothing.
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

func scanEvent(s scanner) (payment.Event, error) {
	var (
		ev          payment.Event
		payload     string
		deliveredAt sql.NullTime
	)
	if err := s.Scan(&ev.EventID, &ev.TenantID, &ev.PaymentNo, &ev.Type, &payload, &ev.Delivered,
		&ev.Attempts, &ev.LastError, &ev.CreatedAt, &deliveredAt); err != nil {
		return payment.Event{}, err
	}
	ev.Payload = []byte(payload)
	if deliveredAt.Valid {
		ev.DeliveredAt = deliveredAt.Time
	}
	return ev, nil
}
