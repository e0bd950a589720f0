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

const refundColumns = `id, refund_no, tenant_id, payment_no, out_request_no, amount_fen, reason, status, fail_reason,
	trade_no, workflow_id, refunded_at, version, created_at, updated_at, alipay_app_id`

const (
	qRefundByNo           = `SELECT ` + refundColumns + ` FROM refunds WHERE tenant_id = ? AND refund_no = ?`
	qRefundByNoForUpdate  = `SELECT ` + refundColumns + ` FROM refunds WHERE tenant_id = ? AND refund_no = ? FOR UPDATE`
	qRefundByOutRequestNo = `SELECT ` + refundColumns + ` FROM refunds WHERE out_request_no = ?`
	qPaymentRefunds       = `SELECT ` + refundColumns + ` FROM refunds WHERE tenant_id = ? AND payment_no = ?
ORDER BY created_at, id`
	qPendingRefundsBefore = `SELECT ` + refundColumns + ` FROM refunds WHERE status = 0 AND created_at < ?
ORDER BY created_at, id LIMIT ?`
	qTenantPaymentForUpdate = `SELECT ` + paymentColumns + ` FROM payments WHERE payment_no = ? AND tenant_id = ? FOR UPDATE`

	// qReserveRefund is the compare-and-set that keeps the refunded total within the paid
	// amount: it matches no row once the payment is not PAID or the refund would not fit.
	// It leaves version and updated_at alone: they describe the payment's own state,
	// and the auditor reads updated_at as the time the payment became PAID. The explicit
	// updated_at = updated_at keeps the column's ON UPDATE stamp (migration 0025) off;
	// the refund row written in the same transaction is the change the audit sees.
	qReserveRefund = `UPDATE payments SET refunded_fen = refunded_fen + ?, updated_at = updated_at
WHERE id = ? AND status = 1 AND refunded_fen + ? <= amount_fen`
	// qReserveClosedRefund is qReserveRefund for the money Alipay took for a payment
	// that is closed or failed locally (a paid_after_close anomaly).
	qReserveClosedRefund = `UPDATE payments SET refunded_fen = refunded_fen + ?, updated_at = updated_at
WHERE id = ? AND status IN (2, 3) AND refunded_fen + ? <= amount_fen`
	// qReleaseRefund gives a failed refund's reservation back.
	qReleaseRefund = `UPDATE payments SET refunded_fen = refunded_fen - ?, updated_at = updated_at
WHERE id = ? AND refunded_fen >= ?`
	qInsertRefund = `INSERT INTO refunds
	(refund_no, tenant_id, payment_no, out_request_no, amount_fen, reason, status, workflow_id, version, created_at, updated_at, alipay_app_id)
VALUES (?, ?, ?, ?, ?, ?, 0, ?, 0, ?, ?, ?)`
	qRefundSucceeded = `UPDATE refunds SET status = 1, trade_no = ?, refunded_at = ?, version = version + 1, updated_at = ?
WHERE id = ? AND status = 0`
	qRefundFailed = `UPDATE refunds SET status = 2, fail_reason = ?, version = version + 1, updated_at = ?
WHERE id = ? AND status = 0`
)

// maxFailReason is the size of refunds.fail_reason.
const maxFailReason = 512

// RefundEventID returns the id of the outbox event of the given type for a refund. A
// refund changes state at most once, so the id is deterministic, like EventID.
func RefundEventID(outRequestNo, eventType string) string {
	switch eventType {
	case payment.EventRefundSucceeded:
		return "evt_" + outRequestNo + "_refund_succeeded"
	case payment.EventRefundFailed:
		return "evt_" + outRequestNo + "_refund_failed"
	default:
		return "evt_" + outRequestNo + "_" + eventType
	}
}

