package gateways

import (
	"context"
	"errors"

	"github.com/paykit/paykit/payment"
)

// CodeCallLimited is Alipay's answer to an app over its call frequency (调用频次超限).
const CodeCallLimited = "40005"

// Limiter spaces the calls made to one Alipay app on paykit's own initiative;
// *redis.CallLimiter implements it, shared by every process.
type Limiter interface {
	// Take waits until a call to appID may be made; an error means the call must not
	// be made now.
	Take(ctx context.Context, appID string) error
	// Throttled tells the limiter that Alipay answered that appID is over its call
	// frequency.
	Throttled(ctx context.Context, appID string)
}

// Limited is gw with the calls paykit makes on its own initiative (trade and refund
// queries, closes, bill downloads: the reconciliation, the audit, the expiry, a refund's
// confirmation, the statement)
// taken from l first, and Alipay's throttling answers reported to it. The calls a buyer
// or a merchant asks for (opening a trade, a refund) are not held back.
func Limited(gw payment.Gateway, appID string, l Limiter) payment.Gateway {
	if l == nil {
		return gw
	}
	return limited{Gateway: gw, app: appID, l: l}
}

// closeUnknown is the outcome of a close not made: no outcome, as the adapter's own on an
// error (never CloseDone, the zero value).
const closeUnknown = payment.CloseOutcome(-1)

type limited struct {
	payment.Gateway
	app string
	l   Limiter
}

func (g limited) take(ctx context.Context, op string) error {
	if err := g.l.Take(ctx, g.app); err != nil {
		return &payment.ChannelError{Op: op, Message: "held back by the app's call rate", Retryable: true, Err: err}
	}
	return nil
}

func (g limited) seen(ctx context.Context, err error) {
	var ce *payment.ChannelError
	if errors.As(err, &ce) && ce.Code == CodeCallLimited {
		g.l.Throttled(ctx, g.app)
	}
}

// Query implements payment.Gateway.
func (g limited) Query(ctx context.Context, paymentNo string) (payment.Trade, error) {
	if err := g.take(ctx, "alipay.trade.query"); err != nil {
		return payment.Trade{}, err
	}
	t, err := g.Gateway.Query(ctx, paymentNo)
	g.seen(ctx, err)
	return t, err
}

// Close implements payment.Gateway.
func (g limited) Close(ctx context.Context, paymentNo string) (payment.CloseOutcome, error) {
	if err := g.take(ctx, "alipay.trade.close"); err != nil {
		return closeUnknown, err
	}
	o, err := g.Gateway.Close(ctx, paymentNo)
	g.seen(ctx, err)
	return o, err
}

// QueryRefund implements payment.Gateway.
func (g limited) QueryRefund(ctx context.Context, paymentNo, outRequestNo string) (payment.RefundStatusAtChannel, error) {
	if err := g.take(ctx, "alipay.trade.fastpay.refund.query"); err != nil {
		return payment.RefundStatusAtChannel{}, err
	}
	s, err := g.Gateway.QueryRefund(ctx, paymentNo, outRequestNo)
	g.seen(ctx, err)
	return s, err
}

// BillDownloadURL keeps the bill capability of the wrapped gateway: a bill download is
// a call on paykit's own initiative.
func (g limited) BillDownloadURL(ctx context.Context, billDate string) (string, error) {
	b, ok := g.Gateway.(payment.BillSource)
	if !ok {
		return "", errors.New("the gateway cannot download bills")
	}
	if err := g.take(ctx, "alipay.data.dataservice.bill.downloadurl.query"); err != nil {
		return "", err
	}
	u, err := b.BillDownloadURL(ctx, billDate)
	g.seen(ctx, err)
	return u, err
}

// Precreate, Refund: a buyer's or a merchant's request, never held back; a throttling
// answer still holds the app's other calls.

// Precreate implements payment.Gateway.
func (g limited) Precreate(ctx context.Context, req payment.TradeRequest) (string, error) {
	qr, err := g.Gateway.Precreate(ctx, req)
	g.seen(ctx, err)
	return qr, err
}

// Refund implements payment.Gateway.
func (g limited) Refund(ctx context.Context, req payment.RefundRequest) (payment.RefundResult, error) {
	r, err := g.Gateway.Refund(ctx, req)
	g.seen(ctx, err)
	return r, err
}
