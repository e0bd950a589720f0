package alipay

import (
	"context"
	"fmt"

	"github.com/paykit/paykit/payment"
	"github.com/smartwalle/alipay/v3"
)

// Mobile and app pay: the operation names and the product codes Alipay signs them under.
const (
	opWapPay      = "alipay.trade.wap.pay"
	opAppPay      = "alipay.trade.app.pay"
	productWapPay = "QUICK_WAP_WAY"
	productAppPay = "QUICK_MSECURITY_PAY"
)

// WapPayURL returns the signed alipay.trade.wap.pay URL a phone's browser opens. As with
// page pay, no trade exists at Alipay until then.
func (g *Gateway) WapPayURL(ctx context.Context, req payment.TradeRequest) (string, error) {
	t, err := g.tradeParams(opWapPay, req, productWapPay)
	if err != nil {
		return "", err
	}
	// TradeWapPay has its own time_expire field, which hides the embedded Trade's in the
	// JSON of biz_content: it must be set there, or the trade would have no time_expire.
	u, err := g.client.TradeWapPay(alipay.TradeWapPay{Trade: t, QuitURL: req.QuitURL, TimeExpire: t.TimeExpire})
	if err != nil {
		return "", invalidRequest(opWapPay, fmt.Errorf("build wap pay url: %w", err))
	}
	g.log.DebugContext(ctx, "wap pay url built", "payment_no", req.PaymentNo, "time_expire", t.TimeExpire)
	return u.String(), nil
}

// AppPayOrderString returns the signed alipay.trade.app.pay order string that the
// merchant's app passes to the Alipay app SDK. No trade exists until the buyer's Alipay
// app submits it; Alipay app pay has no return_url.
func (g *Gateway) AppPayOrderString(ctx context.Context, req payment.TradeRequest) (string, error) {
	t, err := g.tradeParams(opAppPay, req, productAppPay)
	if err != nil {
		return "", err
	}
	t.ReturnURL = ""
	s, err := g.client.TradeAppPay(alipay.TradeAppPay{Trade: t})
	if err != nil {
		return "", invalidRequest(opAppPay, fmt.Errorf("build app pay order string: %w", err))
	}
	g.log.DebugContext(ctx, "app pay order string built", "payment_no", req.PaymentNo, "time_expire", t.TimeExpire)
	return s, nil
}