// CreateRefund reserves the refund's amount on its payment and inserts it, in one
// transaction: the payment row is locked with SELECT … FOR UPDATE, its refunded_fen is
// compare-and-set so that it never exceeds amount_fen, and the refund is inserted. A
// refund_no the tenant used before returns the stored refund with existed=true, whoever
// wins a race on it, and reserves nothing.
func (st *Store) CreateRefund(ctx context.Context, n payment.NewRefund) (payment.Refund, bool, error) {
	if err := n.Validate(); err != nil {
		return payment.Refund{}, false, err
	}
	if r, err := st.existingRefund(ctx, n); err == nil || !errors.Is(err, payment.ErrNotFound) {
		return r, err == nil, err
	}
	var r payment.Refund
	err := st.inTx(ctx, func(tx *sql.Tx) (err error) {
		r, err = st.reserveRefund(ctx, tx, n)
		return err
	})
	if err != nil {
		return st.refundNotCreated(ctx, n, err)
	}
	return r, false, nil
}

// reserveRefund reserves the refund's amount on its locked payment and inserts it.
func (st *Store) reserveRefund(ctx context.Context, tx *sql.Tx, n payment.NewRefund) (payment.Refund, error) {
	p, err := st.getPayment(ctx, tx, qTenantPaymentForUpdate, n.PaymentNo, n.TenantID)
	if err != nil {
		if errors.Is(err, payment.ErrNotFound) {
			return payment.Refund{}, payment.Errorf(payment.ENOTFOUND, "no payment %s", n.PaymentNo)
		}
		return payment.Refund{}, fmt.Errorf("lock payment: %w", err)
	}
	reserve, err := reserveStatement(n, p)
	if err != nil {
		return payment.Refund{}, err
	}
	now := st.clock()
	res, err := st.exec(ctx, tx, reserve, int64(n.Amount), p.ID, int64(n.Amount))
	if err != nil {
		return payment.Refund{}, fmt.Errorf("reserve refund: %w", err)
	}
	if ok, err := affected(res); err != nil || !ok {
		if err != nil {
			return payment.Refund{}, err
		}
		return payment.Refund{}, payment.Errorf(payment.EREFUNDEXCEEDS, "refund of %d fen exceeds the %d fen that remain refundable on payment %s",
			int64(n.Amount), int64(p.Amount-p.Refunded), p.PaymentNo)
	}
	r := payment.Refund{
		RefundNo: n.RefundNo, TenantID: n.TenantID, PaymentNo: n.PaymentNo,
		OutRequestNo: payment.OutRequestNo(n.TenantID, n.RefundNo), Amount: n.Amount,
		Reason: n.Reason, Status: payment.RefundPending, WorkflowID: payment.RefundWorkflowID(n.TenantID, n.RefundNo),
		AlipayAppID: p.AlipayAppID, CreatedAt: now, UpdatedAt: now,
	}
	res, err = st.exec(ctx, tx, qInsertRefund, r.RefundNo, r.TenantID, r.PaymentNo, r.OutRequestNo, int64(r.Amount),
		r.Reason, r.WorkflowID, now, now, r.AlipayAppID)
	if err != nil {
		return payment.Refund{}, err
	}
	r.ID, err = res.LastInsertId()
	return r, err
}

// reserveStatement is the statement that reserves a refund of payment p: of a PAID
// payment, or, for the money of a CLOSED or FAILED one, of that.
func reserveStatement(n payment.NewRefund, p payment.Payment) (string, error) {
	switch {
	case !p.Channel.RefundsOffered():
		return "", payment.Errorf(payment.EUNPROCESSABLE, "payment %s was paid through %s, whose refunds paykit does not make yet: refund it in %s's merchant platform",
			p.PaymentNo, p.Channel.Name(), p.Channel.Name())
	case n.ForClosedPayment && p.Status != payment.StatusClosed && p.Status != payment.StatusFailed:
		return "", payment.Errorf(payment.ECONFLICT, "payment %s is %s; only the money of a CLOSED or FAILED payment is refunded as an anomaly", p.PaymentNo, p.Status)
	case n.ForClosedPayment:
		return qReserveClosedRefund, nil
	case p.Status != payment.StatusPaid:
		return "", payment.Errorf(payment.ENOTPAID, "payment %s is %s; only a PAID payment can be refunded", p.PaymentNo, p.Status)
	}
	return qReserveRefund, nil
}

