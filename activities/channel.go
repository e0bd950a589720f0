package activities

import (
	"context"
	"fmt"
	"time"

	"github.com/paykit/paykit/payment"
)

// OpenTradeInput asks Alipay for a way to pay: a cashier URL or a QR code.
type OpenTradeInput struct {
	PaymentNo string         `json:"payment_no"`
	Subject   string         `json:"subject"`
	Amount    payment.Amount `json:"amount_fen"`
	ExpireAt  time.Time      `json:"expire_at"`
	Method    payment.Method `json:"method"`
	ReturnURL string         `json:"return_url,omitempty"`
}

// OpenTradeResult carries what the buyer needs.
type OpenTradeResult struct {
	PayURL string `json:"pay_url,omitempty"`
	QRCode string `json:"qr_code,omitempty"`
}

// OpenTrade builds the page-pay URL or precreates the QR trade. Both are keyed by
// out_trade_no, so repeating them creates no second trade. time_expire is the local
// expiry truncated to the second, never later.
func (a *Activities) OpenTrade(ctx context.Context, in OpenTradeInput) (OpenTradeResult, error) {
	req := payment.TradeRequest{
		PaymentNo: in.PaymentNo,
		Subject:   in.Subject,
		Amount:    in.Amount,
		ExpireAt:  in.ExpireAt.Truncate(time.Second),
		ReturnURL: in.ReturnURL,
	}
	gw, err := a.gatewayOf(ctx, in.PaymentNo)
	if err != nil {
		return OpenTradeResult{}, err
	}
	if in.Method == payment.MethodQR {
		qr, err := gw.Precreate(ctx, req)
		if err != nil {
			return OpenTradeResult{}, classify("precreate", err)
		}
		return OpenTradeResult{QRCode: qr}, nil
	}
	url, err := gw.PagePayURL(ctx, req)
	if err != nil {
		return OpenTradeResult{}, classify("page pay url", err)
	}
	return OpenTradeResult{PayURL: url}, nil
}

// QueryTrade asks Alipay for the trade's state. "Trade not exist" is a state, not an error.
func (a *Activities) QueryTrade(ctx context.Context, paymentNo string) (payment.Trade, error) {
	gw, err := a.gatewayOf(ctx, paymentNo)
	if err != nil {
		return payment.Trade{}, err
	}
	t, err := gw.Query(ctx, paymentNo)
	if err != nil {
		return payment.Trade{}, classify("query trade", err)
	}
	return t, nil
}

// CloseTrade closes the trade at Alipay so it can no longer be paid. A refusal because it
// is already paid comes back as CloseAlreadyPaid, not as an error.
func (a *Activities) CloseTrade(ctx context.Context, paymentNo string) (payment.CloseOutcome, error) {
	gw, err := a.gatewayOf(ctx, paymentNo)
	if err != nil {
		return 0, err
	}
	out, err := gw.Close(ctx, paymentNo)
	if err != nil {
		return 0, classify("close trade", err)
	}
	return out, nil
}

// gatewayOf returns the gateway of the app a payment goes through: its tenant's. The
// activities' inputs name only the payment, as the workflows that have run send them, so
// the tenant is read from the payment. A failure here is retried.
func (a *Activities) gatewayOf(ctx context.Context, paymentNo string) (payment.Gateway, error) {
	if a.Gateways == nil {
		return a.Gateway, nil
	}
	p, err := a.Store.GetPayment(ctx, paymentNo)
	if err != nil {
		return nil, fmt.Errorf("gateway of payment %s: %w", paymentNo, err)
	}
	gw, err := a.Gateways.For(ctx, p.TenantID)
	if err != nil {
		return nil, fmt.Errorf("gateway of payment %s: %w", paymentNo, err)
	}
	return gw, nil
}
