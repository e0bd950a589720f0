package wechatpaysim

import (
	"net/http"
	"time"
)

func orderNotExist() *apiError {
	return refuse(http.StatusNotFound, "ORDER_NOT_EXIST", "订单不存在")
}

// checkQueryMchID: the query's mchid must be present, a merchant, and the one that signed.
func (s *Simulator) checkQueryMchID(c *call) *apiError {
	mchid := c.r.URL.Query().Get("mchid")
	switch {
	case mchid == "":
		return paramError("mchid", "", "必填字段缺失", "query")
	case s.merchant(mchid) == nil:
		return mchNotExists()
	case mchid != c.m.id:
		return refuse(http.StatusBadRequest, "INVALID_REQUEST", "mchid与请求签名使用的商户号不一致")
	}
	return nil
}

// handleQueryByOutTradeNo is GET /v3/pay/transactions/out-trade-no/{out_trade_no}?mchid=.
func (s *Simulator) handleQueryByOutTradeNo(c *call) (answer, *apiError) {
	if e := s.checkQueryMchID(c); e != nil {
		return answer{}, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.orders[c.m.id][c.r.PathValue("out_trade_no")]
	if o == nil {
		return answer{}, orderNotExist()
	}
	s.expireLocked(o, s.now())
	return jsonAnswer(s.transactionLocked(o)), nil
}

// handleQueryByTransactionID is GET /v3/pay/transactions/id/{transaction_id}?mchid=;
// an order has a transaction_id only once paid.
func (s *Simulator) handleQueryByTransactionID(c *call) (answer, *apiError) {
	if e := s.checkQueryMchID(c); e != nil {
		return answer{}, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.byTxID[c.r.PathValue("transaction_id")]
	if o == nil || o.m != c.m {
		return answer{}, orderNotExist()
	}
	return jsonAnswer(s.transactionLocked(o)), nil
}

// transactionLocked is the Transaction object of the query answer and the payment
// notification. An unpaid order has no transaction_id, trade_type, payer, bank_type or
// success_time, as WeChat Pay answers.
func (s *Simulator) transactionLocked(o *order) map[string]any {
	t := map[string]any{
		"appid": o.appID, "mchid": o.m.id, "out_trade_no": o.outTradeNo,
		"trade_state": o.state, "trade_state_desc": stateDesc[o.state],
		"amount":           map[string]any{"total": o.total, "payer_currency": "CNY"},
		"scene_info":       map[string]any{"device_id": o.deviceID},
		"promotion_detail": []any{},
	}
	if o.attach != "" {
		t["attach"] = o.attach
	}
	if o.transactionID == "" {
		return t
	}
	t["transaction_id"] = o.transactionID
	t["trade_type"] = o.tradeType
	if !o.paid() {
		return t
	}
	t["bank_type"] = o.bankType
	t["success_time"] = o.paidAt.In(s.loc).Format(time.RFC3339)
	t["payer"] = map[string]any{"openid": o.payerOpenID}
	t["amount"] = map[string]any{"total": o.total, "payer_total": o.total - o.discount, "currency": "CNY", "payer_currency": "CNY"}
	if o.discount > 0 {
		t["promotion_detail"] = []any{map[string]any{
			"coupon_id": "1" + randomDigits(10), "name": "商户立减", "scope": "GLOBAL", "type": "CASH",
			"amount": o.discount, "stock_id": "8" + randomDigits(7), "wechatpay_contribute": 0,
			"merchant_contribute": o.discount, "other_contribute": 0, "currency": "CNY",
		}}
	}
	return t
}

// handleClose is POST /v3/pay/transactions/out-trade-no/{out_trade_no}/close with body
// {"mchid"}: 204 for an unpaid order; a paid or closed one as Config.ClosePaid and
// Config.CloseClosed say.
func (s *Simulator) handleClose(c *call) (answer, *apiError) {
	var body struct {
		MchID string `json:"mchid"`
	}
	if e := decodeJSON(c.body, &body); e != nil {
		return answer{}, e
	}
	if e := s.checkBodyMchID(c, body.MchID); e != nil {
		return answer{}, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.orders[c.m.id][c.r.PathValue("out_trade_no")]
	if o == nil {
		return answer{}, orderNotExist()
	}
	now := s.now()
	s.expireLocked(o, now)
	switch {
	case o.paid():
		return s.closePaid()
	case o.state == StateClosed:
		if s.cfg.CloseClosed == CloseClosedOrderClosed {
			return answer{}, refuse(http.StatusBadRequest, "ORDER_CLOSED", "订单已关闭")
		}
		return noContent(), nil
	}
	o.state, o.closedAt, o.closeReason = StateClosed, now, "closed"
	s.log.Info("order closed", "mchid", o.m.id, "out_trade_no", o.outTradeNo)
	return noContent(), nil
}

func (s *Simulator) closePaid() (answer, *apiError) {
	switch s.cfg.ClosePaid {
	case ClosePaidTradeError:
		return answer{}, refuse(http.StatusForbidden, "TRADE_ERROR", "订单已支付，不能关闭")
	case ClosePaidNoContent:
		return noContent(), nil
	}
	return answer{}, refuse(http.StatusBadRequest, "ORDERPAID", "订单已支付")
}