// refundNotCreated answers a CreateRefund whose transaction failed: with the refund a
// concurrent request of the same refund_no made, if there is one, else with err.
func (st *Store) refundNotCreated(ctx context.Context, n payment.NewRefund, err error) (payment.Refund, bool, error) {
	if IsDuplicate(err) {
		// A concurrent request with the same refund_no won; its reservation stands and
		// ours was rolled back with the insert.
		r, gerr := st.existingRefund(ctx, n)
		if gerr == nil {
			return r, true, nil
		}
		return payment.Refund{}, false, fmt.Errorf("mysql: create refund %s: %w", n.RefundNo, gerr)
	}
	code := payment.ErrorCode(err)
	if code == payment.EINTERNAL {
		return payment.Refund{}, false, fmt.Errorf("mysql: create refund %s: %w", n.RefundNo, err)
	}
	if code == payment.EREFUNDEXCEEDS || code == payment.ENOTPAID {
		// A concurrent request with the same refund_no may have committed while
		// this one waited for the payment's lock: its refund is the answer.
		if r, gerr := st.existingRefund(ctx, n); gerr == nil || !errors.Is(gerr, payment.ErrNotFound) {
			return r, gerr == nil, gerr
		}
	}
	return payment.Refund{}, false, err
}

// existingRefund returns the tenant's refund with n's refund_no, ErrNotFound if there is
// none, and ECONFLICT if it was made for another payment or amount.
func (st *Store) existingRefund(ctx context.Context, n payment.NewRefund) (payment.Refund, error) {
	r, err := st.getRefund(ctx, nil, qRefundByNo, n.TenantID, n.RefundNo)
	if err != nil {
		return payment.Refund{}, err
	}
	if r.PaymentNo != n.PaymentNo || r.Amount != n.Amount {
		return payment.Refund{}, &payment.Error{
			Code:    payment.ECONFLICT,
			Message: fmt.Sprintf("refund_no %s was already used for a refund of %d fen on payment %s", r.RefundNo, int64(r.Amount), r.PaymentNo),
		}
	}
	return r, nil
}

// GetRefund returns a tenant's refund by refund_no, or an error wrapping payment.ErrNotFound.
func (st *Store) GetRefund(ctx context.Context, tenantID, refundNo string) (payment.Refund, error) {
	r, err := st.getRefund(ctx, nil, qRefundByNo, tenantID, refundNo)
	if err != nil {
		return payment.Refund{}, fmt.Errorf("mysql: get refund %s: %w", refundNo, err)
	}
	return r, nil
}

// GetRefundByOutRequestNo returns the refund with Alipay's out_request_no, or an error
// wrapping payment.ErrNotFound.
func (st *Store) GetRefundByOutRequestNo(ctx context.Context, outRequestNo string) (payment.Refund, error) {
	r, err := st.getRefund(ctx, nil, qRefundByOutRequestNo, outRequestNo)
	if err != nil {
		return payment.Refund{}, fmt.Errorf("mysql: get refund by out_request_no %s: %w", outRequestNo, err)
	}
	return r, nil
}

// ListPaymentRefunds returns the refunds of a tenant's payment, oldest first.
func (st *Store) ListPaymentRefunds(ctx context.Context, tenantID, paymentNo string) ([]payment.Refund, error) {
	return st.listRefunds(ctx, "payment refunds", qPaymentRefunds, tenantID, paymentNo)
}

// PendingRefundsBefore returns up to limit (default 100, at most 1000) refunds still
// pending that were created before the given time, oldest first.
func (st *Store) PendingRefundsBefore(ctx context.Context, before time.Time, limit int) ([]payment.Refund, error) {
	return st.listRefunds(ctx, "pending refunds", qPendingRefundsBefore, dbTime(before), clampLimit(limit))
}

