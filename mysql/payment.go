package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/paykit/paykit/payment"
)

// Order statuses stored in orders.status.
const (
	orderUnpaid    = 0
	orderPaid      = 1
	orderCancelled = 2
)

// maxCreateAttempts bounds CreatePendingPayment's insert loop. Another attempt is needed
// only when the pending payment we collided with was paid or closed between our insert
// and our read, which needs a concurrent state change per attempt.
const maxCreateAttempts = 5

const paymentColumns = `id, payment_no, tenant_id, order_id, amount_fen, refunded_fen, currency, subject, method, repurchase, status,
	trade_no, expire_at, paid_at, close_reason, version, workflow_id, created_at, updated_at, alipay_app_id,
	(next_query_at IS NOT NULL OR queries > 0) AS query_scheduled, channel`

const (
	// qUpsertOrder creates the order or refreshes it for a new attempt. A paid order stays
	// paid with the amount it was paid for (a re-purchase is a new payment, not a refund of
	// the old one); a cancelled order is revived to unpaid because a payment is pending
	// for it again; an unpaid order takes the new amount. The assignments read status
	// before it is changed, so their order matters. The new values are bound again rather
	// than read with VALUES(), which MySQL 8.0.20+ deprecates and MariaDB keeps.
	qUpsertOrder = `INSERT INTO orders (tenant_id, order_id, amount_fen, currency, status, created_at, updated_at)
VALUES (?, ?, ?, ?, 0, ?, ?)
ON DUPLICATE KEY UPDATE
	amount_fen = IF(status = 1, amount_fen, ?),
	currency = IF(status = 1, currency, ?),
	status = IF(status = 2, 0, status),
	updated_at = ?`

	// qOrderOfPayment reads a payment's order without a lock, and qLockOrder locks that
	// order's row: a transition retried after a deadlock takes the order before the
	// payment (leavePending).
	qOrderOfPayment = `SELECT tenant_id, order_id FROM payments WHERE payment_no = ?`
	qLockOrder      = `SELECT status FROM orders WHERE tenant_id = ? AND order_id = ? FOR UPDATE`

	// qOrderState reads the order row that qUpsertOrder has just locked.
	qOrderState = `SELECT status, COALESCE(paid_payment_no, '') FROM orders WHERE tenant_id = ? AND order_id = ?`

	qInsertPayment = `INSERT INTO payments
	(payment_no, tenant_id, order_id, amount_fen, currency, subject, method, repurchase, status, expire_at, workflow_id, pay_link, version, created_at, updated_at, alipay_app_id, next_query_at, query_step_ms, run_scope, channel)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?)`

	qPaymentByNo          = `SELECT ` + paymentColumns + ` FROM payments WHERE payment_no = ?`
	qPaymentByNoForUpdate = `SELECT ` + paymentColumns + ` FROM payments WHERE payment_no = ? FOR UPDATE`
	qTenantPaymentByNo    = `SELECT ` + paymentColumns + ` FROM payments WHERE payment_no = ? AND tenant_id = ?`
	qPendingByOrder       = `SELECT ` + paymentColumns + ` FROM payments WHERE tenant_id = ? AND active_order_id = ?`
	qOrderPayments        = `SELECT ` + paymentColumns + ` FROM payments WHERE tenant_id = ? AND order_id = ?
ORDER BY created_at DESC, id DESC`
	// qPendingBefore reads a page of idx_payments_status_created (status, created_at, and
	// the id InnoDB keeps in it) past a cursor.
	qPendingBefore = `SELECT ` + paymentColumns + ` FROM payments WHERE status = 0 AND created_at < ?
AND (created_at > ? OR (created_at = ? AND id > ?))` + inScope + ` ORDER BY created_at, id LIMIT ?`
	// inScope keeps a scan to the store's run scope (two arguments, both the scope): all
	// payments for a store without one.
	inScope = ` AND (? = '' OR run_scope IN ('', ?))`

	qMarkPaid = `UPDATE payments SET status = 1, trade_no = ?, paid_at = ?, version = version + 1, updated_at = ?
WHERE id = ? AND status = 0`
	qClose = `UPDATE payments SET status = 2, close_reason = ?, version = version + 1, updated_at = ?
WHERE id = ? AND status = 0`
	qFail = `UPDATE payments SET status = 3, close_reason = ?, version = version + 1, updated_at = ?
WHERE id = ? AND status = 0`
	qOrderPaidPayment = `SELECT ` + paymentColumns + ` FROM payments WHERE tenant_id = ? AND order_id = ? AND status = 1
ORDER BY paid_at DESC, id DESC LIMIT 1`

	qOrderPaid = `UPDATE orders SET status = 1, paid_payment_no = ?, amount_fen = ?, currency = ?, updated_at = ?
WHERE tenant_id = ? AND order_id = ?`
	// qOrderCancelled cancels only an unpaid order: closing the pending payment of a
	// re-purchase must not cancel the order an earlier payment paid for.
	qOrderCancelled = `UPDATE orders SET status = 2, updated_at = ?
WHERE tenant_id = ? AND order_id = ? AND status = 0`

	// qLockTenantFeed takes the tenant's feed lock (migration 0020) for the rest of the
	// transaction and counts the event about to be written, returning the count as the
	// statement's insert id (LAST_INSERT_ID(expr), on both the insert and the update
	// path). The outbox INSERT right after it takes that count as the event's feed_seq
	// (migration 0033), so a tenant's events commit in feed_seq order and the events
	// feed's cursor never passes one still to come, however many SQL servers hand out
	// the ids.
	qLockTenantFeed = `INSERT INTO tenant_feed_locks (tenant_id, events) VALUES (?, LAST_INSERT_ID(1))
ON DUPLICATE KEY UPDATE events = LAST_INSERT_ID(events + 1)`
	// qInsertEvent's id is NULL (AUTO_INCREMENT gives it) but in a test that plays a
	// second SQL server handing out ids from a batch of its own. It is a plain
	// INSERT … VALUES: an INSERT … SELECT would take MariaDB's table-wide AUTO-INC lock
	// (innodb_autoinc_lock_mode 1) for the whole statement.
	qInsertEvent = `INSERT INTO payment_events (id, feed_seq, event_id, tenant_id, payment_no, type, payload, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
)

// Limits on the list queries (pending payments, lost grants, due events).
const (
	defaultListLimit = 100
	maxListLimit     = 1000
)

// maxCloseReason is the size of payments.close_reason.
const maxCloseReason = 512

// EventID returns the id of the outbox event of the given type for a payment. It is
// deterministic because a payment changes state at most once, so a retried transition
// can never write a second event, and anyone can find the event from the payment.
func EventID(paymentNo, eventType string) string {
	switch eventType {
	case payment.EventPaymentPaid:
		return "evt_" + paymentNo + "_paid"
	case payment.EventPaymentClosed:
		return "evt_" + paymentNo + "_closed"
	case payment.EventPaymentFailed:
		return "evt_" + paymentNo + "_failed"
	default:
		return "evt_" + paymentNo + "_" + eventType
	}
}

// CreatePendingPayment inserts a pending payment and upserts its order in one
// transaction. A duplicate payment_no, or another pending payment for the same order
// (the active-order unique index), is not an error: the transaction is rolled back and
// the existing payment is returned with existed=true — the one with this payment_no if
// there is one, otherwise the order's pending payment.
//
// On re-purchase the order row keeps status paid if it was paid, goes back to unpaid if
// it was cancelled, and takes the new amount unless it was paid.
func (st *Store) CreatePendingPayment(ctx context.Context, np payment.NewPayment) (payment.Payment, bool, error) {
	if err := np.Validate(); err != nil {
		return payment.Payment{}, false, err
	}
	for range maxCreateAttempts {
		p, err := st.insertPending(ctx, np)
		if err == nil {
			return p, false, nil
		}
		if payment.ErrorCode(err) == payment.EORDERPAID {
			// A retry of the very payment that paid the order, or a run re-driving a
			// re-purchase, finds its own row; anyone else is refused.
			if p, gerr := st.getPayment(ctx, nil, qPaymentByNo, np.PaymentNo); gerr == nil && p.TenantID == np.TenantID && p.OrderID == np.OrderID {
				return p, true, nil
			}
			return payment.Payment{}, false, fmt.Errorf("mysql: create payment %s: %w", np.PaymentNo, err)
		}
		if !IsDuplicate(err) {
			return payment.Payment{}, false, fmt.Errorf("mysql: create payment %s: %w", np.PaymentNo, err)
		}
		p, err = st.existingFor(ctx, np)
		switch {
		case err == nil:
			return p, true, nil
		case errors.Is(err, payment.ErrNotFound):
			// The pending payment we collided with left the pending state before we read
			// it; the index slot is free again, so insert again.
			continue
		default:
			return payment.Payment{}, false, fmt.Errorf("mysql: create payment %s: %w", np.PaymentNo, err)
		}
	}
	return payment.Payment{}, false, &payment.Error{
		Code:    payment.ETOOMANYRETRIES,
		Message: "the order is changing too fast; retry later",
		Err:     fmt.Errorf("mysql: create payment %s: gave up after %d attempts", np.PaymentNo, maxCreateAttempts),
	}
}

func (st *Store) insertPending(ctx context.Context, np payment.NewPayment) (payment.Payment, error) {
	var p payment.Payment
	err := st.inTx(ctx, func(tx *sql.Tx) error {
		now := st.clock()
		if _, err := st.exec(ctx, tx, qUpsertOrder,
			np.TenantID, np.OrderID, int64(np.Amount), np.Currency, now, now, int64(np.Amount), np.Currency, now); err != nil {
			return fmt.Errorf("upsert order: %w", err)
		}
		// A paid order is final unless the checkout opted in to re-purchase. The order row
		// is locked by the upsert, and MarkPaid updates it in its own transaction, so this
		// check cannot interleave with a payment of the same order becoming PAID.
		var orderStatus int
		var paidNo string
		if err := st.queryRow(ctx, tx, qOrderState, []any{np.TenantID, np.OrderID}, func(row *sql.Row) error {
			return row.Scan(&orderStatus, &paidNo)
		}); err != nil {
			return fmt.Errorf("read order: %w", err)
		}
		if orderStatus == orderPaid && !np.Repurchase {
			return &payment.Error{Code: payment.EORDERPAID,
				Message: fmt.Sprintf("order %s is already paid by payment %s", np.OrderID, paidNo)}
		}
		expireAt := dbTime(np.ExpireAt)
		firstQuery := firstQueryAt(now, np)
		res, err := st.exec(ctx, tx, qInsertPayment,
			np.PaymentNo, np.TenantID, np.OrderID, int64(np.Amount), np.Currency, np.Subject, methodOrPage(np.Method),
			np.Repurchase, expireAt, np.WorkflowID, sql.NullString{String: np.PayLink, Valid: np.PayLink != ""}, now, now, np.AlipayAppID,
			firstQuery, queryStepMS(firstQuery, np), st.runScope, methodOrPage(np.Method).Channel())
		if err != nil {
			return fmt.Errorf("insert payment: %w", err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("insert payment: %w", err)
		}
		p = payment.Payment{
			ID:          id,
			PaymentNo:   np.PaymentNo,
			TenantID:    np.TenantID,
			OrderID:     np.OrderID,
			Amount:      np.Amount,
			RefundState: payment.RefundStateNone,
			Currency:    np.Currency,
			Subject:     np.Subject,
			Method:      methodOrPage(np.Method),
			Repurchase:  np.Repurchase,
			Status:      payment.StatusPending,
			ExpireAt:    expireAt,
			WorkflowID:  np.WorkflowID,
			AlipayAppID: np.AlipayAppID,
			Channel:     methodOrPage(np.Method).Channel(),
			CreatedAt:   now,
			UpdatedAt:   now,
			// As query_scheduled reads it back.
			QueryScheduled: firstQuery.Valid,
		}
		return nil
	})
	return p, err
}

// existingFor finds the payment a duplicate-key error collided with.
func (st *Store) existingFor(ctx context.Context, np payment.NewPayment) (payment.Payment, error) {
	p, err := st.getPayment(ctx, nil, qPaymentByNo, np.PaymentNo)
	if err == nil {
		if p.TenantID != np.TenantID || p.OrderID != np.OrderID {
			return payment.Payment{}, &payment.Error{
				Code:    payment.ECONFLICT,
				Message: "payment_no already belongs to another order",
				Err:     fmt.Errorf("payment %s belongs to %s/%s", p.PaymentNo, p.TenantID, p.OrderID),
			}
		}
		return p, nil
	}
	if !errors.Is(err, payment.ErrNotFound) {
		return payment.Payment{}, err
	}
	return st.getPayment(ctx, nil, qPendingByOrder, np.TenantID, np.OrderID)
}

// MarkPaid moves a pending payment to paid in one transaction: the payment row is locked
// with SELECT … FOR UPDATE, its status is compare-and-set from pending, the order is
// marked paid and a payment.paid event is written to the outbox. A payment that is not
// pending is returned as it is with Changed=false. An empty tradeNo is stored as NULL;
// a zero paidAt means now.
func (st *Store) MarkPaid(ctx context.Context, paymentNo, tradeNo string, paidAt time.Time) (payment.Transition, error) {
	tr, err := st.leavePending(ctx, paymentNo, payment.EventPaymentPaid, "",
		func(tx *sql.Tx, p *payment.Payment, now time.Time) error {
			at := now
			if !paidAt.IsZero() {
				at = dbTime(paidAt)
			}
			// The order first, then the payment's status: see orderBeforePayment.
			if _, err := st.exec(ctx, tx, qOrderPaid,
				p.PaymentNo, int64(p.Amount), p.Currency, now, p.TenantID, p.OrderID); err != nil {
				return fmt.Errorf("update order: %w", err)
			}
			res, err := st.exec(ctx, tx, qMarkPaid, nullString(tradeNo), at, now, p.ID)
			if err != nil {
				if IsDuplicate(err) {
					return &payment.Error{
						Code:    payment.ECONFLICT,
						Message: "trade_no already belongs to another payment",
						Err:     err,
					}
				}
				return fmt.Errorf("update payment: %w", err)
			}
			if err := orderBeforePayment(res); err != nil {
				return err
			}
			p.Status, p.TradeNo, p.PaidAt = payment.StatusPaid, tradeNo, at
			return nil
		})
	if err != nil {
		return payment.Transition{}, fmt.Errorf("mysql: mark paid %s: %w", paymentNo, err)
	}
	return tr, nil
}

// ClosePayment moves a pending payment to closed the same way as MarkPaid, cancels its
// order unless the order was paid by an earlier payment, and writes a payment.closed
// event. A payment that is not pending is returned as it is with Changed=false.
func (st *Store) ClosePayment(ctx context.Context, paymentNo, reason string) (payment.Transition, error) {
	tr, err := st.endUnpaid(ctx, paymentNo, reason, qClose, payment.StatusClosed, payment.EventPaymentClosed)
	if err != nil {
		return payment.Transition{}, fmt.Errorf("mysql: close payment %s: %w", paymentNo, err)
	}
	return tr, nil
}

// FailPayment moves a pending payment to failed exactly as ClosePayment closes it, with a
// payment.failed event. It is used when Alipay reports money for the payment that does not
// match it, so the payment must never become PAID.
func (st *Store) FailPayment(ctx context.Context, paymentNo, reason string) (payment.Transition, error) {
	tr, err := st.endUnpaid(ctx, paymentNo, reason, qFail, payment.StatusFailed, payment.EventPaymentFailed)
	if err != nil {
		return payment.Transition{}, fmt.Errorf("mysql: fail payment %s: %w", paymentNo, err)
	}
	return tr, nil
}

// endUnpaid is the transition of a pending payment to a final unpaid status (closed or
// failed): status compare-and-set with its reason, the order cancelled unless an earlier
// payment paid it, and the outbox event.
func (st *Store) endUnpaid(ctx context.Context, paymentNo, reason, update string, to payment.Status, eventType string) (payment.Transition, error) {
	reason = truncate(reason, maxCloseReason)
	return st.leavePending(ctx, paymentNo, eventType, reason,
		func(tx *sql.Tx, p *payment.Payment, now time.Time) error {
			// The order first, then the payment's status: see orderBeforePayment.
			if _, err := st.exec(ctx, tx, qOrderCancelled, now, p.TenantID, p.OrderID); err != nil {
				return fmt.Errorf("update order: %w", err)
			}
			res, err := st.exec(ctx, tx, update, reason, now, p.ID)
			if err != nil {
				return fmt.Errorf("update payment: %w", err)
			}
			if err := orderBeforePayment(res); err != nil {
				return err
			}
			p.Status, p.CloseReason = to, reason
			return nil
		})
}

// errPendingUnchanged: a transition's compare-and-set found the pending payment it holds
// the row lock of no longer pending, which the lock rules out.
var errPendingUnchanged = errors.New("the locked pending payment did not change; the transaction is rolled back")

// orderBeforePayment checks the status compare-and-set of a transition that has already
// updated the payment's order. A transition locks the payment, then its order, and only
// then changes the payment's status, which moves the row out of the (tenant_id,
// active_order_id) unique index. A checkout of the same order takes the order row first and
// then probes that index entry. Were the status changed before the order, each would hold
// what the other waits for: a deadlock, which TiDB resolves against the transition every
// time a crowd of checkouts keeps the order busy (mysql/TestPaidOrderIsFinal). The order
// was changed already, so a compare-and-set that changed nothing must roll it back.
func orderBeforePayment(res sql.Result) error {
	changed, err := affected(res)
	if err != nil {
		return err
	}
	if !changed {
		return errPendingUnchanged
	}
	return nil
}

// OrderPaidPayment returns the order's most recent PAID payment; ok is false if it has none.
func (st *Store) OrderPaidPayment(ctx context.Context, tenantID, orderID string) (payment.Payment, bool, error) {
	p, err := st.getPayment(ctx, nil, qOrderPaidPayment, tenantID, orderID)
	switch {
	case err == nil:
		return p, true, nil
	case errors.Is(err, payment.ErrNotFound):
		return payment.Payment{}, false, nil
	default:
		return payment.Payment{}, false, fmt.Errorf("mysql: order paid payment: %w", err)
	}
}

// qOrderStanding is the order's most recent PAID payment and its pending payment, in one
// round trip: the paid-order index and the active-order unique index.
var qOrderStanding = `(SELECT ` + paymentColumns + ` FROM payments WHERE tenant_id = ? AND order_id = ? AND status = 1
ORDER BY paid_at DESC, id DESC LIMIT 1)
UNION ALL
(SELECT ` + paymentColumns + ` FROM payments WHERE tenant_id = ? AND active_order_id = ?)`

// OrderStanding returns the order's most recent PAID payment and its pending payment,
// each nil if it has none, with one statement.
func (st *Store) OrderStanding(ctx context.Context, tenantID, orderID string) (paid, pending *payment.Payment, err error) {
	err = st.query(ctx, qOrderStanding, []any{tenantID, orderID, tenantID, orderID}, func(rows *sql.Rows) error {
		p, err := scanPayment(rows)
		if err != nil {
			return err
		}
		switch {
		case p.Status == payment.StatusPaid && paid == nil:
			paid = &p
		case p.Status == payment.StatusPending:
			pending = &p
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("mysql: order standing: %w", err)
	}
	return paid, pending, nil
}

// leavePending is the one transaction behind every transition out of pending. It locks
// the payment row with SELECT … FOR UPDATE and, if the payment is still pending, calls
// change, which runs the status compare-and-set and the order update and applies the
// new state to p. It then bumps the version in memory as the UPDATE did and writes the
// outbox event. A payment that is not pending, or whose compare-and-set matched no row,
// is returned as it is with Changed=false.
func (st *Store) leavePending(ctx context.Context, paymentNo, eventType, reason string,
	change func(tx *sql.Tx, p *payment.Payment, now time.Time) error) (payment.Transition, error) {
	var tr payment.Transition
	attempts := 0
	err := st.inTx(ctx, func(tx *sql.Tx) error {
		tr = payment.Transition{}
		if attempts++; attempts > 1 {
			if err := st.lockOrderFirst(ctx, tx, paymentNo); err != nil {
				return err
			}
		}
		p, err := st.getPayment(ctx, tx, qPaymentByNoForUpdate, paymentNo)
		if err != nil {
			return err
		}
		if p.Status != payment.StatusPending {
			// Already left pending (a retry of this transition after its answer was lost,
			// or another one won): name the event that transition wrote, so the caller
			// still delivers it.
			tr.Payment, tr.EventID = p, finalEventID(p)
			return nil
		}
		now := st.clock()
		// A compare-and-set that changes nothing, unreachable under the row lock, is an
		// error that rolls the transaction back (orderBeforePayment).
		if err := change(tx, &p, now); err != nil {
			return err
		}
		p.UpdatedAt = now
		p.Version++
		eventID, err := st.insertEvent(ctx, tx, eventType, p, reason, now)
		if err != nil {
			return err
		}
		if st.afterEventInsert != nil {
			st.afterEventInsert(p.PaymentNo)
		}
		tr = payment.Transition{Payment: p, Changed: true, EventID: eventID}
		return nil
	})
	return tr, err
}

// lockOrderFirst locks the order of a payment before the payment's row, in the order a
// checkout of that order takes them (the order row, then the payment's unique index
// entry). A transition takes the payment first, then its order, and so meets a crowd of
// checkouts of the order in a deadlock, which the database resolves against either; a
// retry that took the same locks in the same order could meet it again each time
// (mysql/TestPaidOrderIsFinal, under load), so a retried transition takes the order
// first and waits instead. The first attempt keeps its two round trips fewer.
func (st *Store) lockOrderFirst(ctx context.Context, tx *sql.Tx, paymentNo string) error {
	var tenantID, orderID string
	err := st.queryRow(ctx, tx, qOrderOfPayment, []any{paymentNo}, func(row *sql.Row) error {
		return row.Scan(&tenantID, &orderID)
	})
	if errors.Is(err, payment.ErrNotFound) {
		return nil // getPayment answers not found
	}
	if err != nil {
		return fmt.Errorf("read the payment's order: %w", err)
	}
	err = st.queryRow(ctx, tx, qLockOrder, []any{tenantID, orderID}, func(row *sql.Row) error {
		var status int
		return row.Scan(&status)
	})
	if err != nil && !errors.Is(err, payment.ErrNotFound) {
		return fmt.Errorf("lock the payment's order: %w", err)
	}
	return nil
}

// finalEventID is the id of the outbox event written when p left pending.
func finalEventID(p payment.Payment) string {
	switch p.Status {
	case payment.StatusPaid:
		return EventID(p.PaymentNo, payment.EventPaymentPaid)
	case payment.StatusClosed:
		return EventID(p.PaymentNo, payment.EventPaymentClosed)
	case payment.StatusFailed:
		return EventID(p.PaymentNo, payment.EventPaymentFailed)
	}
	return ""
}

// eventPayload is the JSON body delivered to the merchant for a payment event.
type eventPayload struct {
	EventID     string         `json:"event_id"`
	Type        string         `json:"type"`
	TenantID    string         `json:"tenant_id"`
	PaymentNo   string         `json:"payment_no"`
	OrderID     string         `json:"order_id"`
	AmountFen   int64          `json:"amount_fen"`
	Currency    string         `json:"currency"`
	Status      payment.Status `json:"status"`
	TradeNo     string         `json:"trade_no,omitempty"`
	PaidAt      time.Time      `json:"paid_at,omitzero"`
	ClosedAt    time.Time      `json:"closed_at,omitzero"`
	CloseReason string         `json:"close_reason,omitempty"`
	CreatedAt   time.Time      `json:"created_at"`
}

func (st *Store) insertEvent(ctx context.Context, tx *sql.Tx, eventType string, p payment.Payment, reason string, now time.Time) (string, error) {
	ev := eventPayload{
		EventID:   EventID(p.PaymentNo, eventType),
		Type:      eventType,
		TenantID:  p.TenantID,
		PaymentNo: p.PaymentNo,
		OrderID:   p.OrderID,
		AmountFen: int64(p.Amount),
		Currency:  p.Currency,
		Status:    p.Status,
		TradeNo:   p.TradeNo,
		PaidAt:    p.PaidAt,
		CreatedAt: now,
	}
	if eventType == payment.EventPaymentClosed || eventType == payment.EventPaymentFailed {
		ev.ClosedAt, ev.CloseReason = now, reason
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return "", fmt.Errorf("encode event: %w", err)
	}
	return ev.EventID, st.appendEvent(ctx, tx, ev.EventID, p.TenantID, p.PaymentNo, eventType, body, now)
}

// appendEvent writes one outbox event in tx: it takes the tenant's feed lock, the last lock
// a transaction takes (so it adds no lock cycle), and inserts the event at the position
// the lock's count gives it.
func (st *Store) appendEvent(ctx context.Context, tx *sql.Tx, eventID, tenantID, paymentNo, eventType string, body []byte, now time.Time) error {
	res, err := st.exec(ctx, tx, qLockTenantFeed, tenantID)
	if err != nil {
		return fmt.Errorf("lock the events feed of %s: %w", tenantID, err)
	}
	seq, err := res.LastInsertId()
	if err != nil || seq <= 0 {
		return fmt.Errorf("lock the events feed of %s: no position (%d, %v)", tenantID, seq, err)
	}
	var id any // NULL: AUTO_INCREMENT
	if st.eventIDs != nil {
		id = st.eventIDs()
	}
	if _, err := st.exec(ctx, tx, qInsertEvent, id, seq, eventID, tenantID, paymentNo, eventType, string(body), now); err != nil {
		return fmt.Errorf("insert event: %w", err)
	}
	return nil
}

// GetPayment returns a payment by payment_no, or an error wrapping payment.ErrNotFound.
func (st *Store) GetPayment(ctx context.Context, paymentNo string) (payment.Payment, error) {
	p, err := st.getPayment(ctx, nil, qPaymentByNo, paymentNo)
	if err != nil {
		return payment.Payment{}, fmt.Errorf("mysql: get payment %s: %w", paymentNo, err)
	}
	return p, nil
}

// GetTenantPayment returns a payment of one tenant; another tenant's payment is
// payment.ErrNotFound, so its existence is not disclosed.
func (st *Store) GetTenantPayment(ctx context.Context, tenantID, paymentNo string) (payment.Payment, error) {
	p, err := st.getPayment(ctx, nil, qTenantPaymentByNo, paymentNo, tenantID)
	if err != nil {
		return payment.Payment{}, fmt.Errorf("mysql: get payment %s: %w", paymentNo, err)
	}
	return p, nil
}

// ListOrderPayments returns every payment of one order, newest first.
func (st *Store) ListOrderPayments(ctx context.Context, tenantID, orderID string) ([]payment.Payment, error) {
	ps := []payment.Payment{}
	err := st.query(ctx, qOrderPayments, []any{tenantID, orderID}, func(rows *sql.Rows) error {
		p, err := scanPayment(rows)
		ps = append(ps, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: list order payments: %w", err)
	}
	return ps, nil
}

// PendingPaymentsBefore returns up to limit (default 100, at most 1000) payments still
// pending that were created before the given time, oldest first from past after, and the
// cursor that follows them (zero once fewer than the limit were left).
func (st *Store) PendingPaymentsBefore(ctx context.Context, before time.Time, after payment.Cursor, limit int) ([]payment.Payment, payment.Cursor, error) {
	limit = clampLimit(limit)
	at, id := walkFrom(after)
	ps := []payment.Payment{}
	err := st.query(ctx, qPendingBefore, []any{dbTime(before), at, at, id, st.runScope, st.runScope, limit}, func(rows *sql.Rows) error {
		p, err := scanPayment(rows)
		ps = append(ps, p)
		return err
	})
	if err != nil {
		return nil, after, fmt.Errorf("mysql: pending payments: %w", err)
	}
	if len(ps) < limit {
		return ps, payment.Cursor{}, nil
	}
	last := ps[len(ps)-1]
	return ps, payment.Cursor{At: last.CreatedAt, ID: last.ID}, nil
}

// walkFrom is the (time, id) a page of a walk in that order reads past: after's, or for
// the zero Cursor a time before any row's.
func walkFrom(after payment.Cursor) (time.Time, int64) {
	if after.IsZero() {
		return time.Unix(0, 0).UTC(), 0
	}
	return dbTime(after.At), after.ID
}

func (st *Store) getPayment(ctx context.Context, tx *sql.Tx, query string, args ...any) (payment.Payment, error) {
	var p payment.Payment
	err := st.queryRow(ctx, tx, query, args, func(row *sql.Row) error {
		var err error
		p, err = scanPayment(row)
		return err
	})
	return p, err
}

type scanner interface{ Scan(dest ...any) error }

func scanPayment(s scanner) (payment.Payment, error) {
	var (
		p        payment.Payment
		amount   int64
		refunded int64
		tradeNo  sql.NullString
		paidAt   sql.NullTime
	)
	if err := s.Scan(&p.ID, &p.PaymentNo, &p.TenantID, &p.OrderID, &amount, &refunded, &p.Currency, &p.Subject, &p.Method,
		&p.Repurchase, &p.Status, &tradeNo, &p.ExpireAt, &paidAt, &p.CloseReason, &p.Version, &p.WorkflowID, &p.CreatedAt, &p.UpdatedAt, &p.AlipayAppID, &p.QueryScheduled, &p.Channel); err != nil {
		return payment.Payment{}, err
	}
	p.Amount, p.Refunded = payment.Amount(amount), payment.Amount(refunded)
	p.RefundState = payment.RefundStateOf(p.Amount, p.Refunded)
	p.TradeNo = tradeNo.String
	if paidAt.Valid {
		p.PaidAt = paidAt.Time
	}
	return p, nil
}

// methodOrPage stores an unset method as page, the column's default.
func methodOrPage(m payment.Method) payment.Method {
	if m == "" {
		return payment.MethodPage
	}
	return m
}

func clampLimit(limit int) int {
	switch {
	case limit <= 0:
		return defaultListLimit
	case limit > maxListLimit:
		return maxListLimit
	default:
		return limit
	}
}

// affected reports whether a write changed exactly one or more rows.
func affected(res sql.Result) (bool, error) {
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("rows affected: %w", err)
	}
	return n > 0, nil
}
