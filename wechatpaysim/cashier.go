package wechatpaysim

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
)

const pagesHTML = `
{{define "head"}}<!doctype html>
<html lang="zh-CN"><head><meta charset="utf-8"><title>{{.Title}} · WeChat Pay simulator</title>
<style>body{font-family:sans-serif;max-width:32rem;margin:3rem auto;color:#222}
.box{border:1px solid #ccc;border-radius:8px;padding:1.5rem}
.amount{font-size:2rem;font-weight:bold;color:#07c160}
dt{color:#666;margin-top:.5rem}dd{margin:0}label{display:block;margin:.4rem 0}
button{background:#07c160;color:#fff;border:0;border-radius:4px;padding:.7rem 2rem;font-size:1rem;cursor:pointer}
.err{color:#b00}</style></head><body><div class="box">{{end}}

{{define "cashier"}}{{template "head" .}}
<h1>WeChat Pay cashier (simulator)</h1>
<p class="amount" id="amount">¥ {{.Yuan}}</p>
<dl>
<dt>Description</dt><dd id="description">{{.Order.Description}}</dd>
<dt>Merchant (mchid)</dt><dd id="mchid">{{.Order.MchID}}</dd>
<dt>Merchant order (out_trade_no)</dt><dd id="out_trade_no">{{.Order.OutTradeNo}}</dd>
<dt>Trade type</dt><dd id="trade_type">{{.Order.TradeType}}</dd>
<dt>Pay before</dt><dd id="expire_at">{{.ExpireAt}}</dd>
</dl>
<form method="post" action="{{.Action}}">
{{range $k, $v := .Hidden}}<input type="hidden" name="{{$k}}" value="{{$v}}">
{{end}}{{range .Fields}}<label>{{.}} <input name="{{.}}" id="f_{{.}}"></label>
{{end}}<label>Payer openid <input name="openid" value="{{.OpenID}}"></label>
<button type="submit" id="pay">Pay</button>
</form>
</div></body></html>{{end}}

{{define "result"}}{{template "head" .}}
<h1 class="{{if .Error}}err{{end}}" id="title">{{.Title}}</h1>
<p id="message">{{.Message}}</p>
{{if .Order.OutTradeNo}}<dl>
<dt>out_trade_no</dt><dd>{{.Order.OutTradeNo}}</dd>
<dt>transaction_id</dt><dd id="transaction_id">{{.Order.TransactionID}}</dd>
<dt>trade_state</dt><dd id="trade_state">{{.Order.TradeState}}</dd>
</dl>{{end}}
</div></body></html>{{end}}
`

func parsePages() (*template.Template, error) {
	return template.New("pages").Parse(pagesHTML)
}

type pageData struct {
	Title    string
	Order    Order
	Yuan     string
	ExpireAt string
	Action   string
	Hidden   map[string]string
	Fields   []string
	OpenID   string
	Error    bool
	Message  string
}

func (s *Simulator) render(w http.ResponseWriter, status int, name string, d pageData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := s.pages.ExecuteTemplate(w, name, d); err != nil {
		s.log.Error("render page", "page", name, "err", err)
	}
}

// errCashier is a refusal of the cashier: the link is stale or the call is not genuine.
type errCashier struct {
	status int
	msg    string
}

func (e *errCashier) Error() string { return e.msg }

func cashierRefusal(status int, msg string) error { return &errCashier{status: status, msg: msg} }

// prepaidLocked finds the order a buyer's prepay_id (or code_url pr) stands for; only the
// current one, within its validity, opens the cashier.
func (s *Simulator) prepaidLocked(prepayID, pr string) (*order, error) {
	o, ttl := s.byPrepayID[prepayID], prepayTTL
	if pr != "" {
		o = s.byCodePR[pr]
	}
	switch {
	case o == nil:
		return nil, cashierRefusal(http.StatusNotFound, "unknown prepay_id or code_url")
	case pr == "" && o.prepayID != prepayID, pr != "" && o.codePR != pr:
		return nil, cashierRefusal(http.StatusGone, "this payment link was replaced by a newer one")
	case o.tradeType == TradeTypeH5:
		ttl = h5TTL
	}
	now := s.now()
	if now.Sub(o.prepayAt) >= ttl {
		return nil, cashierRefusal(http.StatusGone, "this payment link has expired")
	}
	s.expireLocked(o, now)
	if o.state != StateNotPay {
		return o, cashierRefusal(http.StatusConflict, "order is "+o.state)
	}
	return o, nil
}

