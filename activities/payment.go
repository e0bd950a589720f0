package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/paykit/paykit/payment"
)

// CreatePaymentInput creates (or adopts) the pending payment of a workflow run.
type CreatePaymentInput struct {
	PaymentNo  string         `json:"payment_no"`
	TenantID   string         `json:"tenant_id"`
	OrderID    string         `json:"order_id"`
	Amount     payment.Amount `json:"amount_fen"`
	Currency   string         `json:"currency"`
	Subject    string         `json:"subject"`
	Method     payment.Method `json:"method,omitempty"`
	Repurchase bool           `json:"repurchase,omitempty"`
	ExpireAt   time.Time      `json:"expire_at"`
	WorkflowID string         `json:"workflow_id"`
	// QueryInterval, when set, gives the payment its first query by the scheduled
	// reconciler (payment.NewPayment.QueryInterval).
	QueryInterval time.Duration `json:"query_interval,omitempty"`
}

// CreatePaymentResult is the payment the run owns from now on. Existed means the row was
// there before (an activity retry, a re-driven run, or a concurrent creator).
type CreatePaymentResult struct {
	Payment payment.Payment `json:"payment"`
	Existed bool            `json:"existed"`
	// QueryScheduled is Payment.QueryScheduled, which its JSON leaves out.
	QueryScheduled bool `json:"query_scheduled,omitempty"`
}

// CreatePayment inserts the pending payment. A duplicate on the active-order unique
// index or on payment_no returns the existing payment, so a retry creates nothing new.
func (a *Activities) CreatePayment(ctx context.Context, in CreatePaymentInput) (CreatePaymentResult, error) {
	np := payment.NewPayment{
		PaymentNo:  in.PaymentNo,
		TenantID:   in.TenantID,
		OrderID:    in.OrderID,
		Amount:     in.Amount,
		Currency:   in.Currency,
		Subject:    in.Subject,
		Method:     in.Method,
		Repurchase: in.Repurchase,
		ExpireAt:   in.ExpireAt,
		WorkflowID: in.WorkflowID,

		QueryInterval: in.QueryInterval,
	}
	if err := np.Validate(); err != nil {
		return CreatePaymentResult{}, classify("create payment", err)
	}
	if a.Gateways != nil {
		// The payment is opened on its tenant's current account at its method's channel
		// and records it: its trade, refunds and notifications stay there if the tenant
		// moves.
		app, err := a.Gateways.For(ctx, in.TenantID, in.Method.OrPage().Channel())
		if err != nil {
			return CreatePaymentResult{}, fmt.Errorf("create payment: app of tenant %s: %w", in.TenantID, err)
		}
		np.AlipayAppID = app.ID
	}
	p, existed, err := a.Store.CreatePendingPayment(ctx, np)
	if err != nil {
		// A refusal (the order is paid, a payment_no of another order) must not be
		// retried for the local activity's whole window; an outage must.
		return CreatePaymentResult{}, classify("create payment", err)
	}
	if existed {
		a.log().InfoContext(ctx, "pending payment already existed", "tenant_id", p.TenantID, "order_id", p.OrderID,
			"payment_no", p.PaymentNo, "requested_payment_no", in.PaymentNo, "status", p.Status.String())
	}
	return CreatePaymentResult{Payment: p, Existed: existed, QueryScheduled: p.QueryScheduled}, nil
}

// MarkPaidInput confirms a payment as paid.
type MarkPaidInput struct {
	PaymentNo string    `json:"payment_no"`
	TenantID  string    `json:"tenant_id"`
	OrderID   string    `json:"order_id"`
	TradeNo   string    `json:"trade_no"`
	PaidAt    time.Time `json:"paid_at"`
	// Evidence is EvidenceNotification when the payment is marked paid on a notification
	// signal: MarkPaid then acts only on the verified notification NotifyID names, whose
	// trade_no and gmt_payment replace TradeNo and PaidAt. Empty for Alipay's answer to
	// the worker's own query, which is the evidence itself.
	Evidence string `json:"evidence,omitempty"`
	NotifyID string `json:"notify_id,omitempty"`
	// NotOwned is set by a run marking a payment other than its own (an earlier payment
	// of its order): MarkPaid then writes nothing and returns the payment as it is. A
	// payment still pending has a run of its own, which alone marks it paid, with its
	// grant and webhook; one that is closed or failed is the caller's anomaly to record.
	NotOwned bool `json:"not_owned,omitempty"`
}

