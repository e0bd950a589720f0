package alipaysim

import (
	"html/template"
	"net/http"
	"net/url"
	"strings"
)

const pagesHTML = `
{{define "head"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}} · Alipay simulator</title>
<style>body{font-family:sans-serif;max-width:32rem;margin:3rem auto;color:#222}
.box{border:1px solid #ccc;border-radius:8px;padding:1.5rem}
.amount{font-size:2rem;font-weight:bold;color:#1677ff}
dt{color:#666;margin-top:.5rem}dd{margin:0}
button{background:#1677ff;color:#fff;border:0;border-radius:4px;padding:.7rem 2rem;font-size:1rem;cursor:pointer}
.err{color:#b00}</style></head><body><div class="box">{{end}}

{{define "cashier"}}{{template "head" .}}
<h1>Alipay cashier (simulator)</h1>
<p class="amount" id="amount">¥ {{.Trade.TotalAmount}}</p>
<dl>
<dt>Subject</dt><dd id="subject">{{.Trade.Subject}}</dd>
<dt>Merchant order (out_trade_no)</dt><dd id="out_trade_no">{{.Trade.OutTradeNo}}</dd>
<dt>Alipay trade (trade_no)</dt><dd id="trade_no">{{.Trade.TradeNo}}</dd>
<dt>Pay before</dt><dd id="expire_at">{{.ExpireAt}}</dd>
</dl>
<form method="post" action="{{.PayAction}}">
<input type="hidden" name="trade_no" value="{{.Trade.TradeNo}}">
<p><label>Buyer ID <input name="buyer_id" value="{{.BuyerID}}"></label></p>
<button type="submit" id="pay">Pay</button>
</form>
{{if .Trade.QuitURL}}<p><a id="quit" href="{{.Trade.QuitURL}}">Back to the merchant</a></p>{{end}}
</div></body></html>{{end}}

{{define "result"}}{{template "head" .}}
<h1 class="{{if .Error}}err{{end}}">{{.Title}}</h1>
{{if .Code}}<p>code: <code id="code">{{.Code}}</code> sub_code: <code id="sub_code">{{.SubCode}}</code></p>{{end}}
<p id="message">{{.Message}}</p>
{{if .Trade.TradeNo}}<dl>
<dt>out_trade_no</dt><dd>{{.Trade.OutTradeNo}}</dd>
<dt>trade_no</dt><dd>{{.Trade.TradeNo}}</dd>
<dt>trade_status</dt><dd id="trade_status">{{.Trade.TradeStatus}}</dd>
<dt>total_amount</dt><dd>{{.Trade.TotalAmount}}</dd>
</dl>{{end}}
</div></body></html>{{end}}
`

func parsePages() (*template.Template, error) {
	return template.New("pages").Parse(pagesHTML)
}

type pageData struct {
	Title     string
	Trade     Trade
	ExpireAt  string
	PayAction string
	BuyerID   string
	Error     bool
	Code      string
	SubCode   string
	Message   string
}

func (s *Simulator) render(w http.ResponseWriter, status int, name string, d pageData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := s.pages.ExecuteTemplate(w, name, d); err != nil {
		s.log.Error("render page", "page", name, "err", err)
	}
}

func (s *Simulator) renderFailure(w http.ResponseWriter, status int, f fields, t Trade) {
	s.render(w, status, "result", pageData{
		Title: "Cannot pay", Error: true, Trade: t,
		Code: f.get("code"), SubCode: f.get("sub_code"), Message: f.get("sub_msg"),
	})
}

func (s *Simulator) renderCashier(w http.ResponseWriter, t Trade) {
	exp := "-"
	if !t.ExpireAt.IsZero() {
		exp = t.ExpireAt.In(s.loc).Format(timeLayout) + " (China time)"
	}
	s.render(w, http.StatusOK, "cashier", pageData{
		Title: "Pay " + t.TotalAmount, Trade: t, ExpireAt: exp,
		PayAction: ControlPrefix + "/cashier/pay", BuyerID: DefaultBuyerID,
	})
}

// failureStatus picks the HTTP status of a cashier error page: 410 for a closed or
// expired trade, 409 for other state conflicts, 400 for bad requests.
func failureStatus(f fields) int {
	switch f.get("sub_code") {
	case "ACQ.TRADE_HAS_CLOSE":
		return http.StatusGone
	case "ACQ.TRADE_HAS_SUCCESS", "ACQ.CONTEXT_INCONSISTENT", "ACQ.TRADE_STATUS_ERROR":
		return http.StatusConflict
	}
	return http.StatusBadRequest
}

