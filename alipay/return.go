package alipay

import (
	"context"
	"net/url"
	"time"

	"github.com/paykit/paykit/payment"
)

// Return is what Alipay's cashier appended to return_url when it sent the buyer back
// after paying (the synchronous return), once verified.
type Return struct {
	Method    string // alipay.trade.page.pay.return or alipay.trade.wap.pay.return
	PaymentNo string // out_trade_no
	TradeNo   string
	Amount    payment.Amount
	AppID     string
	SellerID  string
	Timestamp time.Time
}

// VerifyReturn verifies the signed parameters of a synchronous return (the query of the
// return_url request): the signature over every field but sign and sign_type, as for
// notifications, and that it is addressed to this app and seller. A verified return shows
// that Alipay sent the buyer back; it does not make the payment paid: only the
// asynchronous notification or a trade query does.
func (g *Gateway) VerifyReturn(ctx context.Context, q url.Values) (Return, error) {
	if len(q) == 0 || q.Get("sign") == "" {
		return Return{}, payment.Errorf(payment.EBADSIGNATURE, "return parameters are not signed")
	}
	if st := q.Get("sign_type"); st != "RSA2" {
		return Return{}, payment.Errorf(payment.EBADSIGNATURE, "return sign_type %q is not RSA2", st)
	}
	if err := g.client.VerifySign(ctx, q); err != nil {
		return Return{}, &payment.Error{Code: payment.EBADSIGNATURE, Message: "return signature did not verify", Err: err}
	}
	r := Return{Method: q.Get("method"), PaymentNo: q.Get("out_trade_no"), TradeNo: q.Get("trade_no"),
		AppID: q.Get("app_id"), SellerID: q.Get("seller_id")}
	switch r.Method {
	case opPagePay + ".return", opWapPay + ".return":
	default:
		return Return{}, payment.Errorf(payment.EINVALID, "return method %q is not a page or wap pay return", r.Method)
	}
	if r.AppID != g.appID {
		return Return{}, payment.Errorf(payment.EUNPROCESSABLE, "return app_id %q is not ours", r.AppID)
	}
	if r.SellerID != g.sellerID {
		return Return{}, payment.Errorf(payment.EUNPROCESSABLE, "return seller_id %q is not ours", r.SellerID)
	}
	if err := payment.ValidatePaymentNo(r.PaymentNo); err != nil || r.TradeNo == "" {
		return Return{}, payment.Errorf(payment.EINVALID, "return lacks a valid out_trade_no or trade_no")
	}
	amount, err := payment.ParseYuan(q.Get("total_amount"))
	if err != nil {
		return Return{}, &payment.Error{Code: payment.EINVALID, Message: "return total_amount is malformed", Err: err}
	}
	r.Amount = amount
	if r.Timestamp, err = g.parseTime(q.Get("timestamp")); err != nil {
		return Return{}, &payment.Error{Code: payment.EINVALID, Message: "return timestamp is malformed", Err: err}
	}
	return r, nil
}
