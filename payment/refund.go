package payment

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// RefundStatus is the state of a refund. Its integer values are stored in MySQL.
type RefundStatus int8

// The refund statuses; their values are stored.
const (
	RefundPending   RefundStatus = 0 // reserved locally; Alipay may or may not have moved the money yet
	RefundSucceeded RefundStatus = 1 // Alipay moved the money; final
	RefundFailed    RefundStatus = 2 // Alipay refused it and the reservation was released; final
)

// String returns the status name used in APIs, logs and search attributes.
func (s RefundStatus) String() string {
	switch s {
	case RefundPending:
		return "PENDING"
	case RefundSucceeded:
		return "SUCCEEDED"
	case RefundFailed:
		return "FAILED"
	default:
		return fmt.Sprintf("RefundStatus(%d)", int8(s))
	}
}

// MarshalText encodes the status by name.
func (s RefundStatus) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText decodes a status name.
func (s *RefundStatus) UnmarshalText(b []byte) error {
	switch string(b) {
	case "PENDING":
		*s = RefundPending
	case "SUCCEEDED":
		*s = RefundSucceeded
	case "FAILED":
		*s = RefundFailed
	default:
		return Errorf(EINVALID, "unknown refund status %q", b)
	}
	return nil
}

// Final reports whether no further transition is possible.
func (s RefundStatus) Final() bool { return s != RefundPending }

// Refund states of a payment, derived from its refunded total.
const (
	RefundStateNone    = "none"
	RefundStatePartial = "partial"
	RefundStateFull    = "full"
)

// RefundStateOf says how much of a payment of amount has been refunded (or is reserved
// for refunds in progress).
func RefundStateOf(amount, refunded Amount) string {
	switch {
	case refunded <= 0:
		return RefundStateNone
	case refunded < amount:
		return RefundStatePartial
	default:
		return RefundStateFull
	}
}

// Error codes of refunds.
const (
	// ENOTPAID refuses a refund of a payment that is not PAID (409).
	ENOTPAID = "payment_not_paid"
	// EREFUNDEXCEEDS refuses a refund above what remains refundable (409).
	EREFUNDEXCEEDS = "refund_exceeds_remaining"
)

// Event types of refunds.
const (
	EventRefundSucceeded = "refund.succeeded"
	EventRefundFailed    = "refund.failed"
)

// Refund gives back part or all of a paid payment. RefundNo is the merchant's id for it;
// OutRequestNo is Alipay's idempotency key, fixed when the refund is created.
type Refund struct {
	ID           int64        `json:"-"`
	RefundNo     string       `json:"refund_no"`
	TenantID     string       `json:"tenant_id"`
	PaymentNo    string       `json:"payment_no"`
	OutRequestNo string       `json:"out_request_no"`
	Amount       Amount       `json:"amount_fen"`
	Reason       string       `json:"reason,omitempty"`
	Status       RefundStatus `json:"status"`
	FailReason   string       `json:"fail_reason,omitempty"`
	TradeNo      string       `json:"trade_no,omitempty"`
	WorkflowID   string       `json:"workflow_id"`
	// AlipayAppID is its payment's Payment.AlipayAppID, copied when the refund is
	// created: a trade is refunded only through the app that holds it.
	AlipayAppID string    `json:"-"`
	RefundedAt  time.Time `json:"refunded_at,omitzero"`
	Version     int64     `json:"version"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// NewRefund is what the store needs to reserve and insert a refund.
type NewRefund struct {
	RefundNo  string
	TenantID  string
	PaymentNo string
	Amount    Amount
	Reason    string
	// ForClosedPayment refunds money Alipay took for a payment that is CLOSED or FAILED
	// locally (a paid_after_close anomaly) instead of a PAID one. Only operators set it.
	ForClosedPayment bool
}

// AnomalyPaidAfterClose is the kind of anomaly a refund resolves: money Alipay took for
// a payment that was already closed locally.
const AnomalyPaidAfterClose = "paid_after_close"

// AnomalyUnverifiedSignal is recorded when a payment's workflow is handed a notification
// signal that no recorded, verified Alipay notification backs (a signal sent straight to
// Temporal, or one whose payload does not decode): the signal moves no state.
const AnomalyUnverifiedSignal = "unverified_signal"

// AnomalyRefund is the refund that gives back the money of a paid_after_close anomaly of
// payment p: its refund_no is derived from the payment, so asking for it again, by hand
// or automatically, finds the same refund.
func AnomalyRefund(p Payment, a Anomaly) NewRefund {
	amount := a.Amount
	if amount <= 0 || amount > p.Amount {
		amount = p.Amount
	}
	return NewRefund{
		RefundNo: AnomalyRefundNo(p.PaymentNo), TenantID: p.TenantID, PaymentNo: p.PaymentNo, Amount: amount,
		Reason: "paid after the payment was closed", ForClosedPayment: true,
	}
}

// AnomalyRefundNo is the refund_no of the refund that resolves a payment's
// paid_after_close anomaly: one per payment, however often the operator asks.
func AnomalyRefundNo(paymentNo string) string {
	return "anomaly_" + paymentNo
}

// MaxRefundReason is the size of refunds.reason.
const MaxRefundReason = 256

// ValidateRefundNo checks a merchant refund id with the same rule as order ids.
func ValidateRefundNo(no string) error {
	if !idPattern.MatchString(no) {
		return Errorf(EINVALID, "refund_no must be 1-64 characters of A-Z a-z 0-9 _ -")
	}
	return nil
}

// Validate checks every field of a new refund.
func (n NewRefund) Validate() error {
	if err := ValidateRefundNo(n.RefundNo); err != nil {
		return err
	}
	if err := ValidateTenantID(n.TenantID); err != nil {
		return err
	}
	if err := ValidatePaymentNo(n.PaymentNo); err != nil {
		return err
	}
	if n.Amount <= 0 {
		return Errorf(EINVALID, "amount_fen must be a positive number of fen, got %d", int64(n.Amount))
	}
	if err := n.Amount.Validate(); err != nil {
		return err
	}
	if len(n.Reason) > MaxRefundReason {
		return Errorf(EINVALID, "reason must be at most %d bytes", MaxRefundReason)
	}
	return nil
}

// OutRequestNo derives Alipay's out_request_no of a refund from the tenant and the
// merchant's refund_no: fixed for the refund's life, so that every retry of the refund is
// the same request to Alipay, and distinct across tenants that reuse a refund_no.
func OutRequestNo(tenantID, refundNo string) string {
	sum := sha256.Sum256([]byte(tenantID + "\x00" + refundNo))
	return "R" + hex.EncodeToString(sum[:])[:40]
}

// RefundWorkflowID is the business idempotency key of a refund: one tenant, one refund_no.
func RefundWorkflowID(tenantID, refundNo string) string {
	return "refund:" + tenantID + ":" + refundNo
}

// RefundTransition is the outcome of a compare-and-set on a refund's status. Changed is
// true only for the one caller whose update moved the state.
type RefundTransition struct {
	Refund  Refund `json:"refund"`
	Changed bool   `json:"changed"`
	// EventID is the outbox event written with the change, if any.
	EventID string `json:"event_id,omitempty"`
}

// RefundStatusAtChannel is Alipay's answer to alipay.trade.fastpay.refund.query.
type RefundStatusAtChannel struct {
	// Found is true when Alipay has a successful refund with this out_request_no; false
	// means no money moved for it.
	Found        bool
	PaymentNo    string
	TradeNo      string
	OutRequestNo string
	RefundAmount Amount
	TotalAmount  Amount
	RefundedAt   time.Time
}
