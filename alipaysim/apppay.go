package alipaysim

import (
	"net/http"
	"net/url"
	"strings"
)

// Alipay app pay as the buyer's Alipay app performs it: the merchant's app hands the
// order string of alipay.trade.app.pay to the Alipay app SDK, which submits it to
// Alipay; Alipay verifies the merchant's signature, creates the trade and the buyer pays.
const (
	appPayMethod  = "alipay.trade.app.pay"
	appPayProduct = "QUICK_MSECURITY_PAY"
	appPayResult  = "alipay_trade_app_pay_response"
	// Alipay app SDK resultStatus values.
	appResultPaid   = "9000"
	appResultFailed = "4000"
)

// AppPayResult is the answer of POST /_sim/app/pay: the Alipay app SDK's resultStatus
// and result (the signed alipay_trade_app_pay_response, as the SDK hands it to the
// merchant's app), and the trade if it was paid.
type AppPayResult struct {
	ResultStatus string `json:"result_status"`
	Result       string `json:"result"`
	Trade        *Trade `json:"trade,omitempty"`
}

// AppPay submits an app pay order string as the buyer's Alipay app would and pays the
// trade with buyerID (DefaultBuyerID if empty). The order string must be signed by the
// app it names; the trade is created now, or an unpaid one with the same out_trade_no,
// amount and subject is reused. On failure the result carries Alipay's signed error
// fields and the HTTP status the control API answers with.
func (s *Simulator) AppPay(orderString, buyerID string) (AppPayResult, int) {
	res, t, status := s.appPay(orderString, buyerID)
	var a *app
	if form, err := url.ParseQuery(strings.TrimSpace(orderString)); err == nil {
		a = s.app(form.Get("app_id"))
	}
	body, err := signedBody(s.signingKey(a), appPayResult, res, s.answerCertSN(a))
	if err != nil {
		s.log.Error("sign app pay result", "err", err)
		return AppPayResult{ResultStatus: appResultFailed}, http.StatusInternalServerError
	}
	out := AppPayResult{ResultStatus: appResultFailed, Result: string(body)}
	if t != nil {
		out.ResultStatus, out.Trade = appResultPaid, t
	}
	return out, status
}

func (s *Simulator) appPay(orderString, buyerID string) (fields, *Trade, int) {
	form, err := url.ParseQuery(strings.TrimSpace(orderString))
	if err != nil || len(form) == 0 {
		return invalidArgs("isv.invalid-parameter", "order_string is not a query string"), nil, http.StatusBadRequest
	}
	// As at the gateway: a parameter twice with different values is ambiguous (one of
	// them was signed, the other would be acted on), so it is refused; the same value
	// twice counts once.
	form, dups := collapseParams(form)
	if len(dups) > 0 {
		return invalidArgs("isv.invalid-parameter", "参数重复且取值不一致 (duplicate parameter "+strings.Join(dups, ", ")+" with different values)"), nil, http.StatusBadRequest
	}
	if m := form.Get("method"); m != appPayMethod {
		return invalidArgs("isv.invalid-method", "order_string method must be "+appPayMethod+", not "+m), nil, http.StatusBadRequest
	}
	a, fail := s.authenticate(form)
	if fail != nil {
		s.log.Warn("app pay order string rejected", "app_id", form.Get("app_id"), "sub_code", fail.get("sub_code"))
		return fail, nil, http.StatusBadRequest
	}
	biz, err := parseBiz(form.Get("biz_content"))
	if err != nil {
		return invalidArgs("isv.invalid-parameter", err.Error()), nil, http.StatusBadRequest
	}
	if pc := biz["product_code"]; pc != "" && pc != appPayProduct {
		return bizFailure("ACQ.INVALID_PARAMETER", "参数无效: product_code of app pay is "+appPayProduct), nil, http.StatusBadRequest
	}
	now := s.now()
	p, fail := s.parseTradeParams(biz, now)
	if fail != nil {
		return fail, nil, http.StatusBadRequest
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.trades[a.id][p.outTradeNo]
	if t != nil {
		s.expireLocked(t, now)
		if fail := reuseLocked(t, p); fail != nil {
			return fail, nil, failureStatus(fail)
		}
	} else {
		if !now.Before(p.expireAt) {
			return bizFailure("ACQ.TRADE_HAS_CLOSE", "交易已过期 (time_expire has passed)"), nil, http.StatusGone
		}
		t = &trade{
			app: a, outTradeNo: p.outTradeNo, tradeNo: s.nextTradeNoLocked(now), method: appPayMethod,
			productCode: biz["product_code"], subject: p.subject, total: p.total, status: StatusWaitBuyerPay,
			notifyURL: form.Get("notify_url"), createdAt: now, expireAt: p.expireAt,
		}
		s.newTradeLocked(t)
	}
	if err := s.payLocked(t, strings.TrimSpace(buyerID), now); err != nil {
		return statusFailure(t.status), nil, statusPageCode(t.status)
	}
	snap := t.snapshot()
	return success().add("app_id", a.id).add("auth_app_id", a.id).add("charset", "utf-8").
		add("timestamp", now.Format(timeLayout)).add("out_trade_no", t.outTradeNo).
		add("total_amount", formatYuan(t.total)).add("trade_no", t.tradeNo).add("seller_id", a.sellerID), &snap, http.StatusOK
}

func (s *Simulator) handleAppPay(w http.ResponseWriter, r *http.Request) {
	var body struct {
		OrderString string `json:"order_string"`
		BuyerID     string `json:"buyer_id"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	res, status := s.AppPay(body.OrderString, body.BuyerID)
	writeJSON(w, status, res)
}
