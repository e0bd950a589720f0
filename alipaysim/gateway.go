package alipaysim

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// bizContent is the decoded biz_content; numbers are kept as their literal text so
// amounts never pass through floating point.
type bizContent map[string]string

func parseBiz(s string) (bizContent, error) {
	biz := bizContent{}
	if s == "" {
		return biz, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("biz_content is not a JSON object: %w", err)
	}
	for k, v := range raw {
		switch x := v.(type) {
		case string:
			biz[k] = x
		case json.Number:
			biz[k] = x.String()
		case nil:
		default:
			b, _ := json.Marshal(x)
			biz[k] = string(b)
		}
	}
	return biz, nil
}

// apiFunc handles one gateway method for an authenticated app and returns the response object.
type apiFunc func(r *http.Request, a *app, biz bizContent, form url.Values) fields

func (s *Simulator) api(method string) apiFunc {
	switch method {
	case "alipay.trade.precreate":
		return s.apiPrecreate
	case "alipay.trade.query":
		return s.apiQuery
	case "alipay.trade.close":
		return s.apiClose
	case "alipay.trade.refund":
		return s.apiRefund
	case "alipay.trade.fastpay.refund.query":
		return s.apiRefundQuery
	case "alipay.data.dataservice.bill.downloadurl.query":
		return s.apiBillDownloadURL
	}
	return nil
}

func responseName(method string) string { return strings.ReplaceAll(method, ".", "_") + "_response" }

func success() fields { return fields{{"code", "10000"}, {"msg", "Success"}} }

func failure(code, msg, subCode, subMsg string) fields {
	return fields{{"code", code}, {"msg", msg}, {"sub_code", subCode}, {"sub_msg", subMsg}}
}

func bizFailure(subCode, subMsg string) fields {
	return failure("40004", "Business Failed", subCode, subMsg)
}

func invalidArgs(subCode, subMsg string) fields {
	return failure("40002", "Invalid Arguments", subCode, subMsg)
}

func missingArgs(subCode, subMsg string) fields {
	return failure("40001", "Missing Required Arguments", subCode, subMsg)
}

// serveGateway is POST (or GET) /gateway.do. Page and wap pay are browser navigations and
// get the cashier; every other method is a server call answered with signed JSON.
func (s *Simulator) serveGateway(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost && r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	form, dups, err := gatewayParams(r)
	if err != nil {
		http.Error(w, "malformed form", http.StatusBadRequest)
		return
	}
	if len(dups) > 0 {
		s.refuseDuplicates(w, form, dups)
		return
	}
	method := form.Get("method")
	switch method {
	case "alipay.trade.page.pay", "alipay.trade.wap.pay":
		s.openCashier(w, r, method, form)
		return
	case "":
		s.writeSigned(w, "error_response", missingArgs("isv.missing-method", "缺少方法名参数"))
		return
	}
	api := s.api(method)
	if api == nil {
		s.writeSigned(w, "error_response", invalidArgs("isv.invalid-method", "不存在的方法名: "+method))
		return
	}
	name := responseName(method)
	a, fail := s.authenticate(form)
	if fail != nil {
		s.log.Warn("gateway request rejected", "method", method, "app_id", form.Get("app_id"),
			"sub_code", fail.get("sub_code"))
		s.writeSigned(w, name, fail)
		return
	}
	biz, err := parseBiz(form.Get("biz_content"))
	if err != nil {
		s.writeSignedFor(w, a, name, invalidArgs("isv.invalid-parameter", err.Error()))
		return
	}
	s.countCall(method, biz["out_trade_no"])
	if s.overLimit(a.id) {
		s.log.Info("gateway call over the app's frequency limit", "method", method, "app_id", a.id)
		s.writeSignedFor(w, a, name, callLimited())
		return
	}
	fault, hasFault := s.takeGatewayFault(method)
	if hasFault && !fault.AfterProcessing {
		s.log.Info("gateway fault injected", "method", method, "mode", fault.Mode, "processed", false)
		s.applyFault(w, r, fault, name)
		return
	}
	resp := api(r, a, biz, form)
	s.log.Info("gateway call", "method", method, "app_id", a.id, "out_trade_no", biz["out_trade_no"],
		"code", resp.get("code"), "sub_code", resp.get("sub_code"))
	if hasFault {
		s.log.Info("gateway fault injected", "method", method, "mode", fault.Mode, "processed", true)
		s.applyFault(w, r, fault, name)
		return
	}
	s.writeSignedFor(w, a, name, resp)
}