// openCashier is the buyer's browser opening a page-pay (or wap-pay) URL. The trade is
// created now, not when the merchant built the URL; a URL opened after time_expire
// cannot create a payable trade.
func (s *Simulator) openCashier(w http.ResponseWriter, r *http.Request, method string, form url.Values) {
	a, fail := s.authenticate(form)
	if fail != nil {
		s.log.Warn("cashier request rejected", "method", method, "app_id", form.Get("app_id"), "sub_code", fail.get("sub_code"))
		s.renderFailure(w, http.StatusBadRequest, fail, Trade{})
		return
	}
	biz, err := parseBiz(form.Get("biz_content"))
	if err != nil {
		s.renderFailure(w, http.StatusBadRequest, invalidArgs("isv.invalid-parameter", err.Error()), Trade{})
		return
	}
	now := s.now()
	p, fail := s.parseTradeParams(biz, now)
	if fail != nil {
		s.renderFailure(w, http.StatusBadRequest, fail, Trade{})
		return
	}
	s.mu.Lock()
	t := s.trades[a.id][p.outTradeNo]
	if t != nil {
		s.expireLocked(t, now)
		if fail := reuseLocked(t, p); fail != nil {
			snap := t.snapshot()
			s.mu.Unlock()
			s.renderFailure(w, failureStatus(fail), fail, snap)
			return
		}
	} else {
		if !now.Before(p.expireAt) {
			s.mu.Unlock()
			s.log.Info("cashier opened after time_expire", "app_id", a.id, "out_trade_no", p.outTradeNo)
			s.renderFailure(w, http.StatusGone, bizFailure("ACQ.TRADE_HAS_CLOSE", "交易已过期 (time_expire has passed)"), Trade{})
			return
		}
		t = &trade{
			app:         a,
			outTradeNo:  p.outTradeNo,
			tradeNo:     s.nextTradeNoLocked(now),
			method:      method,
			productCode: biz["product_code"],
			subject:     p.subject,
			total:       p.total,
			status:      StatusWaitBuyerPay,
			notifyURL:   form.Get("notify_url"),
			returnURL:   form.Get("return_url"),
			createdAt:   now,
			quitURL:     quitURLOf(method, biz),
			expireAt:    p.expireAt,
		}
		s.newTradeLocked(t)
	}
	snap := t.snapshot()
	s.mu.Unlock()
	s.renderCashier(w, snap)
}

// quitURLOf is the wap cashier's way back for a buyer who gives up: quit_url in
// biz_content. Page pay has none.
func quitURLOf(method string, biz bizContent) string {
	if method != "alipay.trade.wap.pay" {
		return ""
	}
	return biz["quit_url"]
}

// serveQR is the buyer scanning a precreate qr_code: the same cashier, for an existing trade.
func (s *Simulator) serveQR(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	t := s.byTradeNo[r.PathValue("trade_no")]
	if t == nil {
		s.mu.Unlock()
		s.renderFailure(w, http.StatusNotFound, bizFailure("ACQ.TRADE_NOT_EXIST", "交易不存在"), Trade{})
		return
	}
	s.expireLocked(t, s.now())
	snap := t.snapshot()
	s.mu.Unlock()
	if snap.TradeStatus != StatusWaitBuyerPay {
		s.renderFailure(w, statusPageCode(snap.TradeStatus), statusFailure(snap.TradeStatus), snap)
		return
	}
	s.renderCashier(w, snap)
}

func statusFailure(status string) fields {
	if status == StatusClosed {
		return bizFailure("ACQ.TRADE_HAS_CLOSE", "交易已经关闭")
	}
	return bizFailure("ACQ.TRADE_HAS_SUCCESS", "交易已被支付")
}

func statusPageCode(status string) int {
	if status == StatusClosed {
		return http.StatusGone
	}
	return http.StatusConflict
}

// serveCashierPay is the cashier's Pay button. On success the buyer is redirected to the
// merchant's return_url with Alipay's signed synchronous return parameters, if one was given.
func (s *Simulator) serveCashierPay(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "malformed form", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	t := s.byTradeNo[r.PostForm.Get("trade_no")]
	if t == nil {
		s.mu.Unlock()
		s.renderFailure(w, http.StatusNotFound, bizFailure("ACQ.TRADE_NOT_EXIST", "交易不存在"), Trade{})
		return
	}
	err := s.payLocked(t, strings.TrimSpace(r.PostForm.Get("buyer_id")), s.now())
	snap := t.snapshot()
	var ret url.Values
	if err == nil && t.returnURL != "" {
		ret = s.returnParamsLocked(t)
	}
	s.mu.Unlock()
	if err != nil {
		s.renderFailure(w, statusPageCode(snap.TradeStatus), statusFailure(snap.TradeStatus), snap)
		return
	}
	if ret != nil {
		sep := "?"
		if strings.Contains(snap.ReturnURL, "?") {
			sep = "&"
		}
		http.Redirect(w, r, snap.ReturnURL+sep+ret.Encode(), http.StatusSeeOther)
		return
	}
	s.render(w, http.StatusOK, "result", pageData{Title: "Payment successful", Trade: snap, Message: "The merchant will be notified."})
}

// returnParamsLocked builds the signed parameters Alipay appends to return_url.
func (s *Simulator) returnParamsLocked(t *trade) url.Values {
	v := url.Values{}
	v.Set("charset", "utf-8")
	v.Set("out_trade_no", t.outTradeNo)
	v.Set("method", t.method+".return")
	v.Set("total_amount", formatYuan(t.total))
	v.Set("trade_no", t.tradeNo)
	v.Set("auth_app_id", t.app.id)
	v.Set("version", "1.0")
	v.Set("app_id", t.app.id)
	v.Set("seller_id", t.app.sellerID)
	v.Set("timestamp", s.now().Format(timeLayout))
	if err := signNotification(s.signingKey(t.app), v); err != nil {
		s.log.Error("sign return parameters", "err", err)
	}
	return v
}
