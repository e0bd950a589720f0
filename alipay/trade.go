package alipay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/smartwalle/alipay/v3"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/paykit/paykit/payment"
)

// Values returned alongside an error, so a caller that forgets to check the error does
// not read the zero value (TradeNotExist, CloseDone) as an answer.
const (
	stateUnknown = payment.TradeState(-1)
	closeUnknown = payment.CloseOutcome(-1)
)

// tradeParams validates a TradeRequest and builds the common trade fields. time_expire is
// the request's ExpireAt in China time, truncated to the second, so it is never later than
// the local expiry.
func (g *Gateway) tradeParams(op string, req payment.TradeRequest, productCode string) (alipay.Trade, error) {
	if err := payment.ValidatePaymentNo(req.PaymentNo); err != nil {
		return alipay.Trade{}, invalidRequest(op, err)
	}
	if err := req.Amount.Validate(); err != nil {
		return alipay.Trade{}, invalidRequest(op, err)
	}
	if req.Subject == "" || len(req.Subject) > 256 {
		return alipay.Trade{}, invalidRequest(op, payment.Errorf(payment.EINVALID, "subject must be 1-256 bytes"))
	}
	if req.ExpireAt.IsZero() {
		return alipay.Trade{}, invalidRequest(op, payment.Errorf(payment.EINVALID, "expire_at is required: it is sent as time_expire"))
	}
	if !req.ExpireAt.After(time.Now()) {
		return alipay.Trade{}, invalidRequest(op, payment.Errorf(payment.EUNPROCESSABLE, "payment %s expired at %s", req.PaymentNo, req.ExpireAt.Format(time.RFC3339)))
	}
	returnURL := req.ReturnURL
	if returnURL == "" {
		returnURL = g.returnURL
	}
	return alipay.Trade{
		NotifyURL:   g.notifyURL,
		ReturnURL:   returnURL,
		Subject:     req.Subject,
		OutTradeNo:  req.PaymentNo,
		TotalAmount: req.Amount.Yuan(),
		ProductCode: productCode,
		TimeExpire:  req.ExpireAt.In(g.loc).Format(timeLayout),
	}, nil
}

// PagePayURL returns the signed alipay.trade.page.pay URL the buyer's browser opens. No
// trade exists at Alipay until then.
func (g *Gateway) PagePayURL(ctx context.Context, req payment.TradeRequest) (string, error) {
	t, err := g.tradeParams(opPagePay, req, productPagePay)
	if err != nil {
		return "", err
	}
	u, err := g.client.TradePagePay(alipay.TradePagePay{Trade: t})
	if err != nil {
		return "", invalidRequest(opPagePay, fmt.Errorf("build page pay url: %w", err))
	}
	g.log.DebugContext(ctx, "page pay url built", "payment_no", req.PaymentNo, "time_expire", t.TimeExpire)
	return u.String(), nil
}

// Precreate creates the trade now (alipay.trade.precreate) and returns its qr_code.
func (g *Gateway) Precreate(ctx context.Context, req payment.TradeRequest) (string, error) {
	t, err := g.tradeParams(opPrecreate, req, productQR)
	if err != nil {
		return "", err
	}
	ctx, call := g.begin(ctx, opPrecreate, req.PaymentNo)
	rsp, err := g.client.TradePreCreate(ctx, alipay.TradePreCreate{Trade: t})
	qr, err := precreateResult(rsp, err)
	call.end(err)
	return qr, err
}

func precreateResult(rsp *alipay.TradePreCreateRsp, err error) (string, error) {
	if err != nil {
		return "", callError(opPrecreate, err)
	}
	if !rsp.IsSuccess() {
		return "", businessError(opPrecreate, rsp.Error, nil)
	}
	if rsp.QRCode == "" {
		return "", badAnswer(opPrecreate, "success answer without qr_code", nil)
	}
	return rsp.QRCode, nil
}

// Query returns the trade's state. A trade Alipay does not know (page pay not opened yet)
// is TradeNotExist with a nil error.
func (g *Gateway) Query(ctx context.Context, paymentNo string) (payment.Trade, error) {
	if err := payment.ValidatePaymentNo(paymentNo); err != nil {
		return payment.Trade{State: stateUnknown}, invalidRequest(opQuery, err)
	}
	ctx, call := g.begin(ctx, opQuery, paymentNo)
	rsp, err := g.client.TradeQuery(ctx, alipay.TradeQuery{OutTradeNo: paymentNo})
	tr, err := queryResult(paymentNo, rsp, err, g.loc)
	call.end(err, "trade_state", tr.State.String())
	return tr, err
}

// tradeState maps trade_status: only TRADE_SUCCESS and TRADE_FINISHED mean paid.
func tradeState(s alipay.TradeStatus) (payment.TradeState, bool) {
	switch s {
	case alipay.TradeStatusSuccess, alipay.TradeStatusFinished:
		return payment.TradePaid, true
	case alipay.TradeStatusWaitBuyerPay:
		return payment.TradeWaiting, true
	case alipay.TradeStatusClosed:
		return payment.TradeClosed, true
	}
	return stateUnknown, false
}

