package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/paykit/paykit/payment"
)

// ErrTypeBalanceShortfall is Alipay's ACQ.SELLER_BALANCE_NOT_ENOUGH: a refusal that a
// refund's workflow retries later, for a while, before it gives up.
const ErrTypeBalanceShortfall = "RefundBalanceShortfall"

// SubCodeSellerBalanceNotEnough is Alipay's answer when the merchant's balance cannot
// cover a refund.
const SubCodeSellerBalanceNotEnough = "ACQ.SELLER_BALANCE_NOT_ENOUGH"

// RefundKey names one refund: a tenant and the merchant's refund_no.
type RefundKey struct {
	TenantID string `json:"tenant_id"`
	RefundNo string `json:"refund_no"`
}

// GetRefund reads a refund as the database holds it.
func (a *Activities) GetRefund(ctx context.Context, in RefundKey) (payment.Refund, error) {
	r, err := a.Store.GetRefund(ctx, in.TenantID, in.RefundNo)
	if err != nil {
		if errors.Is(err, payment.ErrNotFound) {
			return payment.Refund{}, temporal.NewNonRetryableApplicationError("get refund: no refund "+in.RefundNo, ErrTypeInvalid, err)
		}
		return payment.Refund{}, fmt.Errorf("get refund: %w", err)
	}
	return r, nil
}

// RefundChannelInput is one alipay.trade.refund request. OutRequestNo is fixed for the
// refund, so every attempt is the same request to Alipay.
type RefundChannelInput struct {
	PaymentNo    string         `json:"payment_no"`
	OutRequestNo string         `json:"out_request_no"`
	Amount       payment.Amount `json:"amount_fen"`
	Reason       string         `json:"reason,omitempty"`
}

// RefundAtChannel asks Alipay for the refund. A replay, or a refund Alipay is still
// processing, answers FundChange=false, which the workflow confirms by the refund query. ACQ.SYSTEM_ERROR, a timeout or a 5xx leave the outcome
// unknown and are retried with the same out_request_no; a balance shortfall is a
// non-retryable ErrTypeBalanceShortfall, any other refusal a non-retryable
// ErrTypeChannelRefused.
func (a *Activities) RefundAtChannel(ctx context.Context, in RefundChannelInput) (payment.RefundResult, error) {
	gw, err := a.gatewayOf(ctx, in.PaymentNo)
	if err != nil {
		return payment.RefundResult{}, err
	}
	res, err := gw.Refund(ctx, payment.RefundRequest{
		PaymentNo: in.PaymentNo, OutRequestNo: in.OutRequestNo, Amount: in.Amount, Reason: in.Reason,
	})
	if err != nil {
		var ce *payment.ChannelError
		if errors.As(err, &ce) && !ce.Retryable {
			switch sub := strings.TrimPrefix(ce.SubCode, "aop."); {
			case sub == SubCodeSellerBalanceNotEnough:
				return payment.RefundResult{}, temporal.NewNonRetryableApplicationError("refund: "+ce.Error(), ErrTypeBalanceShortfall, err)
			case sub == "":
				// Not a refusal by Alipay: an answer that failed its signature or made no
				// sense. The outcome is unknown, and the request is safe to send again.
				return payment.RefundResult{}, fmt.Errorf("refund: outcome unknown: %w", err)
			}
		}
		return payment.RefundResult{}, classify("refund", err)
	}
	return res, nil
}

// RefundQueryInput asks Alipay about one refund request.
type RefundQueryInput struct {
	PaymentNo    string `json:"payment_no"`
	OutRequestNo string `json:"out_request_no"`
}

// QueryRefundAtChannel asks alipay.trade.fastpay.refund.query whether the refund took
// effect; Found=false means Alipay moved no money for it.
func (a *Activities) QueryRefundAtChannel(ctx context.Context, in RefundQueryInput) (payment.RefundStatusAtChannel, error) {
	gw, err := a.gatewayOf(ctx, in.PaymentNo)
	if err != nil {
		return payment.RefundStatusAtChannel{}, err
	}
	st, err := gw.QueryRefund(ctx, in.PaymentNo, in.OutRequestNo)
	if err != nil {
		return payment.RefundStatusAtChannel{}, classify("query refund", err)
	}
	return st, nil
}

// MarkRefundSucceededInput confirms a refund that Alipay carried out.
type MarkRefundSucceededInput struct {
	TenantID   string    `json:"tenant_id"`
	RefundNo   string    `json:"refund_no"`
	TradeNo    string    `json:"trade_no,omitempty"`
	RefundedAt time.Time `json:"refunded_at,omitzero"`
}

// MarkRefundSucceeded moves the refund to succeeded with its outbox event; a refund that
// is final already is returned as it is.
func (a *Activities) MarkRefundSucceeded(ctx context.Context, in MarkRefundSucceededInput) (payment.RefundTransition, error) {
	tr, err := a.Store.MarkRefundSucceeded(ctx, in.TenantID, in.RefundNo, in.TradeNo, in.RefundedAt)
	if err != nil {
		return payment.RefundTransition{}, classify("mark refund succeeded", err)
	}
	if tr.Changed {
		a.Metrics.refund(payment.RefundSucceeded)
		a.log().InfoContext(ctx, "refund succeeded", "tenant_id", in.TenantID, "refund_no", in.RefundNo,
			"payment_no", tr.Refund.PaymentNo, "amount_fen", int64(tr.Refund.Amount))
	}
	return tr, nil
}

// FailRefundInput gives up on a refund that Alipay refused.
type FailRefundInput struct {
	TenantID string `json:"tenant_id"`
	RefundNo string `json:"refund_no"`
	Reason   string `json:"reason"`
}

// FailRefund moves the refund to failed and releases its reservation on the payment in
// one transaction, with its outbox event; a refund that is final already is returned as
// it is.
func (a *Activities) FailRefund(ctx context.Context, in FailRefundInput) (payment.RefundTransition, error) {
	tr, err := a.Store.FailRefund(ctx, in.TenantID, in.RefundNo, in.Reason)
	if err != nil {
		return payment.RefundTransition{}, classify("fail refund", err)
	}
	if tr.Changed {
		a.Metrics.refund(payment.RefundFailed)
		a.log().WarnContext(ctx, "refund failed", "tenant_id", in.TenantID, "refund_no", in.RefundNo,
			"payment_no", tr.Refund.PaymentNo, "reason", in.Reason)
	}
	return tr, nil
}