func (st *Store) listRefunds(ctx context.Context, what, query string, args ...any) ([]payment.Refund, error) {
	rs := []payment.Refund{}
	err := st.query(ctx, query, args, func(rows *sql.Rows) error {
		r, err := scanRefund(rows)
		rs = append(rs, r)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: %s: %w", what, err)
	}
	return rs, nil
}

// MarkRefundSucceeded moves a pending refund to succeeded and writes its refund.succeeded
// event in one transaction under the refund's row lock. The reservation on the payment
// becomes the refunded amount as it stands. A zero refundedAt means now.
func (st *Store) MarkRefundSucceeded(ctx context.Context, tenantID, refundNo, tradeNo string, refundedAt time.Time) (payment.RefundTransition, error) {
	tr, err := st.leaveRefundPending(ctx, tenantID, refundNo, payment.EventRefundSucceeded, false,
		func(tx *sql.Tx, r *payment.Refund, now time.Time) (bool, error) {
			at := now
			if !refundedAt.IsZero() {
				at = dbTime(refundedAt)
			}
			res, err := st.exec(ctx, tx, qRefundSucceeded, truncate(tradeNo, 64), at, now, r.ID)
			if err != nil {
				return false, err
			}
			if ok, err := affected(res); !ok || err != nil {
				return false, err
			}
			r.Status, r.TradeNo, r.RefundedAt = payment.RefundSucceeded, tradeNo, at
			return true, nil
		})
	if err != nil {
		return payment.RefundTransition{}, fmt.Errorf("mysql: mark refund succeeded %s: %w", refundNo, err)
	}
	return tr, nil
}

// FailRefund moves a pending refund to failed, gives its amount back to the payment's
// refundable remainder and writes its refund.failed event, in one transaction that locks
// the payment row and then the refund row (the order CreateRefund takes them in).
func (st *Store) FailRefund(ctx context.Context, tenantID, refundNo, reason string) (payment.RefundTransition, error) {
	reason = truncate(reason, maxFailReason)
	tr, err := st.leaveRefundPending(ctx, tenantID, refundNo, payment.EventRefundFailed, true,
		func(tx *sql.Tx, r *payment.Refund, now time.Time) (bool, error) {
			res, err := st.exec(ctx, tx, qRefundFailed, reason, now, r.ID)
			if err != nil {
				return false, err
			}
			if ok, err := affected(res); !ok || err != nil {
				return false, err
			}
			p, err := st.getPayment(ctx, tx, qTenantPaymentForUpdate, r.PaymentNo, r.TenantID)
			if err != nil {
				return false, fmt.Errorf("read payment: %w", err)
			}
			res, err = st.exec(ctx, tx, qReleaseRefund, int64(r.Amount), p.ID, int64(r.Amount))
			if err != nil {
				return false, fmt.Errorf("release refund: %w", err)
			}
			if ok, err := affected(res); err != nil || !ok {
				if err != nil {
					return false, err
				}
				return false, fmt.Errorf("release refund: payment %s has %d fen refunded, less than the %d fen reserved",
					p.PaymentNo, int64(p.Refunded), int64(r.Amount))
			}
			r.Status, r.FailReason = payment.RefundFailed, reason
			return true, nil
		})
	if err != nil {
		return payment.RefundTransition{}, fmt.Errorf("mysql: fail refund %s: %w", refundNo, err)
	}
	return tr, nil
}

// leaveRefundPending is the one transaction behind every transition of a refund: it
// locks the payment row first if lockPayment (so that it takes locks in the order
// CreateRefund does), then the refund row, calls change if the refund is still pending,
// and writes the outbox event with the change.
func (st *Store) leaveRefundPending(ctx context.Context, tenantID, refundNo, eventType string, lockPayment bool,
	change func(tx *sql.Tx, r *payment.Refund, now time.Time) (bool, error)) (payment.RefundTransition, error) {
	var tr payment.RefundTransition
	err := st.inTx(ctx, func(tx *sql.Tx) error {
		tr = payment.RefundTransition{}
		if lockPayment {
			r, err := st.getRefund(ctx, tx, qRefundByNo, tenantID, refundNo)
			if err != nil {
				return err
			}
			if _, err := st.getPayment(ctx, tx, qTenantPaymentForUpdate, r.PaymentNo, r.TenantID); err != nil {
				return fmt.Errorf("lock payment: %w", err)
			}
		}
		r, err := st.getRefund(ctx, tx, qRefundByNoForUpdate, tenantID, refundNo)
		if err != nil {
			return err
		}
		if r.Status != payment.RefundPending {
			tr.Refund = r
			return nil
		}
		now := st.clock()
		changed, err := change(tx, &r, now)
		if err != nil {
			return err
		}
		if !changed {
			tr.Refund, err = st.getRefund(ctx, tx, qRefundByNoForUpdate, tenantID, refundNo)
			return err
		}
		r.UpdatedAt = now
		r.Version++
		eventID, err := st.insertRefundEvent(ctx, tx, eventType, r, now)
		if err != nil {
			return err
		}
		tr = payment.RefundTransition{Refund: r, Changed: true, EventID: eventID}
		return nil
	})
	return tr, err
}

// refundEventPayload is the JSON body delivered to the merchant for a refund event.
type refundEventPayload struct {
	EventID      string               `json:"event_id"`
	Type         string               `json:"type"`
	TenantID     string               `json:"tenant_id"`
	PaymentNo    string               `json:"payment_no"`
	RefundNo     string               `json:"refund_no"`
	OutRequestNo string               `json:"out_request_no"`
	AmountFen    int64                `json:"amount_fen"`
	Status       payment.RefundStatus `json:"status"`
	Reason       string               `json:"reason,omitempty"`
	FailReason   string               `json:"fail_reason,omitempty"`
	RefundedAt   time.Time            `json:"refunded_at,omitzero"`
	CreatedAt    time.Time            `json:"created_at"`
}

func (st *Store) insertRefundEvent(ctx context.Context, tx *sql.Tx, eventType string, r payment.Refund, now time.Time) (string, error) {
	ev := refundEventPayload{
		EventID: RefundEventID(r.OutRequestNo, eventType), Type: eventType, TenantID: r.TenantID, PaymentNo: r.PaymentNo,
		RefundNo: r.RefundNo, OutRequestNo: r.OutRequestNo, AmountFen: int64(r.Amount), Status: r.Status,
		Reason: r.Reason, FailReason: r.FailReason, RefundedAt: r.RefundedAt, CreatedAt: now,
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return "", fmt.Errorf("encode event: %w", err)
	}
	return ev.EventID, st.appendEvent(ctx, tx, ev.EventID, r.TenantID, r.PaymentNo, eventType, body, now)
}

func (st *Store) getRefund(ctx context.Context, tx *sql.Tx, query string, args ...any) (payment.Refund, error) {
	var r payment.Refund
	err := st.queryRow(ctx, tx, query, args, func(row *sql.Row) error {
		var err error
		r, err = scanRefund(row)
		return err
	})
	return r, err
}

func scanRefund(s scanner) (payment.Refund, error) {
	var (
		r          payment.Refund
		amount     int64
		refundedAt sql.NullTime
	)
	if err := s.Scan(&r.ID, &r.RefundNo, &r.TenantID, &r.PaymentNo, &r.OutRequestNo, &amount, &r.Reason, &r.Status,
		&r.FailReason, &r.TradeNo, &r.WorkflowID, &refundedAt, &r.Version, &r.CreatedAt, &r.UpdatedAt, &r.AlipayAppID); err != nil {
		return payment.Refund{}, err
	}
	r.Amount = payment.Amount(amount)
	r.RefundedAt = refundedAt.Time
	return r, nil
}