// ReadPayment returns a payment as its row holds it: a run for a payment the API opened
// reads it before answering a joining checkout.
func (a *Activities) ReadPayment(ctx context.Context, paymentNo string) (payment.Payment, error) {
	p, err := a.Store.GetPayment(ctx, paymentNo)
	if err != nil {
		return payment.Payment{}, classify("read payment", err)
	}
	return p, nil
}

// MarkPaid runs the success path's local transaction under the per-order lock. On lock
// contention it re-reads the status after a short wait: already paid is an answer, not
// an error; still pending is retried. On a notification signal it first confirms the
// notification (evidence.go): one that no verified record backs records an
// AnomalyUnverifiedSignal and changes nothing (Transition.Unverified).
func (a *Activities) MarkPaid(ctx context.Context, in MarkPaidInput) (payment.Transition, error) {
	if in.Evidence == EvidenceNotification {
		n, reason, err := a.confirmNotification(ctx, in)
		if err != nil {
			return payment.Transition{}, err
		}
		if reason != "" {
			return a.refuseUnverified(ctx, in, reason)
		}
		in.TradeNo, in.PaidAt = n.TradeNo, n.PaidAt
	}
	if in.NotOwned {
		p, err := a.Store.GetPayment(ctx, in.PaymentNo)
		if err != nil {
			return payment.Transition{}, classify("mark paid: read a payment of another run", err)
		}
		return payment.Transition{Payment: p}, nil
	}
	if a.Locker != nil {
		release, acquired, err := a.Locker.LockOrder(ctx, in.TenantID, in.OrderID)
		switch {
		case err != nil:
			// Redis is a fast path, never the guarantee: the row lock and the
			// compare-and-set below still make this exactly-once.
			a.log().WarnContext(ctx, "order lock unavailable, relying on the database", "payment_no", in.PaymentNo, "err", err)
		case !acquired:
			p, gerr := a.Store.GetPayment(ctx, in.PaymentNo)
			if gerr != nil {
				return payment.Transition{}, fmt.Errorf("mark paid: re-read after lock contention: %w", gerr)
			}
			if p.Status == payment.StatusPending {
				return payment.Transition{}, temporal.NewApplicationError("mark paid: order lock busy, payment still pending", ErrTypeLockBusy)
			}
			// No longer pending: the store's compare-and-set answers without writing, with
			// the payment's outbox event, so the run still delivers the webhook (the
			// holder may be a worker that died right after its commit).
		default:
			defer release(context.WithoutCancel(ctx))
		}
	}
	paidAt := in.PaidAt
	if paidAt.IsZero() {
		paidAt = a.now()
	}
	t, err := a.Store.MarkPaid(ctx, in.PaymentNo, in.TradeNo, paidAt)
	if err != nil {
		return payment.Transition{}, classify("mark paid", err)
	}
	if t.Changed {
		a.Metrics.transition(payment.StatusPaid.String())
	}
	return t, nil
}

// ClosePaymentInput closes an unpaid payment.
type ClosePaymentInput struct {
	PaymentNo string `json:"payment_no"`
	Reason    string `json:"reason"`
}

// ClosePayment moves a pending payment to closed and cancels its order in one
// transaction. If the payment is no longer pending, it returns the current state.
func (a *Activities) ClosePayment(ctx context.Context, in ClosePaymentInput) (payment.Transition, error) {
	t, err := a.Store.ClosePayment(ctx, in.PaymentNo, in.Reason)
	if err != nil {
		return payment.Transition{}, classify("close payment", err)
	}
	if t.Changed {
		a.Metrics.transition(payment.StatusClosed.String())
	}
	return t, nil
}

// FailPayment moves a pending payment to failed and releases its order in one
// transaction: Alipay reports money for it that does not match, so it must never become
// PAID and an operator resolves it from the recorded anomaly. If the payment is no longer
// pending, it returns the current state.
func (a *Activities) FailPayment(ctx context.Context, in ClosePaymentInput) (payment.Transition, error) {
	t, err := a.Store.FailPayment(ctx, in.PaymentNo, in.Reason)
	if err != nil {
		return payment.Transition{}, classify("fail payment", err)
	}
	if t.Changed {
		a.Metrics.transition(payment.StatusFailed.String())
	}
	return t, nil
}

