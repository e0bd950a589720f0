package wechatpay

import (
	"context"
	"errors"

	"github.com/paykit/paykit/payment"
)

// errNoRefunds is why the adapter does not refund yet: WeChat Pay's refunds (POST
// /v3/refund/domestic/refunds, their query and REFUND.* notifications) are the channel's
// next part.
var errNoRefunds = errors.New("refunds through WeChat Pay are not supported yet")

// Refund implements payment.Gateway: it refuses, calling nothing, so that no money moves
// and the refund fails as a refusal, never as an outcome unknown.
func (g *Gateway) Refund(context.Context, payment.RefundRequest) (payment.RefundResult, error) {
	return payment.RefundResult{}, &payment.ChannelError{Op: "wechatpay.refund", SubCode: "NOT_SUPPORTED",
		Message: errNoRefunds.Error(), Retryable: false, Err: errNoRefunds}
}

// QueryRefund implements payment.Gateway: it refuses, as Refund does; it never says a
// refund was not found, which WeChat Pay was not asked.
func (g *Gateway) QueryRefund(context.Context, string, string) (payment.RefundStatusAtChannel, error) {
	return payment.RefundStatusAtChannel{}, &payment.ChannelError{Op: "wechatpay.refund.query", SubCode: "NOT_SUPPORTED",
		Message: errNoRefunds.Error(), Retryable: false, Err: errNoRefunds}
}

var _ payment.Gateway = (*Gateway)(nil)
