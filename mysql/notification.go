package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/paykit/paykit/payment"
)

const notificationColumns = `id, channel, claimed_notify_id, payment_no, trade_no, raw_payload, raw_sha256, raw_len, verified, outcome, received_at,
	dispatch_due_at, dispatch_attempts, settled_at, refund, raw_headers`

const (
	qInsertNotification = `INSERT INTO channel_notifications
	(channel, notify_id, claimed_notify_id, payment_no, trade_no, raw_payload, raw_sha256, raw_len, verified, outcome, received_at, updated_at,
	 dispatch_due_at, refund, raw_headers)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qNotificationByNotifyID = `SELECT ` + notificationColumns + ` FROM channel_notifications
WHERE channel = ? AND notify_id = ?`
	// A settled notification keeps the outcome it was settled on: a hand-over's outcome
	// written late (it signalled while another hand-over, or the sweep, settled it) is
	// not written over it.
	qNotificationOutcome = `UPDATE channel_notifications SET outcome = ?, updated_at = ? WHERE id = ? AND settled_at IS NULL`
	qNotificationExists  = `SELECT id FROM channel_notifications WHERE id = ?`
)

// Column sizes of channel_notifications. Unverified notifications are attacker-controlled,
// so their fields are cut to fit rather than allowed to fail the insert (their body to
// payment.MaxUnverifiedRaw).
const (
	maxNotifyID      = 128
	maxRef           = 64
	maxOutcome       = 1024
	maxChannel       = 32
	outcomeReceived  = "received"
	maxRecordAttempt = 3
)

// RecordNotification stores a received notification. A verified one with a notify_id
// claims (channel, notify_id): if that was claimed before, the stored row is returned
// with inserted=false. An unverified one (or one without a notify_id) is always inserted
// with notify_id NULL, so it can never claim, and so block, a genuine notify_id; the id
// it claimed is kept for audit and returned in NotifyID. An empty Outcome is stored as
// "received"; a zero ReceivedAt means now. A verified one's DispatchDueAt, if set, puts
// it in the inbox (payment.Inbox) until it is settled.
//
// The body of an unverified notification is kept only in part (payment.MaxUnverifiedRaw
// bytes), with the SHA-256 and length of all of it: anyone can post one. If n.RawSHA256
// is empty, n.Raw is taken as the whole body and described here (KeepRaw).
func (st *Store) RecordNotification(ctx context.Context, n payment.ChannelNotification) (payment.ChannelNotification, bool, error) {
	if n.Channel == "" || len(n.Channel) > maxChannel {
		return payment.ChannelNotification{}, false, payment.Errorf(payment.EINVALID, "channel must be 1-%d bytes", maxChannel)
	}
	now := st.clock()
	n, claim, due := notificationRow(n, now)
	headers, err := rawHeaders(n.RawHeader)
	if err != nil {
		return payment.ChannelNotification{}, false, err
	}
	for range maxRecordAttempt {
		res, err := st.exec(ctx, nil, qInsertNotification, n.Channel, claim, n.NotifyID, n.PaymentNo,
			n.TradeNo, n.Raw, n.RawSHA256, n.RawLen, n.Verified, n.Outcome, n.ReceivedAt, now, due, n.Refund, headers)
		if err == nil {
			if n.ID, err = res.LastInsertId(); err != nil {
				return payment.ChannelNotification{}, false, fmt.Errorf("mysql: record notification: %w", err)
			}
			return n, true, nil
		}
		if !claim.Valid || !IsDuplicate(err) {
			return payment.ChannelNotification{}, false, fmt.Errorf("mysql: record notification: %w", err)
		}
		existing, err := st.NotificationByNotifyID(ctx, n.Channel, n.NotifyID)
		if errors.Is(err, payment.ErrNotFound) {
			continue // rows are never deleted, but should one be, claim the id again
		}
		if err != nil {
			return payment.ChannelNotification{}, false, fmt.Errorf("mysql: record notification: %w", err)
		}
		return existing, false, nil
	}
	return payment.ChannelNotification{}, false, fmt.Errorf("mysql: record notification %s: gave up after %d attempts", n.NotifyID, maxRecordAttempt)
}

// notificationRow is n as it is stored, received at now unless it says otherwise: its
// fields cut to their columns, and its raw body described. claim is the notify_id that
// dedupes it, a verified notification's only; due is when the inbox dispatches it, also
// a verified notification's only.
func notificationRow(n payment.ChannelNotification, now time.Time) (payment.ChannelNotification, sql.NullString, sql.NullTime) {
	n.ReceivedAt = dbTime(n.ReceivedAt)
	if n.ReceivedAt.IsZero() {
		n.ReceivedAt = now
	}
	if n.Outcome == "" {
		n.Outcome = outcomeReceived
	}
	n.Outcome = truncate(n.Outcome, maxOutcome)
	n.PaymentNo = truncate(n.PaymentNo, maxRef)
	n.TradeNo = truncate(n.TradeNo, maxRef)
	if n.RawSHA256 == "" {
		n.KeepRaw(n.Raw)
	} else if !n.Verified {
		n.Raw = truncate(n.Raw, payment.MaxUnverifiedRaw)
	}
	claim := sql.NullString{}
	if n.Verified && n.NotifyID != "" {
		claim = sql.NullString{String: n.NotifyID, Valid: true}
	} else {
		n.NotifyID = truncate(n.NotifyID, maxNotifyID)
	}
	due := sql.NullTime{}
	if n.Verified && !n.DispatchDueAt.IsZero() {
		n.DispatchDueAt = dbTime(n.DispatchDueAt)
		due = sql.NullTime{Time: n.DispatchDueAt, Valid: true}
	} else {
		n.DispatchDueAt = time.Time{}
	}
	return n, claim, due
}

// SetNotificationOutcome records what was done with a notification, unless it is settled:
// then it keeps the outcome it was settled on.
func (st *Store) SetNotificationOutcome(ctx context.Context, id int64, outcome string) error {
	res, err := st.exec(ctx, nil, qNotificationOutcome, truncate(outcome, maxOutcome), st.clock(), id)
	if err != nil {
		return fmt.Errorf("mysql: set notification outcome: %w", err)
	}
	changed, err := affected(res)
	if err != nil || changed {
		return err
	}
	// Zero rows also means "same value" or settled; tell those apart from a missing row.
	err = st.queryRow(ctx, nil, qNotificationExists, []any{id}, func(row *sql.Row) error {
		var got int64
		return row.Scan(&got)
	})
	if err != nil {
		return fmt.Errorf("mysql: set notification outcome %d: %w", id, err)
	}
	return nil
}

// NotificationByNotifyID implements payment.NotificationRecords.
func (st *Store) NotificationByNotifyID(ctx context.Context, channel, notifyID string) (payment.ChannelNotification, error) {
	var n payment.ChannelNotification
	err := st.queryRow(ctx, nil, qNotificationByNotifyID, []any{channel, notifyID}, func(row *sql.Row) error {
		return scanNotification(row, &n)
	})
	return n, err
}

func scanNotification(row interface{ Scan(...any) error }, n *payment.ChannelNotification) error {
	var (
		due, settled sql.NullTime
		headers      string
	)
	if err := row.Scan(&n.ID, &n.Channel, &n.NotifyID, &n.PaymentNo, &n.TradeNo, &n.Raw, &n.RawSHA256, &n.RawLen,
		&n.Verified, &n.Outcome, &n.ReceivedAt, &due, &n.DispatchAttempts, &settled, &n.Refund, &headers); err != nil {
		return err
	}
	n.DispatchDueAt, n.SettledAt = due.Time, settled.Time
	if headers != "" {
		if err := json.Unmarshal([]byte(headers), &n.RawHeader); err != nil {
			return fmt.Errorf("notification %d raw_headers: %w", n.ID, err)
		}
	}
	return nil
}

// maxRawHeaders is the size of channel_notifications.raw_headers.
const maxRawHeaders = 2048

// rawHeaders is the JSON that keeps a notification's signed headers, "" for none. Headers
// that do not fit are refused, never cut: cut, they would not verify again.
func rawHeaders(h http.Header) (string, error) {
	if len(h) == 0 {
		return "", nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("mysql: notification headers: %w", err)
	}
	if len(b) > maxRawHeaders {
		return "", payment.Errorf(payment.EINVALID, "notification headers are %d bytes of JSON, more than %d", len(b), maxRawHeaders)
	}
	return string(b), nil
}
