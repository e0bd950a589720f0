package wechatpaysim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"time"
	"unicode/utf8"
)

// Trade types (trade_type) and trade states (trade_state).
const (
	TradeTypeJSAPI  = "JSAPI"
	TradeTypeNative = "NATIVE"
	TradeTypeApp    = "APP"
	TradeTypeH5     = "MWEB"

	StateNotPay   = "NOTPAY"
	StateSuccess  = "SUCCESS"
	StateClosed   = "CLOSED"
	StateRefund   = "REFUND"
	StatePayError = "PAYERROR"
)

// Validity of what an order answer hands out: a prepay_id (and a code_url) lives 2 hours,
// an h5_url 5 minutes. A repeat after that gets a fresh one.
const (
	prepayTTL = 2 * time.Hour
	h5TTL     = 5 * time.Minute
)

var stateDesc = map[string]string{
	StateNotPay:   "订单未支付",
	StateSuccess:  "支付成功",
	StateClosed:   "订单已关闭",
	StateRefund:   "转入退款",
	StatePayError: "支付失败，请重新下单支付",
}

var (
	outTradeNoRE       = regexp.MustCompile(`^[0-9A-Za-z_\-|*]{6,32}$`)
	legacyOutTradeNoRE = regexp.MustCompile(`^[0-9A-Za-z_\-*]{6,32}$`)
)

// order is one merchant order.
type order struct {
	m           *merchant
	appID       string
	outTradeNo  string
	tradeType   string
	fingerprint string
	description string
	attach      string
	notifyURL   string
	total       int64
	openID      string // payer.openid of a JSAPI order
	clientIP    string
	deviceID    string

	state         string
	transactionID string
	prepayID      string
	prepayAt      time.Time
	codePR        string
	h5Package     string
	createdAt     time.Time
	expireAt      time.Time
	paidAt        time.Time
	closedAt      time.Time
	closeReason   string
	payerOpenID   string
	discount      int64
	bankType      string

	refunds []*refund // in the order taken

	notifyDelay    time.Duration // first delivery of its notifications held back (control API)
	notifyFailNext int           // the next deliveries' answers are lost (control API)
}

