package activities_test

import (
	"context"
	"errors"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/payment"
)

// refundGateway answers every refund with err.
type refundGateway struct {
	payment.Gateway
	err error
}

func (g refundGateway) Refund(_ context.Context, req payment.RefundRequest) (payment.RefundResult, error) {
	if g.err != nil {
		return payment.RefundResult{}, g.err
	}
	return payment.RefundResult{FundChange: true, RefundAmount: req.Amount}, nil
}

func TestRefundAtChannelClassifiesAlipaysAnswers(t *testing.T) {
	refused := func(sub string) error {
		return &payment.ChannelError{Op: "alipay.trade.refund", Code: "40004", SubCode: sub, Message: "Business Failed"}
	}
	cases := []struct {
		name          string
		err           error
		wantType      string // "" for a success
		wantRetryable bool
	}{
		{"success", nil, "", false},
		{"system error is unknown: retried", &payment.ChannelError{Op: "alipay.trade.refund", SubCode: "ACQ.SYSTEM_ERROR", Retryable: true}, "", true},
		{"timeout is unknown: retried", &payment.ChannelError{Op: "alipay.trade.refund", Message: "timeout", Retryable: true}, "", true},
		{"balance shortfall", refused(activities.SubCodeSellerBalanceNotEnough), activities.ErrTypeBalanceShortfall, false},
		{"not allowed", refused("ACQ.TRADE_NOT_ALLOW_REFUND"), activities.ErrTypeChannelRefused, false},
		{"amount above total", refused("ACQ.REFUND_AMT_NOT_EQUAL_TOTAL"), activities.ErrTypeChannelRefused, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			acts := &activities.Activities{Gateway: refundGateway{err: tc.err}}
			_, err := acts.RefundAtChannel(context.Background(), activities.RefundChannelInput{PaymentNo: "P1", OutRequestNo: "R1", Amount: 100})
			if tc.err == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var appErr *temporal.ApplicationError
			isApp := errors.As(err, &appErr)
			if tc.wantRetryable {
				if isApp && appErr.NonRetryable() {
					t.Fatalf("err = %v, want retryable", err)
				}
				return
			}
			if !isApp || !appErr.NonRetryable() || appErr.Type() != tc.wantType {
				t.Fatalf("err = %v, want non-retryable %s", err, tc.wantType)
			}
		})
	}
}
