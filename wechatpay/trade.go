package wechatpay

import (
	"context"
	"fmt"
	"net/http"
	"time"

	wechat "github.com/go-pay/gopay/wechat/v3"

	"github.com/paykit/paykit/payment"
)

// Query implements payment.Gateway: the order's trade_state by out_trade_no. An order
// WeChat Pay does not know is TradeNotExist with a nil error. SUCCESS and REFUND (paid,
// then refunded in part or whole) are paid; CLOSED, REVOKED and PAYERROR can no longer be
// paid; NOTPAY and USERPAYING wait.
func (g *Gateway) Query(ctx context.Context, paymentNo string) (payment.Trade, error) {
	rsp, err := g.client.V3TransactionQueryOrder(ctx, wechat.OutTradeNo, paymentNo)
	if rsp == nil {
		return payment.Trade{}, transportError(opQuery, err)
	}
	if rsp.Code == http.StatusNotFound && rsp.ErrResponse.Code == "ORDER_NOT_EXIST" && err == nil {
		return payment.Trade{State: payment.TradeNotExist, PaymentNo: paymentNo}, nil
	}
	if err := answerError(opQuery, rsp.Code, rsp.ErrResponse, err); err != nil {
		return payment.Trade{}, err
	}
	o := rsp.Response
	if o.OutTradeNo != paymentNo || o.Mchid != g.cfg.MchID {
		return payment.Trade{}, &payment.ChannelError{Op: opQuery, Retryable: false,
			Message: fmt.Sprintf("the answer is about order %q of merchant %q, asked %q of %q", o.OutTradeNo, o.Mchid, paymentNo, g.cfg.MchID)}
	}
	t := payment.Trade{PaymentNo: o.OutTradeNo, TradeNo: o.TransactionId, RawStatus: o.TradeState}
	if o.Amount != nil {
		t.Amount = payment.Amount(o.Amount.Total)
	}
	if o.Payer != nil {
		t.BuyerID = o.Payer.Openid
	}
	switch o.TradeState {
	case "SUCCESS", "REFUND":
		t.State = payment.TradePaid
		if t.PaidAt, err = time.Parse(time.RFC3339, o.SuccessTime); err != nil {
			return payment.Trade{}, &payment.ChannelError{Op: opQuery, Retryable: false,
				Message: fmt.Sprintf("paid order %s with success_time %q", paymentNo, o.SuccessTime), Err: err}
		}
	case "CLOSED", "REVOKED", "PAYERROR":
		t.State = payment.TradeClosed
	case "NOTPAY", "USERPAYING":
		t.State = payment.TradeWaiting
	default:
		return payment.Trade{}, &payment.ChannelError{Op: opQuery, Retryable: false,
			Message: fmt.Sprintf("order %s in trade_state %q", paymentNo, o.TradeState)}
	}
	return t, nil
}

// Close implements payment.Gateway: 204 closes the order (again for one already
// closed); an order WeChat Pay does not know was never placed; one paid is refused
// (ORDERPAID), and that refusal is CloseAlreadyPaid, never an error.
func (g *Gateway) Close(ctx context.Context, paymentNo string) (payment.CloseOutcome, error) {
	rsp, err := g.client.V3TransactionCloseOrder(ctx, paymentNo)
	if rsp == nil {
		return 0, transportError(opClose, err)
	}
	if err == nil {
		switch rsp.ErrResponse.Code {
		case "ORDER_NOT_EXIST":
			return payment.CloseNotExist, nil
		case "ORDERPAID", "TRADE_ERROR":
			return payment.CloseAlreadyPaid, nil
		case "ORDER_CLOSED":
			return payment.CloseDone, nil
		}
	}
	if err := answerError(opClose, rsp.Code, rsp.ErrResponse, err); err != nil {
		return 0, err
	}
	return payment.CloseDone, nil
}
