package alipay

import (
	"context"

	"github.com/paykit/paykit/payment"
)

// Open implements payment.Gateway: a QR payment's trade is precreated now; a page, wap
// or app payment's link is signed here, and Alipay creates its trade when the buyer uses
// it (SignedHandOff).
func (g *Gateway) Open(ctx context.Context, req payment.TradeRequest) (payment.HandOff, error) {
	if h, ok, err := g.SignedHandOff(ctx, req); ok || err != nil {
		return h, err
	}
	qr, err := g.Precreate(ctx, req)
	return payment.HandOff{QRCode: qr}, err
}

// SignedHandOff implements payment.Gateway: the page or wap cashier URL, or the app's
// order string, signed with the app's key; a QR code only Alipay's precreate gives.
func (g *Gateway) SignedHandOff(ctx context.Context, req payment.TradeRequest) (payment.HandOff, bool, error) {
	var h payment.HandOff
	var err error
	switch req.Method {
	case payment.MethodQR:
		return h, false, nil
	case payment.MethodWap:
		h.PayURL, err = g.WapPayURL(ctx, req)
	case payment.MethodApp:
		h.OrderString, err = g.AppPayOrderString(ctx, req)
	default:
		h.PayURL, err = g.PagePayURL(ctx, req)
	}
	return h, err == nil, err
}
