// Package paymenttest has test doubles of package payment's interfaces.
package paymenttest

import (
	"context"

	"github.com/paykit/paykit/payment"
)

// Gateway answers every call with an error that names the call, as a channel that
// refuses it (not retryable). A fake embeds it and implements the calls its test makes, so
// that a call the test did not expect fails with its name instead of a nil-interface panic.
type Gateway struct{}

var _ payment.Gateway = Gateway{}

func notFaked(call string) error {
	return &payment.ChannelError{Op: "paymenttest.Gateway." + call, SubCode: "NOT_FAKED", Message: "not faked in this test"}
}

// Open implements payment.Gateway.
func (Gateway) Open(context.Context, payment.TradeRequest) (payment.HandOff, error) {
	return payment.HandOff{}, notFaked("Open")
}

// SignedHandOff implements payment.Gateway.
func (Gateway) SignedHandOff(context.Context, payment.TradeRequest) (payment.HandOff, bool, error) {
	return payment.HandOff{}, false, notFaked("SignedHandOff")
}

// Query implements payment.Gateway.
func (Gateway) Query(context.Context, string) (payment.Trade, error) {
	return payment.Trade{}, notFaked("Query")
}

// Close implements payment.Gateway.
func (Gateway) Close(context.Context, string) (payment.CloseOutcome, error) {
	return 0, notFaked("Close")
}

// Refund implements payment.Gateway.
func (Gateway) Refund(context.Context, payment.RefundRequest) (payment.RefundResult, error) {
	return payment.RefundResult{}, notFaked("Refund")
}

// QueryRefund implements payment.Gateway.
func (Gateway) QueryRefund(context.Context, string, string) (payment.RefundStatusAtChannel, error) {
	return payment.RefundStatusAtChannel{}, notFaked("QueryRefund")
}

// DecodeNotification implements payment.Gateway.
func (Gateway) DecodeNotification(context.Context, payment.RawNotification) (payment.Notification, error) {
	return payment.Notification{}, notFaked("DecodeNotification")
}