// authenticate checks the common parameters and the request signature.
func (s *Simulator) authenticate(form url.Values) (*app, fields) {
	appID := form.Get("app_id")
	if appID == "" {
		return nil, missingArgs("isv.missing-app-id", "缺少AppID参数")
	}
	a := s.app(appID)
	if a == nil {
		return nil, invalidArgs("isv.invalid-app-id", "无效的AppID参数")
	}
	if fail := s.checkCertSNs(a, form); fail != nil {
		return nil, fail
	}
	if form.Get("sign") == "" {
		return nil, missingArgs("isv.missing-signature", "缺少签名参数")
	}
	if st := form.Get("sign_type"); st != "RSA2" {
		return nil, invalidArgs("isv.invalid-signature-type", "无效的签名类型: "+st)
	}
	if cs := form.Get("charset"); cs != "" && !strings.EqualFold(cs, "utf-8") {
		return nil, invalidArgs("isv.invalid-charset", "字符集不合法: "+cs)
	}
	if f := form.Get("format"); f != "" && !strings.EqualFold(f, "json") {
		return nil, invalidArgs("isv.invalid-format", "无效的数据格式: "+f)
	}
	if checked, err := verifyRequest(a.pub, form); err != nil {
		return nil, invalidArgs("isv.invalid-signature",
			"验签出错，建议检查签名字符串或签名私钥与应用公钥是否匹配，网关生成的验签字符串为："+checked)
	}
	if _, err := time.ParseInLocation(timeLayout, form.Get("timestamp"), s.loc); err != nil {
		return nil, invalidArgs("isv.invalid-timestamp", "非法的时间戳参数")
	}
	if v := form.Get("version"); v != "1.0" {
		return nil, invalidArgs("isv.invalid-version", "版本号不合法: "+v)
	}
	return a, nil
}

func (s *Simulator) writeSigned(w http.ResponseWriter, name string, obj fields) {
	s.writeSignedFor(w, nil, name, obj)
}