// serveCashierPage is the buyer opening a code_url (scanned), an h5_url, or the JSAPI or
// App cashier for a prepay_id.
func (s *Simulator) serveCashierPage(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		s.mu.Lock()
		o, err := s.prepaidLocked(q.Get("prepay_id"), q.Get("pr"))
		var v Order
		if o != nil {
			v = o.view(s.cfg.PublicURL)
		}
		s.mu.Unlock()
		if err != nil {
			s.renderRefusal(w, err, v)
			return
		}
		d := pageData{
			Title: "Pay " + yuan(v.Total), Order: v, Yuan: yuan(v.Total),
			ExpireAt: v.ExpireAt.In(s.loc).Format("2006-01-02 15:04:05") + " (China time)",
			Action:   ControlPrefix + "/cashier/pay", Hidden: map[string]string{"prepay_id": v.PrepayID},
			OpenID: DefaultOpenID,
		}
		if kind == TradeTypeH5 {
			// The merchant appends redirect_url to h5_url: WeChat Pay brings the buyer
			// back to it after the payment (which the merchant must still confirm).
			if ru := q.Get("redirect_url"); ru != "" {
				d.Hidden["redirect_url"] = ru
			}
		}
		switch kind {
		case TradeTypeJSAPI:
			d.Action, d.Hidden, d.OpenID = ControlPrefix+"/cashier/jsapi", nil, v.OpenID
			d.Fields = []string{"appId", "timeStamp", "nonceStr", "package", "signType", "paySign"}
		case TradeTypeApp:
			d.Action, d.Hidden = ControlPrefix+"/cashier/app", nil
			d.Fields = []string{"appid", "partnerid", "prepayid", "package", "noncestr", "timestamp", "sign"}
		}
		s.render(w, http.StatusOK, "cashier", d)
	}
}

func (s *Simulator) renderRefusal(w http.ResponseWriter, err error, v Order) {
	status := http.StatusBadRequest
	var ce *errCashier
	if errors.As(err, &ce) {
		status = ce.status
	}
	s.render(w, status, "result", pageData{Title: "Cannot pay", Error: true, Message: err.Error(), Order: v})
}

// serveCashierPay is the Pay button of a Native or H5 cashier (form: prepay_id, openid).
func (s *Simulator) serveCashierPay(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		s.renderRefusal(w, err, Order{})
		return
	}
	s.mu.Lock()
	o, err := s.prepaidLocked(r.PostForm.Get("prepay_id"), "")
	if err == nil && (o.tradeType == TradeTypeJSAPI || o.tradeType == TradeTypeApp) {
		err = cashierRefusal(http.StatusBadRequest, "a JSAPI or App order is paid through its signed payment call")
	}
	if err == nil {
		err = s.payLocked(o, PayOptions{OpenID: r.PostForm.Get("openid")})
	}
	var v Order
	if o != nil {
		v = o.view(s.cfg.PublicURL)
	}
	s.mu.Unlock()
	if err != nil {
		s.renderRefusal(w, err, v)
		return
	}
	if ru := r.PostForm.Get("redirect_url"); v.TradeType == TradeTypeH5 && isWebURL(ru) {
		http.Redirect(w, r, ru, http.StatusSeeOther)
		return
	}
	s.render(w, http.StatusOK, "result", pageData{Title: "支付成功", Message: "Paid " + yuan(v.Total), Order: v})
}

// isWebURL reports whether raw is an absolute http or https URL, the only kind an H5
// cashier sends the buyer back to.
func isWebURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// payCall reads a client-side payment call (JSON or form) with its keys lower-cased, so
// that gopay's (noncestr, partnerid) and wechatpay-go's (nonceStr, partnerId) spellings
// both work.
func payCall(r *http.Request) (map[string]string, bool, error) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	out := map[string]string{}
	if ct == "application/json" {
		var raw map[string]any
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&raw); err != nil {
			return nil, false, cashierRefusal(http.StatusBadRequest, "body is not JSON: "+err.Error())
		}
		for k, v := range raw {
			if str, ok := v.(string); ok {
				out[strings.ToLower(k)] = str
			}
		}
		return out, false, nil
	}
	if err := r.ParseForm(); err != nil {
		return nil, true, cashierRefusal(http.StatusBadRequest, err.Error())
	}
	for k := range r.PostForm {
		out[strings.ToLower(k)] = r.PostForm.Get(k)
	}
	return out, true, nil
}

