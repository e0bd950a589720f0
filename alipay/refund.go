package alipay

import (
	"context"
	"time"

	"github.com/paykit/paykit/payment"
	"github.com/smartwalle/alipay/v3"
)

// Refund refunds part or all of a paid trade. Alipay is idempotent on OutRequestNo: a
// replay answers fund_change "N" (FundChange false) and moves no money again. "N" also
// answers a refund Alipay accepted but has not carried out, so only the refund query
// confirms a FundChange=false answer (workflows.RefundWorkflow).
func (g *Gateway) Refund(ctx context.Context, req payment.RefundRequest) (payment.RefundResult, error) {
	if err := payment.ValidatePaymentNo(req.PaymentNo); err != nil {
		return payment.RefundResult{}, invalidRequest(opRefund, err)
	}
	if req.OutRequestNo == "" || len(req.OutRequestNo) > 64 {
		return payment.RefundResult{}, invalidRequest(opRefund, payment.Errorf(payment.EINVALID, "out_request_no must be 1-64 characters"))
	}
	if err := req.Amount.Validate(); err != nil {
		return payment.RefundResult{}, invalidRequest(opRefund, err)
	}
	ctx, call := g.begin(ctx, opRefund, req.PaymentNo)
	var rsp tradeRefundRsp
	err := g.client.Request(ctx, alipay.TradeRefund{
		OutTradeNo:   req.PaymentNo,
		RefundAmount: req.Amount.Yuan(),
		RefundReason: req.Reason,
		OutRequestNo: req.OutRequestNo,
	}, &rsp)
	res, err := refundResult(req, &rsp.TradeRefundRsp, rsp.GMTRefundPay, err, g.loc)
	call.end(err, "out_request_no", req.OutRequestNo, "fund_change", res.FundChange)
	return res, err
}

// tradeRefundRsp is smartwalle's answer of alipay.trade.refund with the field it leaves
// out: gmt_refund_pay, when the money moved, in China time.
type tradeRefundRsp struct {
	alipay.TradeRefundRsp
	GMTRefundPay string `json:"gmt_refund_pay"`
}

func refundResult(req payment.RefundRequest, rsp *alipay.TradeRefundRsp, gmtRefundPay string, err error, loc *time.Location) (payment.RefundResult, error) {
	if err != nil {
		return payment.RefundResult{}, callError(opRefund, err)
	}
	if !rsp.IsSuccess() {
		return payment.RefundResult{}, businessError(opRefund, rsp.Error, nil)
	}
	total, perr := payment.ParseYuan(rsp.RefundFee)
	if perr != nil {
		return payment.RefundResult{}, badAnswer(opRefund, "malformed refund_fee", perr)
	}
	if rsp.FundChange != "Y" && rsp.FundChange != "N" {
		return payment.RefundResult{}, badAnswer(opRefund, "unknown fund_change "+rsp.FundChange, nil)
	}
	res := payment.RefundResult{
		TradeNo:       rsp.TradeNo,
		FundChange:    rsp.FundChange == "Y",
		RefundAmount:  req.Amount,
		RefundedTotal: total,
	}
	if gmtRefundPay != "" {
		if res.RefundedAt, perr = time.ParseInLocation(timeLayout, gmtRefundPay, loc); perr != nil {
			return payment.RefundResult{}, badAnswer(opRefund, "malformed gmt_refund_pay", perr)
		}
	}
	return res, nil
}

// RefundStatus is the answer of alipay.trade.fastpay.refund.query. Alipay answers
// success without refund_status for an unknown request, so Found=false means "no money
// moved for it".
type RefundStatus = payment.RefundStatusAtChannel

// QueryRefund asks whether a refund request took effect, e.g. after a timeout. A trade
// Alipay does not know is Found=false with a nil error.
func (g *Gateway) QueryRefund(ctx context.Context, paymentNo, outRequestNo string) (RefundStatus, error) {
	if err := payment.ValidatePaymentNo(paymentNo); err != nil {
		return RefundStatus{}, invalidRequest(opRefundQuery, err)
	}
	ctx, call := g.begin(ctx, opRefundQuery, paymentNo)
	rsp, err := g.client.TradeFastPayRefundQuery(ctx, alipay.TradeFastPayRefundQuery{
		OutTradeNo:   paymentNo,
		OutRequestNo: outRequestNo,
	})
	st, err := refundQueryResult(paymentNo, outRequestNo, rsp, err, g.loc)
	call.end(err, "out_request_no", outRequestNo, "found", st.Found)
	return st, err
}

func refundQueryResult(paymentNo, outRequestNo string, rsp *alipay.TradeFastPayRefundQueryRsp, err error, loc *time.Location) (RefundStatus, error) {
	st := RefundStatus{PaymentNo: paymentNo, OutRequestNo: outRequestNo}
	if err != nil {
		return st, callError(opRefundQuery, err)
	}
	if !rsp.IsSuccess() {
		if subCode(rsp.Error) == SubCodeTradeNotExist {
			return st, nil
		}
		return st, businessError(opRefundQuery, rsp.Error, nil)
	}
	st.TradeNo = rsp.TradeNo
	if rsp.RefundStatus != "REFUND_SUCCESS" {
		return st, nil
	}
	st.Found = true
	var perr error
	if st.RefundAmount, perr = payment.ParseYuan(rsp.RefundAmount); perr != nil {
		return RefundStatus{}, badAnswer(opRefundQuery, "malformed refund_amount", perr)
	}
	if rsp.TotalAmount != "" {
		if st.TotalAmount, perr = payment.ParseYuan(rsp.TotalAmount); perr != nil {
			return RefundStatus{}, badAnswer(opRefundQuery, "malformed total_amount", perr)
		}
	}
	if rsp.GMTRefundPay != "" {
		if st.RefundedAt, perr = time.ParseInLocation(timeLayout, rsp.GMTRefundPay, loc); perr != nil {
			return RefundStatus{}, badAnswer(opRefundQuery, "malformed gmt_refund_pay", perr)
		}
	}
	return st, nil
}