// writeSignedFor signs with the key of app a (nil: the simulator's own), and carries
// alipay_cert_sn when a is in certificate mode.
func (s *Simulator) writeSignedFor(w http.ResponseWriter, a *app, name string, obj fields) {
	body, err := signedBody(s.signingKey(a), name, obj, s.answerCertSN(a))
	if err != nil {
		s.log.Error("sign response", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	_, _ = w.Write(body)
}

// baseURL is the simulator's externally visible URL for links it hands out.
func (s *Simulator) baseURL(r *http.Request) string {
	if s.cfg.PublicURL != "" {
		return strings.TrimRight(s.cfg.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// tradeParams are the validated parameters that create a trade.
type tradeParams struct {
	outTradeNo string
	total      int64
	subject    string
	expireAt   time.Time
}

func (s *Simulator) parseTradeParams(biz bizContent, now time.Time) (tradeParams, fields) {
	p := tradeParams{outTradeNo: biz["out_trade_no"], subject: biz["subject"]}
	if !validOutTradeNo(p.outTradeNo) {
		return p, bizFailure("ACQ.INVALID_PARAMETER", "参数无效: out_trade_no must be 1-64 of A-Z a-z 0-9 _")
	}
	total, err := parseTradeAmount(biz["total_amount"])
	if err != nil {
		return p, bizFailure("ACQ.INVALID_PARAMETER", "参数无效: total_amount: "+err.Error())
	}
	p.total = total
	if p.subject == "" || len(p.subject) > 256 {
		return p, bizFailure("ACQ.INVALID_PARAMETER", "参数无效: subject is required (max 256)")
	}
	exp, err := parseExpiry(biz, now, s.loc)
	if err != nil {
		return p, bizFailure("ACQ.INVALID_PARAMETER", "参数无效: "+err.Error())
	}
	p.expireAt = exp
	return p, nil
}

// reuseLocked decides whether a request for an existing out_trade_no may reuse it:
// only an unpaid trade with the same amount and subject can.
func reuseLocked(t *trade, p tradeParams) fields {
	switch {
	case t.paid():
		return bizFailure("ACQ.TRADE_HAS_SUCCESS", "交易已被支付")
	case t.status == StatusClosed:
		return bizFailure("ACQ.TRADE_HAS_CLOSE", "交易已经关闭")
	case t.total != p.total || t.subject != p.subject:
		return bizFailure("ACQ.CONTEXT_INCONSISTENT", "交易信息被篡改")
	}
	return nil
}

func (s *Simulator) apiPrecreate(r *http.Request, a *app, biz bizContent, form url.Values) fields {
	now := s.now()
	p, fail := s.parseTradeParams(biz, now)
	if fail != nil {
		return fail
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.trades[a.id][p.outTradeNo]
	if t != nil {
		s.expireLocked(t, now)
		if fail := reuseLocked(t, p); fail != nil {
			return fail
		}
		if t.qrCode == "" {
			t.qrCode = s.baseURL(r) + ControlPrefix + "/qr/" + t.tradeNo
		}
		return success().add("out_trade_no", t.outTradeNo).add("qr_code", t.qrCode)
	}
	if !now.Before(p.expireAt) {
		return bizFailure("ACQ.INVALID_PARAMETER", "参数无效: time_expire has already passed")
	}
	t = &trade{
		app:         a,
		outTradeNo:  p.outTradeNo,
		tradeNo:     s.nextTradeNoLocked(now),
		method:      "alipay.trade.precreate",
		productCode: biz["product_code"],
		subject:     p.subject,
		total:       p.total,
		status:      StatusWaitBuyerPay,
		notifyURL:   form.Get("notify_url"),
		createdAt:   now,
		expireAt:    p.expireAt,
	}
	t.qrCode = s.baseURL(r) + ControlPrefix + "/qr/" + t.tradeNo
	s.newTradeLocked(t)
	return success().add("out_trade_no", t.outTradeNo).add("qr_code", t.qrCode)
}

// lookupLocked finds the trade a query/close/refund names by out_trade_no or trade_no.
func (s *Simulator) lookupLocked(a *app, biz bizContent) (*trade, fields) {
	no, tn := biz["out_trade_no"], biz["trade_no"]
	var t *trade
	switch {
	case no != "":
		t = s.trades[a.id][no]
		if t != nil && tn != "" && t.tradeNo != tn {
			t = nil
		}
	case tn != "":
		t = s.byTradeNo[tn]
		if t != nil && t.app != a {
			t = nil
		}
	default:
		return nil, bizFailure("ACQ.INVALID_PARAMETER", "参数无效: out_trade_no or trade_no is required")
	}
	if t == nil {
		return nil, bizFailure("ACQ.TRADE_NOT_EXIST", "交易不存在").addIf("out_trade_no", no).addIf("trade_no", tn)
	}
	return t, nil
}

func maskedLogon(buyerID string) string {
	if buyerID == "" {
		return ""
	}
	return "sim***@sandbox.test"
}

func (s *Simulator) apiQuery(_ *http.Request, a *app, biz bizContent, _ url.Values) fields {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, fail := s.lookupLocked(a, biz)
	if fail != nil {
		return fail
	}
	s.expireLocked(t, s.now())
	paidAmount := "0.00"
	if !t.paidAt.IsZero() {
		paidAmount = formatYuan(t.receipt()) // what the buyer paid and the merchant received
	}
	resp := success().
		addIf("buyer_logon_id", maskedLogon(t.buyerID)).
		add("buyer_pay_amount", paidAmount).
		addIf("buyer_user_id", t.buyerID).
		add("invoice_amount", paidAmount).
		add("out_trade_no", t.outTradeNo).
		add("point_amount", "0.00").
		add("receipt_amount", paidAmount)
	if !t.paidAt.IsZero() {
		resp = resp.add("send_pay_date", t.paidAt.In(s.loc).Format(timeLayout))
	}
	return resp.
		add("subject", t.subject).
		add("total_amount", formatYuan(t.total)).
		add("trade_no", t.tradeNo).
		add("trade_status", t.status)
}

func (s *Simulator) apiClose(_ *http.Request, a *app, biz bizContent, _ url.Values) fields {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, fail := s.lookupLocked(a, biz)
	if fail != nil {
		return fail
	}
	now := s.now()
	s.expireLocked(t, now)
	if buyer, armed := s.payOnClose[t.outTradeNo]; armed {
		delete(s.payOnClose, t.outTradeNo)
		if t.status == StatusWaitBuyerPay {
			s.log.Info("pay_on_close race: buyer pays just before the close", "out_trade_no", t.outTradeNo)
			_ = s.payLocked(t, buyer, now) // cannot fail: the trade is WAIT_BUYER_PAY
		}
	}
	if t.status != StatusWaitBuyerPay {
		return bizFailure("ACQ.TRADE_STATUS_ERROR", "交易状态不合法")
	}
	s.closeLocked(t, now, CloseReasonAPI)
	return success().add("out_trade_no", t.outTradeNo).add("trade_no", t.tradeNo)
}

func (s *Simulator) apiRefund(_ *http.Request, a *app, biz bizContent, _ url.Values) fields {
	amount, err := parseTradeAmount(biz["refund_amount"])
	if err != nil {
		return bizFailure("ACQ.INVALID_PARAMETER", "参数无效: refund_amount: "+err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, fail := s.lookupLocked(a, biz)
	if fail != nil {
		return fail
	}
	now := s.now()
	s.expireLocked(t, now)
	reqNo := biz["out_request_no"]
	if reqNo == "" {
		reqNo = t.outTradeNo // Alipay's default: a full refund keyed by the trade itself
	}
	if r := t.refunds[reqNo]; r != nil {
		if r.amount != amount {
			return bizFailure("ACQ.INVALID_PARAMETER", "参数无效: out_request_no "+reqNo+" was used with refund_amount "+formatYuan(r.amount))
		}
		r.replays++
		return s.refundResponse(t, r, "N")
	}
	switch t.status {
	case StatusWaitBuyerPay:
		return bizFailure("ACQ.TRADE_STATUS_ERROR", "交易状态不合法")
	case StatusClosed:
		return bizFailure("ACQ.TRADE_HAS_CLOSE", "交易已经关闭")
	case StatusFinished:
		return bizFailure("ACQ.TRADE_HAS_FINISHED", "交易已完结")
	}
	if t.refunded+t.processing+amount > t.total {
		return bizFailure("ACQ.REFUND_AMT_NOT_EQUAL_TOTAL", "退款金额超限")
	}
	r := &refund{t: t, outRequestNo: reqNo, amount: amount, reason: biz["refund_reason"], createdAt: now, state: RefundSucceeded}
	t.refunds[reqNo] = r
	s.refunds = append(s.refunds, r)
	if f := &s.refundFaults; f.ProcessingNext > 0 {
		// Accepted but not carried out yet: no money moves in this call.
		f.ProcessingNext--
		r.state = RefundProcessing
		t.processing += amount
		s.log.Info("refund processing", "app_id", a.id, "out_trade_no", t.outTradeNo, "out_request_no", reqNo,
			"refund_amount", formatYuan(amount), "settle_ms", f.SettleMS, "fail", f.Fail)
		fail, gen := f.Fail, s.gen
		time.AfterFunc(time.Duration(f.SettleMS)*time.Millisecond, func() { s.settleRefund(r, fail, gen) })
		return s.refundResponse(t, r, "N")
	}
	s.refundLocked(a, t, r)
	return s.refundResponse(t, r, "Y")
}

// refundLocked moves the money of refund r: the trade's refunded total, its close when
// fully refunded, the query's view of it and the refund notification.
func (s *Simulator) refundLocked(a *app, t *trade, r *refund) {
	now := s.now()
	r.state = RefundSucceeded
	r.refundedAt = now
	r.visibleAt = time.Now().Add(time.Duration(s.refundFaults.QueryLagMS) * time.Millisecond)
	t.refunded += r.amount
	// Its share of the merchant-funded parts: as much of them as the share of the total
	// refunded so far, less what earlier refunds gave back, so the last refund settles
	// the rounding.
	r.discount = fundedShare(t.discount, t.refunded, t.total) - t.discountBack
	r.redPacket = fundedShare(t.redPacket, t.refunded, t.total) - t.redPacketBack
	t.discountBack += r.discount
	t.redPacketBack += r.redPacket
	if t.refunded == t.total {
		t.status = StatusClosed
		t.closedAt = now
		t.closeReason = CloseReasonRefunded
	}
	s.log.Info("refund", "app_id", a.id, "out_trade_no", t.outTradeNo, "out_request_no", r.outRequestNo,
		"refund_amount", formatYuan(r.amount), "refunded_total", formatYuan(t.refunded), "trade_status", t.status)
	if !s.cfg.PaymentNotificationsOnly {
		s.notifyLocked(t, notifyRefund, r)
	}
}

// fundedShare is part × refunded / total rounded down, without overflow for any trade
// amount (refunded and part never exceed total).
func fundedShare(part, refunded, total int64) int64 {
	hi, lo := bits.Mul64(uint64(part), uint64(refunded))
	q, _ := bits.Div64(hi, lo, uint64(total))
	return int64(q)
}

// settleRefund ends a processing refund: it succeeds, or fails and is forgotten (a later
// request with its out_request_no is a new refund). A Reset since it began cancels it.
func (s *Simulator) settleRefund(r *refund, fail bool, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen || r.state != RefundProcessing {
		return
	}
	t := r.t
	t.processing -= r.amount
	if fail {
		r.state = RefundFailed
		delete(t.refunds, r.outRequestNo)
		s.log.Info("refund failed", "app_id", t.app.id, "out_trade_no", t.outTradeNo, "out_request_no", r.outRequestNo)
		return
	}
	s.refundLocked(t.app, t, r)
}

func (s *Simulator) refundResponse(t *trade, r *refund, fundChange string) fields {
	at := r.refundedAt // when the money moved; a refund still processing has not
	if at.IsZero() {
		at = r.createdAt
	}
	return success().
		addIf("buyer_logon_id", maskedLogon(t.buyerID)).
		addIf("buyer_user_id", t.buyerID).
		add("fund_change", fundChange).
		add("gmt_refund_pay", at.In(s.loc).Format(timeLayout)).
		add("out_trade_no", t.outTradeNo).
		add("refund_fee", formatYuan(t.refunded)).
		add("send_back_fee", formatYuan(r.amount)).
		add("trade_no", t.tradeNo)
}

func (s *Simulator) apiRefundQuery(_ *http.Request, a *app, biz bizContent, _ url.Values) fields {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, fail := s.lookupLocked(a, biz)
	if fail != nil {
		return fail
	}
	reqNo := biz["out_request_no"]
	if reqNo == "" {
		reqNo = t.outTradeNo
	}
	r := t.refunds[reqNo]
	if r == nil || r.state != RefundSucceeded || time.Now().Before(r.visibleAt) {
		// Alipay answers success without refund_status when it has no such refund, while
		// the refund is processing, and (its query lagging) for a while after it succeeded.
		return success().add("out_request_no", reqNo).add("out_trade_no", t.outTradeNo).add("trade_no", t.tradeNo)
	}
	return success().
		add("gmt_refund_pay", r.refundedAt.In(s.loc).Format(timeLayout)).
		add("out_request_no", r.outRequestNo).
		add("out_trade_no", t.outTradeNo).
		add("refund_amount", formatYuan(r.amount)).
		add("refund_status", "REFUND_SUCCESS").
		add("total_amount", formatYuan(t.total)).
		add("trade_no", t.tradeNo)
}