// serveJSAPIPay is WeixinJSBridge's getBrandWCPayRequest: the merchant page's
// appId, timeStamp, nonceStr, package ("prepay_id=…"), signType ("RSA") and paySign,
// checked with the merchant's key before the buyer (openid) pays.
func (s *Simulator) serveJSAPIPay(w http.ResponseWriter, r *http.Request) {
	p, form, err := payCall(r)
	var v Order
	if err == nil {
		v, err = s.payWithCall(p, TradeTypeJSAPI, strings.TrimPrefix(p["package"], "prepay_id="), p["paysign"],
			paymentMessage(p["appid"], p["timestamp"], p["noncestr"], p["package"]), func(o *order) error {
				if !strings.HasPrefix(p["package"], "prepay_id=") || p["signtype"] != "RSA" {
					return cashierRefusal(http.StatusBadRequest, "package must be prepay_id=… and signType RSA")
				}
				return nil
			})
	}
	s.answerPayCall(w, form, v, err, map[string]any{"err_msg": "get_brand_wcpay_request:ok"},
		func(msg string) map[string]any {
			return map[string]any{"err_msg": "get_brand_wcpay_request:fail", "reason": msg}
		})
}

// serveAppPay is the WeChat app's payment call from the merchant's app: appid,
// partnerid (the mchid), prepayid, package ("Sign=WXPay"), noncestr, timestamp and sign.
func (s *Simulator) serveAppPay(w http.ResponseWriter, r *http.Request) {
	p, form, err := payCall(r)
	var v Order
	if err == nil {
		v, err = s.payWithCall(p, TradeTypeApp, p["prepayid"], p["sign"],
			paymentMessage(p["appid"], p["timestamp"], p["noncestr"], p["prepayid"]), func(o *order) error {
				if p["partnerid"] != o.m.id || p["package"] != "Sign=WXPay" {
					return cashierRefusal(http.StatusBadRequest, "partnerid must be the mchid and package Sign=WXPay")
				}
				return nil
			})
	}
	s.answerPayCall(w, form, v, err, map[string]any{"errCode": 0, "errStr": ""},
		func(msg string) map[string]any { return map[string]any{"errCode": -1, "errStr": msg} })
}

// payWithCall checks a signed payment call for order prepayID of tradeType and pays it.
func (s *Simulator) payWithCall(p map[string]string, tradeType, prepayID, sig string, msg []byte, extra func(*order) error) (Order, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, err := s.prepaidLocked(prepayID, "")
	if err != nil {
		return viewOf(o, s.cfg.PublicURL), err
	}
	if err := checkPayCall(o, tradeType, p, sig, msg); err != nil {
		return viewOf(o, s.cfg.PublicURL), err
	}
	if err := extra(o); err != nil {
		return viewOf(o, s.cfg.PublicURL), err
	}
	err = s.payLocked(o, PayOptions{OpenID: p["openid"]})
	return o.view(s.cfg.PublicURL), err
}

func checkPayCall(o *order, tradeType string, p map[string]string, sig string, msg []byte) error {
	if o.tradeType != tradeType {
		return cashierRefusal(http.StatusBadRequest, "the prepay_id is of a "+o.tradeType+" order, not "+tradeType)
	}
	if p["appid"] != o.appID {
		return cashierRefusal(http.StatusBadRequest, "appid is not the order's")
	}
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || verifyRSA(o.m.pub, msg, raw) != nil {
		return cashierRefusal(http.StatusUnauthorized, "支付验证签名失败")
	}
	return nil
}

func viewOf(o *order, base string) Order {
	if o == nil {
		return Order{}
	}
	return o.view(base)
}

func (s *Simulator) answerPayCall(w http.ResponseWriter, form bool, v Order, err error, ok map[string]any, fail func(string) map[string]any) {
	if form {
		if err != nil {
			s.renderRefusal(w, err, v)
			return
		}
		s.render(w, http.StatusOK, "result", pageData{Title: "支付成功", Message: "Paid " + yuan(v.Total), Order: v})
		return
	}
	if err != nil {
		status := http.StatusConflict
		var ce *errCashier
		if errors.As(err, &ce) {
			status = ce.status
		}
		writeJSON(w, status, fail(err.Error()))
		return
	}
	ok["order"] = v
	writeJSON(w, http.StatusOK, ok)
}

// yuan formats fen as yuan with two decimals.
func yuan(fen int64) string {
	sign := ""
	if fen < 0 {
		sign, fen = "-", -fen
	}
	return fmt.Sprintf("%s%d.%02d", sign, fen/100, fen%100)
}