func queryResult(paymentNo string, rsp *alipay.TradeQueryRsp, err error, loc *time.Location) (payment.Trade, error) {
	unknown := payment.Trade{State: stateUnknown, PaymentNo: paymentNo}
	if err != nil {
		return unknown, callError(opQuery, err)
	}
	if !rsp.IsSuccess() {
		if subCode(rsp.Error) == SubCodeTradeNotExist {
			return payment.Trade{State: payment.TradeNotExist, PaymentNo: paymentNo}, nil
		}
		return unknown, businessError(opQuery, rsp.Error, nil)
	}
	if rsp.OutTradeNo != "" && rsp.OutTradeNo != paymentNo {
		return unknown, badAnswer(opQuery, fmt.Sprintf("answer is for out_trade_no %q", rsp.OutTradeNo), nil)
	}
	state, ok := tradeState(rsp.TradeStatus)
	if !ok {
		return unknown, badAnswer(opQuery, fmt.Sprintf("unknown trade_status %q", rsp.TradeStatus), nil)
	}
	amount, perr := payment.ParseYuan(rsp.TotalAmount)
	if perr != nil {
		return unknown, badAnswer(opQuery, "malformed total_amount", perr)
	}
	var paidAt time.Time
	if rsp.SendPayDate != "" {
		if paidAt, perr = time.ParseInLocation(timeLayout, rsp.SendPayDate, loc); perr != nil {
			return unknown, badAnswer(opQuery, "malformed send_pay_date", perr)
		}
	}
	buyer := rsp.BuyerUserId
	if buyer == "" {
		buyer = rsp.BuyerOpenId
	}
	return payment.Trade{
		State:     state,
		PaymentNo: paymentNo,
		TradeNo:   rsp.TradeNo,
		Amount:    amount,
		BuyerID:   buyer,
		PaidAt:    paidAt,
		RawStatus: string(rsp.TradeStatus),
	}, nil
}

// Close closes an unpaid trade. ACQ.TRADE_STATUS_ERROR and ACQ.TRADE_HAS_SUCCESS are
// CloseAlreadyPaid with a nil error; the caller confirms with Query (Alipay answers
// ACQ.TRADE_STATUS_ERROR for an already closed trade too).
func (g *Gateway) Close(ctx context.Context, paymentNo string) (payment.CloseOutcome, error) {
	if err := payment.ValidatePaymentNo(paymentNo); err != nil {
		return closeUnknown, invalidRequest(opClose, err)
	}
	ctx, call := g.begin(ctx, opClose, paymentNo)
	rsp, err := g.client.TradeClose(ctx, alipay.TradeClose{OutTradeNo: paymentNo})
	out, err := closeResult(rsp, err)
	call.end(err, "close_outcome", out.String())
	return out, err
}

func closeResult(rsp *alipay.TradeCloseRsp, err error) (payment.CloseOutcome, error) {
	if err != nil {
		return closeUnknown, callError(opClose, err)
	}
	if rsp.IsSuccess() {
		return payment.CloseDone, nil
	}
	switch subCode(rsp.Error) {
	case SubCodeTradeNotExist:
		return payment.CloseNotExist, nil
	case SubCodeTradeStatusError, SubCodeTradeHasSuccess:
		return payment.CloseAlreadyPaid, nil
	}
	return closeUnknown, businessError(opClose, rsp.Error, nil)
}

// call is one Alipay API call in flight: its span, and what its log line reports.
type call struct {
	g         *Gateway
	ctx       context.Context
	op        string
	paymentNo string
	start     time.Time
	span      trace.Span
}

// begin starts the span of one call, named after its Alipay method, under ctx's span.
func (g *Gateway) begin(ctx context.Context, op, paymentNo string) (context.Context, *call) {
	ctx, span := otel.Tracer("paykit/alipay").Start(ctx, op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("alipay.method", op), attribute.String("paykit.payment_no", paymentNo)))
	return ctx, &call{g: g, ctx: ctx, op: op, paymentNo: paymentNo, start: time.Now(), span: span}
}

// end logs the call at debug level with attrs, and ends its span, as an error if err is
// one (with Alipay's sub_code when it gave one).
func (c *call) end(err error, attrs ...any) {
	defer c.span.End()
	args := append([]any{"op", c.op, "payment_no", c.paymentNo, "duration", time.Since(c.start)}, attrs...)
	if err != nil {
		var ce *payment.ChannelError
		if errors.As(err, &ce) {
			args = append(args, "sub_code", ce.SubCode, "retryable", ce.Retryable)
			c.span.SetAttributes(attribute.String("alipay.sub_code", ce.SubCode), attribute.Bool("alipay.retryable", ce.Retryable))
		}
		c.span.SetStatus(codes.Error, err.Error())
		c.g.log.DebugContext(c.ctx, "alipay call failed", append(args, "err", err)...)
		return
	}
	c.g.log.DebugContext(c.ctx, "alipay call", args...)
}
