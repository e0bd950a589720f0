package activities

import (
	"context"
	"fmt"
	"time"

	"github.com/paykit/paykit/payment"
)

// OpenTradeInput asks Alipay for a way to pay: a cashier URL, a QR code or an app order
// string.
type OpenTradeInput struct {
	PaymentNo string         `json:"payment_no"`
	Subject   string         `json:"subject"`
	Amount    payment.Amount `json:"amount_fen"`
	ExpireAt  time.Time      `json:"expire_at"`
	Method    payment.Method `json:"method"`
	ReturnURL string         `json:"return_url,omitempty"`
	QuitURL   string         `json:"quit_url,omitempty"`
	// Payer is what a WeChat Pay method needs of the buyer: the openid (JSAPI), the IP
	// address (H5).
	Payer payment.Payer `json:"payer,omitzero"`
}

// OpenTradeResult carries what the buyer needs: PayURL for page and wap, QRCode for qr,
// OrderString for app.
type OpenTradeResult struct {
	PayURL      string `json:"pay_url,omitempty"`
	QRCode      string `json:"qr_code,omitempty"`
	OrderString string `json:"order_string,omitempty"`
}

// OpenTrade opens the trade of the payment's method at its channel (Alipay: signs the page
// or wap pay URL or the app order string, or precreates the QR trade). It is keyed by
// out_trade_no, so repeating it creates no second trade.
// time_expire is the local expiry truncated to the second, never later. The result is
// kept with the payment while it is pending, so that GET /v1/payments/{no} can show it
// again; if that write fails the activity fails and is retried.
func (a *Activities) OpenTrade(ctx context.Context, in OpenTradeInput) (OpenTradeResult, error) {
	req := payment.TradeRequest{
		PaymentNo: in.PaymentNo,
		Method:    in.Method,
		Subject:   in.Subject,
		Amount:    in.Amount,
		ExpireAt:  in.ExpireAt.Truncate(time.Second),
		ReturnURL: in.ReturnURL,
		QuitURL:   in.QuitURL,
		OpenID:    in.Payer.OpenID,
		ClientIP:  in.Payer.ClientIP,
	}
	gw, err := a.gatewayOf(ctx, in.PaymentNo)
	if err != nil {
		return OpenTradeResult{}, err
	}
	h, err := gw.Open(ctx, req)
	if err != nil {
		return OpenTradeResult{}, classify("open trade ("+string(in.Method)+")", err)
	}
	res := OpenTradeResult{PayURL: h.PayURL, QRCode: h.QRCode, OrderString: h.OrderString}
	if err := a.Store.SetPayLink(ctx, in.PaymentNo, h.Link()); err != nil {
		return OpenTradeResult{}, fmt.Errorf("keep pay link: %w", err)
	}
	return res, nil
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

// gatewayOf returns the gateway of the account a payment was opened on at its channel,
// its tenant's then, wherever the tenant has moved since. The activities' inputs name only the
// payment, as the workflows that have run send them, so the tenant and the app are read
// from the payment. A failure here is retried.
func (a *Activities) gatewayOf(ctx context.Context, paymentNo string) (payment.Gateway, error) {
	if a.Gateways == nil {
		return a.Gateway, nil
	}
	on, err := a.appOf(ctx, paymentNo)
	if err != nil {
		return nil, fmt.Errorf("gateway of payment %s: %w", paymentNo, err)
	}
	app, err := a.Gateways.ForPayment(ctx, on.tenantID, on.channel, on.appID)
	if err != nil {
		return nil, fmt.Errorf("gateway of payment %s: %w", paymentNo, err)
	}
	return app.Gateway, nil
}

// paymentApp is the tenant of a payment, its channel, the account it was opened on there
// and its amount.
type paymentApp struct {
	tenantID, appID string
	channel         payment.Channel
	amount          payment.Amount
}

// appOf returns the tenant of a payment, its channel, its account and its amount. None
// ever changes, so they are
// read from MySQL once per process and payment (up to maxKnownPayments kept).
func (a *Activities) appOf(ctx context.Context, paymentNo string) (paymentApp, error) {
	if v, ok := a.paymentApps.Load(paymentNo); ok {
		return v.(paymentApp), nil
	}
	p, err := a.Store.GetPayment(ctx, paymentNo)
	if err != nil {
		return paymentApp{}, err
	}
	if a.knownPayments.Add(1) > maxKnownPayments {
		a.paymentApps.Clear()
		a.knownPayments.Store(0)
	}
	on := paymentApp{tenantID: p.TenantID, appID: p.AlipayAppID, channel: p.Channel.OrAlipay(), amount: p.Amount}
	a.paymentApps.Store(paymentNo, on)
	return on, nil
}

// maxKnownPayments bounds the payment → app entries kept by appOf.
const maxKnownPayments = 100000