// GrantBenefitInput grants the entitlement bought by a paid payment.
type GrantBenefitInput struct {
	TenantID  string `json:"tenant_id"`
	PaymentNo string `json:"payment_no"`
	OrderID   string `json:"order_id"`
}

// GrantBenefit inserts the grant once; a repeat finds the unique row and does nothing.
func (a *Activities) GrantBenefit(ctx context.Context, in GrantBenefitInput) (bool, error) {
	// One statement reads the payment as it inserts: an unpaid payment is refused
	// (EILLEGALSTATE, not retried) with nothing written.
	created, err := a.Store.GrantPaid(ctx, payment.BenefitGrant{
		TenantID: in.TenantID, PaymentNo: in.PaymentNo, OrderID: in.OrderID, Benefit: a.benefit(), CreatedAt: a.now(),
	})
	if err != nil {
		return false, classify("grant benefit", err)
	}
	if created {
		a.Metrics.grant()
	}
	return created, nil
}

// AnomalyInput records a case an operator must resolve.
type AnomalyInput struct {
	Kind      string `json:"kind"`
	TenantID  string `json:"tenant_id"`
	PaymentNo string `json:"payment_no"`
	// Subject is what the anomaly is about within the payment (payment.Anomaly.Subject).
	// Absent from the inputs of histories recorded before it, where it is empty.
	Subject string         `json:"subject,omitempty"`
	TradeNo string         `json:"trade_no"`
	Amount  payment.Amount `json:"amount_fen"`
	Detail  string         `json:"detail"`
}

// RecordAnomaly stores the anomaly durably and logs it at error level for alerting.
func (a *Activities) RecordAnomaly(ctx context.Context, in AnomalyInput) error {
	a.Metrics.anomaly(in.Kind)
	a.log().ErrorContext(ctx, "payment anomaly: operator action required", "kind", in.Kind, "tenant_id", in.TenantID,
		"payment_no", in.PaymentNo, "subject", in.Subject, "trade_no", in.TradeNo, "amount_fen", int64(in.Amount), "detail", in.Detail)
	err := a.Store.RecordAnomaly(ctx, payment.Anomaly{
		Kind: in.Kind, TenantID: in.TenantID, PaymentNo: in.PaymentNo, Subject: in.Subject, TradeNo: in.TradeNo,
		Amount: in.Amount, Detail: in.Detail, CreatedAt: a.now(),
	})
	if err != nil {
		return fmt.Errorf("record anomaly: %w", err)
	}
	if in.Kind == payment.AnomalyPaidAfterClose {
		return a.autoRefund(ctx, in)
	}
	return nil
}

// autoRefund refunds the money of a paid_after_close anomaly if the tenant asked for it.
// The refund_no is derived from the payment, so a retry finds the same refund.
func (a *Activities) autoRefund(ctx context.Context, in AnomalyInput) error {
	if a.RefundRedriver == nil {
		return nil
	}
	t, err := a.Store.GetTenant(ctx, in.TenantID)
	if err != nil {
		return fmt.Errorf("record anomaly: tenant: %w", err)
	}
	if !t.AutoRefundPaidAfterClose {
		return nil
	}
	p, err := a.Store.GetPayment(ctx, in.PaymentNo)
	if err != nil {
		return fmt.Errorf("record anomaly: %w", err)
	}
	if p.Status != payment.StatusClosed && p.Status != payment.StatusFailed {
		return nil
	}
	r, _, err := a.Store.CreateRefund(ctx, payment.AnomalyRefund(p, payment.Anomaly{Amount: in.Amount}))
	if err != nil {
		return fmt.Errorf("record anomaly: automatic refund: %w", err)
	}
	if _, err := a.RefundRedriver.RedriveRefund(ctx, r); err != nil {
		return fmt.Errorf("record anomaly: automatic refund: %w", err)
	}
	a.log().WarnContext(ctx, "paid_after_close: refunding automatically", "tenant_id", in.TenantID,
		"payment_no", in.PaymentNo, "refund_no", r.RefundNo)
	return nil
}