// Order is an order as the control API shows it.
type Order struct {
	MchID         string    `json:"mchid"`
	AppID         string    `json:"appid"`
	OutTradeNo    string    `json:"out_trade_no"`
	TradeType     string    `json:"trade_type"`
	TradeState    string    `json:"trade_state"`
	TransactionID string    `json:"transaction_id,omitempty"`
	Description   string    `json:"description"`
	Attach        string    `json:"attach,omitempty"`
	NotifyURL     string    `json:"notify_url"`
	Total         int64     `json:"total"`
	PayerTotal    int64     `json:"payer_total"`
	DiscountFen   int64     `json:"discount_fen"`
	OpenID        string    `json:"openid,omitempty"`
	PayerOpenID   string    `json:"payer_openid,omitempty"`
	BankType      string    `json:"bank_type,omitempty"`
	PrepayID      string    `json:"prepay_id,omitempty"`
	CodeURL       string    `json:"code_url,omitempty"`
	H5URL         string    `json:"h5_url,omitempty"`
	CashierURL    string    `json:"cashier_url"`
	CloseReason   string    `json:"close_reason,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	ExpireAt      time.Time `json:"expire_at"`
	PaidAt        time.Time `json:"paid_at,omitzero"`
	RefundedFen   int64     `json:"refunded_fen"`
	ClosedAt      time.Time `json:"closed_at,omitzero"`
}

func (o *order) codeURL() string {
	if o.codePR == "" {
		return ""
	}
	return "weixin://wxpay/bizpayurl?pr=" + o.codePR
}

// h5URL keeps the real cashier's shape; the simulator serves the same path and query
// under ControlPrefix+"/cashier/checkmweb".
func (o *order) h5URL() string {
	if o.tradeType != TradeTypeH5 {
		return ""
	}
	return "https://wx.tenpay.com/cgi-bin/mmpayweb-bin/checkmweb?prepay_id=" + o.prepayID + "&package=" + o.h5Package
}

// cashierPath is where a buyer pays the order on the simulator.
func (o *order) cashierPath() string {
	switch o.tradeType {
	case TradeTypeNative:
		return ControlPrefix + "/cashier/bizpayurl?pr=" + o.codePR
	case TradeTypeH5:
		return ControlPrefix + "/cashier/checkmweb?prepay_id=" + o.prepayID + "&package=" + o.h5Package
	case TradeTypeJSAPI:
		return ControlPrefix + "/cashier/jsapi?prepay_id=" + o.prepayID
	}
	return ControlPrefix + "/cashier/app?prepay_id=" + o.prepayID
}

func (o *order) view(base string) Order {
	v := Order{
		MchID: o.m.id, AppID: o.appID, OutTradeNo: o.outTradeNo, TradeType: o.tradeType, TradeState: o.state,
		TransactionID: o.transactionID, Description: o.description, Attach: o.attach, NotifyURL: o.notifyURL,
		Total: o.total, DiscountFen: o.discount, OpenID: o.openID, PayerOpenID: o.payerOpenID, BankType: o.bankType,
		PrepayID: o.prepayID, CodeURL: o.codeURL(), H5URL: o.h5URL(), CashierURL: base + o.cashierPath(),
		CloseReason: o.closeReason, CreatedAt: o.createdAt, ExpireAt: o.expireAt, PaidAt: o.paidAt, ClosedAt: o.closedAt,
	}
	if o.paid() {
		v.PayerTotal = o.total - o.discount
	}
	v.RefundedFen, _ = o.refundedLocked()
	return v
}

func (o *order) paid() bool { return o.state == StateSuccess || o.state == StateRefund }

// orderRequest is the body of POST /v3/pay/transactions/{jsapi,native,app,h5}.
type orderRequest struct {
	AppID       string          `json:"appid"`
	MchID       string          `json:"mchid"`
	Description *string         `json:"description"`
	OutTradeNo  *string         `json:"out_trade_no"`
	TimeExpire  string          `json:"time_expire"`
	Attach      string          `json:"attach"`
	NotifyURL   *string         `json:"notify_url"`
	GoodsTag    string          `json:"goods_tag"`
	Fapiao      *bool           `json:"support_fapiao"`
	Amount      *orderAmount    `json:"amount"`
	Payer       *orderPayer     `json:"payer"`
	Detail      json.RawMessage `json:"detail"`
	SceneInfo   *sceneInfo      `json:"scene_info"`
	SettleInfo  json.RawMessage `json:"settle_info"`
}

type orderAmount struct {
	Total    json.RawMessage `json:"total"`
	Currency string          `json:"currency"`
}

type orderPayer struct {
	OpenID string `json:"openid"`
}

type sceneInfo struct {
	PayerClientIP string          `json:"payer_client_ip"`
	DeviceID      string          `json:"device_id"`
	StoreInfo     json.RawMessage `json:"store_info"`
	H5Info        *struct {
		Type string `json:"type"`
	} `json:"h5_info"`
}

// placed is a validated order request.
type placed struct {
	req      orderRequest
	total    int64
	expireAt time.Time
	print    string
}

// validateOrder applies the field rules of the order APIs.
func (s *Simulator) validateOrder(c *call, tradeType string, now time.Time) (placed, *apiError) {
	var p placed
	if e := decodeJSON(c.body, &p.req); e != nil {
		return p, e
	}
	if e := s.checkBodyMchID(c, p.req.MchID); e != nil {
		return p, e
	}
	if e := s.checkCommonFields(&p.req); e != nil {
		return p, e
	}
	total, e := checkAmount(p.req.Amount)
	if e != nil {
		return p, e
	}
	p.total = total
	if e := checkScene(tradeType, &p.req); e != nil {
		return p, e
	}
	if p.expireAt, e = s.timeExpire(p.req.TimeExpire, now); e != nil {
		return p, e
	}
	if p.req.AppID == "" {
		return p, paramError("/appid", "", "必填字段缺失", "body")
	}
	if !s.appIDBound(c.m, p.req.AppID) {
		return p, refuse(http.StatusBadRequest, "APPID_MCHID_NOT_MATCH", "appid和mch_id不匹配")
	}
	p.print = fingerprint(tradeType, c.body)
	return p, nil
}

// appIDBound reports whether appid is bound to m (AddMerchant may bind more meanwhile).
func (s *Simulator) appIDBound(m *merchant, appid string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return m.hasAppID(appid)
}

// checkBodyMchID: the body's mchid must be a merchant, and the one that signed.
func (s *Simulator) checkBodyMchID(c *call, mchid string) *apiError {
	if mchid == "" {
		return paramError("/mchid", "", "必填字段缺失", "body")
	}
	if s.merchant(mchid) == nil {
		return mchNotExists()
	}
	if mchid != c.m.id {
		return refuse(http.StatusBadRequest, "INVALID_REQUEST", "mchid与请求签名使用的商户号不一致")
	}
	return nil
}

func (s *Simulator) checkCommonFields(r *orderRequest) *apiError {
	switch {
	case r.Description == nil || *r.Description == "":
		return paramError("/description", "", "必填字段缺失", "body")
	case utf8.RuneCountInString(*r.Description) > 127:
		return paramError("/description", *r.Description, "长度不能超过127", "body")
	case r.OutTradeNo == nil || *r.OutTradeNo == "":
		return paramError("/out_trade_no", "", "必填字段缺失", "body")
	case !s.outTradeNoRE().MatchString(*r.OutTradeNo):
		return paramError("/out_trade_no", *r.OutTradeNo, "应为6-32位数字、大小写字母或_-|*", "body")
	case utf8.RuneCountInString(r.Attach) > 128:
		return paramError("/attach", r.Attach, "长度不能超过128", "body")
	case r.NotifyURL == nil || *r.NotifyURL == "":
		return paramError("/notify_url", "", "必填字段缺失", "body")
	}
	return checkURL("/notify_url", *r.NotifyURL, 255)
}

func (s *Simulator) outTradeNoRE() *regexp.Regexp {
	if s.cfg.LegacyOutTradeNoCharset {
		return legacyOutTradeNoRE
	}
	return outTradeNoRE
}

// checkURL: a notify_url is an absolute http(s) URL without a query string, at most
// limit characters (255 for orders, 256 for refunds).
func checkURL(field, raw string, limit int) *apiError {
	u, err := url.Parse(raw)
	switch {
	case len(raw) > limit:
		return paramError(field, raw, "长度不能超过"+strconv.Itoa(limit), "body")
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
		return paramError(field, raw, "应为http或https开头的完整URL", "body")
	case u.RawQuery != "" || u.ForceQuery:
		return paramError(field, raw, "不能携带参数", "body")
	}
	return nil
}

func checkAmount(a *orderAmount) (int64, *apiError) {
	if a == nil || len(a.Total) == 0 || string(a.Total) == "null" {
		return 0, paramError("/amount/total", "", "必填字段缺失", "body")
	}
	raw := string(a.Total)
	total, err := strconv.ParseInt(raw, 10, 64) // a JSON string or a fraction does not parse
	if err != nil {
		return 0, paramError("/amount/total", raw, "应为整数，单位为分", "body")
	}
	if total <= 0 {
		return 0, paramError("/amount/total", raw, "应大于0", "body")
	}
	if a.Currency != "" && a.Currency != "CNY" {
		return 0, paramError("/amount/currency", a.Currency, "Currency code is invalid", "body")
	}
	return total, nil
}

// checkScene applies the per-API rules: JSAPI needs payer.openid, H5 needs the payer's IP
// and h5_info.
func checkScene(tradeType string, r *orderRequest) *apiError {
	switch tradeType {
	case TradeTypeJSAPI:
		if r.Payer == nil || r.Payer.OpenID == "" {
			return paramError("/payer/openid", "", "必填字段缺失", "body")
		}
		if len(r.Payer.OpenID) > 128 {
			return paramError("/payer/openid", r.Payer.OpenID, "长度不能超过128", "body")
		}
	case TradeTypeH5:
		if r.SceneInfo == nil || r.SceneInfo.PayerClientIP == "" {
			return paramError("/scene_info/payer_client_ip", "", "必填字段缺失", "body")
		}
		if len(r.SceneInfo.PayerClientIP) > 45 {
			return paramError("/scene_info/payer_client_ip", r.SceneInfo.PayerClientIP, "长度不能超过45", "body")
		}
		if r.SceneInfo.H5Info == nil || r.SceneInfo.H5Info.Type == "" {
			return paramError("/scene_info/h5_info/type", "", "必填字段缺失", "body")
		}
	}
	return nil
}

// timeExpire reads time_expire: RFC 3339, raised to now+1 minute, lowered to the
// ceiling; absent means DefaultOrderLifetime.
func (s *Simulator) timeExpire(raw string, now time.Time) (time.Time, *apiError) {
	if raw == "" {
		return now.Add(DefaultOrderLifetime), nil
	}
	t, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		return time.Time{}, paramError("/time_expire", raw, "应为rfc3339格式，如2018-06-08T10:34:56+08:00", "body")
	}
	if earliest := now.Add(MinTimeExpire); t.Before(earliest) {
		t = earliest
	}
	if latest := now.Add(s.cfg.TimeExpireCeiling); t.After(latest) {
		t = latest
	}
	return t.In(now.Location()), nil
}

// fingerprint identifies "the same parameters": the trade type and the body as a
// canonical JSON document (key order and spacing do not count).
func fingerprint(tradeType string, body []byte) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return tradeType + "\x00" + string(body)
	}
	b, _ := json.Marshal(v)
	return tradeType + "\x00" + string(b)
}

// placeOrder is POST /v3/pay/transactions/{kind}: a new order, or the same answer for a
// repeat with identical parameters.
func (s *Simulator) placeOrder(tradeType string) apiHandler {
	return func(c *call) (answer, *apiError) {
		now := s.now()
		p, e := s.validateOrder(c, tradeType, now)
		if e != nil {
			return answer{}, e
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if o := s.orders[c.m.id][*p.req.OutTradeNo]; o != nil {
			return s.repeatLocked(o, tradeType, p.print, now)
		}
		o := s.newOrderLocked(c.m, tradeType, p, now)
		s.log.Info("order placed", "mchid", o.m.id, "out_trade_no", o.outTradeNo, "trade_type", tradeType, "total", o.total)
		return orderAnswer(o), nil
	}
}

// repeatLocked answers an out_trade_no placed before.
func (s *Simulator) repeatLocked(o *order, tradeType, fp string, now time.Time) (answer, *apiError) {
	s.expireLocked(o, now)
	switch {
	case o.state == StateClosed:
		return answer{}, refuse(http.StatusBadRequest, "ORDER_CLOSED", "订单已关闭")
	case o.tradeType != tradeType || o.fingerprint != fp:
		return answer{}, refuse(http.StatusForbidden, "OUT_TRADE_NO_USED", "商户订单号重复")
	case o.paid():
		return answer{}, refuse(http.StatusBadRequest, "ORDERPAID", "该订单已支付")
	case o.state != StateNotPay:
		return answer{}, refuse(http.StatusBadRequest, "ORDER_CLOSED", "订单已关闭")
	}
	ttl := prepayTTL
	if o.tradeType == TradeTypeH5 {
		ttl = h5TTL
	}
	if now.Sub(o.prepayAt) >= ttl {
		s.issuePrepayLocked(o, now)
	}
	s.log.Info("order repeated", "mchid", o.m.id, "out_trade_no", o.outTradeNo)
	return orderAnswer(o), nil
}

func orderAnswer(o *order) answer {
	switch o.tradeType {
	case TradeTypeNative:
		return jsonAnswer(map[string]string{"code_url": o.codeURL()})
	case TradeTypeH5:
		return jsonAnswer(map[string]string{"h5_url": o.h5URL()})
	}
	return jsonAnswer(map[string]string{"prepay_id": o.prepayID})
}

func (s *Simulator) newOrderLocked(m *merchant, tradeType string, p placed, now time.Time) *order {
	r := p.req
	o := &order{
		m: m, appID: r.AppID, outTradeNo: *r.OutTradeNo, tradeType: tradeType, fingerprint: p.print,
		description: *r.Description, attach: r.Attach, notifyURL: *r.NotifyURL, total: p.total,
		state: StateNotPay, createdAt: now, expireAt: p.expireAt,
	}
	if r.Payer != nil {
		o.openID = r.Payer.OpenID
	}
	if r.SceneInfo != nil {
		o.clientIP, o.deviceID = r.SceneInfo.PayerClientIP, r.SceneInfo.DeviceID
	}
	s.issuePrepayLocked(o, now)
	if s.orders[m.id] == nil {
		s.orders[m.id] = map[string]*order{}
	}
	s.orders[m.id][o.outTradeNo] = o
	s.list = append(s.list, o)
	return o
}

// issuePrepayLocked hands the order a fresh prepay_id (and code_url or h5 package).
func (s *Simulator) issuePrepayLocked(o *order, now time.Time) {
	o.prepayID = "wx" + now.Format("20060102150405") + randomHex(10)
	o.prepayAt = now
	s.byPrepayID[o.prepayID] = o
	switch o.tradeType {
	case TradeTypeNative:
		o.codePR = randomString(9, apiV3KeyAlphabet)
		s.byCodePR[o.codePR] = o
	case TradeTypeH5:
		o.h5Package = randomDigits(10)
	}
}

// expireLocked closes an unpaid order whose time_expire has passed.
func (s *Simulator) expireLocked(o *order, now time.Time) {
	if o.state == StateNotPay && !now.Before(o.expireAt) {
		o.state, o.closedAt, o.closeReason = StateClosed, o.expireAt, "expired"
	}
}

// nextTransactionIDLocked returns a 28-digit transaction_id shaped like WeChat Pay's:
// "42000", five digits, the date and a ten-digit sequence.
func (s *Simulator) nextTransactionIDLocked(now time.Time) string {
	s.seq++
	return fmt.Sprintf("42000%05d%s%010d", s.instance, now.Format("20060102"), s.seq)
}
