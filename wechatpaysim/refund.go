package wechatpaysim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// Refund statuses (status in answers, refund_status in notifications).
const (
	// RefundProcessing is the first answer: accepted, the result pending.
	RefundProcessing = "PROCESSING"
	// RefundSuccess is final: the money is back with the buyer.
	RefundSuccess = "SUCCESS"
	// RefundClosed is final: the refund failed (e.g. the merchant's funds stayed short).
	RefundClosed = "CLOSED"
	// RefundAbnormal is not final: the buyer's account refused it; the merchant resolves it.
	RefundAbnormal = "ABNORMAL"
)

// refundPath is the refund API; a refund query is refundPath + "/" + out_refund_no.
const refundPath = "/v3/refund/domestic/refunds"

// refundSummary is the notification summary of each outcome. Only 退款成功 is
// documented; the other two are the simulator's.
var refundSummary = map[string]string{
	RefundSuccess:  "退款成功",
	RefundClosed:   "退款关闭",
	RefundAbnormal: "退款异常",
}

var outRefundNoRE = regexp.MustCompile(`^[0-9A-Za-z_\-|*@]{1,64}$`)

// Sentinel errors of the refund control API.
var (
	// ErrRefundNotFound means the merchant has no refund with that out_refund_no.
	ErrRefundNotFound = errors.New("wechatpaysim: refund not found")
	// ErrRefundFinal means the refund cannot move to that status (it is SUCCESS or
	// CLOSED, or already in it).
	ErrRefundFinal = errors.New("wechatpaysim: refund cannot move to that status")
	// ErrBadRefundStatus means a status other than SUCCESS, CLOSED or ABNORMAL.
	ErrBadRefundStatus = errors.New("wechatpaysim: a refund settles in SUCCESS, CLOSED or ABNORMAL")
)

// refund is one refund of an order.
type refund struct {
	o              *order
	outRefundNo    string
	refundID       string
	amount         int64
	payerRefund    int64
	discountRefund int64
	reason         string
	notifyURL      string
	fundsAccount   string
	status         string
	target         string // the status it settles in after RefundDelay; PROCESSING: it stays
	console        bool
	createdAt      time.Time
	successAt      time.Time
	cancelled      bool // by Reset
}

// Refund is a refund as the control API shows it. Amounts are fen.
type Refund struct {
	MchID               string    `json:"mchid"`
	OutTradeNo          string    `json:"out_trade_no"`
	TransactionID       string    `json:"transaction_id"`
	OutRefundNo         string    `json:"out_refund_no"`
	RefundID            string    `json:"refund_id"`
	Status              string    `json:"status"`
	Refund              int64     `json:"refund"`
	Total               int64     `json:"total"`
	PayerRefund         int64     `json:"payer_refund"`
	DiscountRefund      int64     `json:"discount_refund"`
	Reason              string    `json:"reason,omitempty"`
	NotifyURL           string    `json:"notify_url"`
	FundsAccount        string    `json:"funds_account"`
	UserReceivedAccount string    `json:"user_received_account"`
	Console             bool      `json:"console"`
	CreatedAt           time.Time `json:"created_at"`
	SuccessAt           time.Time `json:"success_at,omitzero"`
}

func (r *refund) view() Refund {
	return Refund{
		MchID: r.o.m.id, OutTradeNo: r.o.outTradeNo, TransactionID: r.o.transactionID, OutRefundNo: r.outRefundNo,
		RefundID: r.refundID, Status: r.status, Refund: r.amount, Total: r.o.total, PayerRefund: r.payerRefund,
		DiscountRefund: r.discountRefund, Reason: r.reason, NotifyURL: r.notifyURL, FundsAccount: r.fundsAccount,
		UserReceivedAccount: r.account(), Console: r.console, CreatedAt: r.createdAt, SuccessAt: r.successAt,
	}
}

// account is where the money goes back: the buyer's balance, or the card paid with.
func (r *refund) account() string {
	if r.o.bankType == "" || r.o.bankType == "OTHERS" {
		return "支付用户零钱"
	}
	return r.o.bankType + "银行卡"
}

// refundedLocked is what the order's refunds take back (a CLOSED one gives its share back).
func (o *order) refundedLocked() (amount, discount int64) {
	for _, r := range o.refunds {
		if r.status != RefundClosed {
			amount += r.amount
			discount += r.discountRefund
		}
	}
	return amount, discount
}

// refundRequest is the body of POST /v3/refund/domestic/refunds.
type refundRequest struct {
	TransactionID string          `json:"transaction_id"`
	OutTradeNo    string          `json:"out_trade_no"`
	OutRefundNo   string          `json:"out_refund_no"`
	Reason        string          `json:"reason"`
	NotifyURL     string          `json:"notify_url"`
	FundsAccount  string          `json:"funds_account"`
	Amount        *refundAmount   `json:"amount"`
	GoodsDetail   json.RawMessage `json:"goods_detail"`
}

type refundAmount struct {
	Refund   json.RawMessage `json:"refund"`
	Total    json.RawMessage `json:"total"`
	Currency string          `json:"currency"`
	From     json.RawMessage `json:"from"`
}

// refundAsk is a validated refund request.
type refundAsk struct {
	req    refundRequest
	refund int64
	total  int64
}

func validateRefund(body []byte) (refundAsk, *apiError) {
	var a refundAsk
	if e := decodeJSON(body, &a.req); e != nil {
		return a, e
	}
	if e := checkRefundFields(&a.req); e != nil {
		return a, e
	}
	var e *apiError
	if a.refund, e = positiveFen("/amount/refund", a.req.Amount.Refund); e != nil {
		return a, e
	}
	if a.total, e = positiveFen("/amount/total", a.req.Amount.Total); e != nil {
		return a, e
	}
	return a, nil
}

func checkRefundFields(r *refundRequest) *apiError {
	switch {
	case r.TransactionID == "" && r.OutTradeNo == "":
		return paramError("/out_trade_no", "", "transaction_id和out_trade_no必须二选一", "body")
	case r.OutRefundNo == "":
		return paramError("/out_refund_no", "", "必填字段缺失", "body")
	case !outRefundNoRE.MatchString(r.OutRefundNo):
		return paramError("/out_refund_no", r.OutRefundNo, "应为1-64位数字、大小写字母或_-|*@", "body")
	case utf8.RuneCountInString(r.Reason) > 80:
		return paramError("/reason", r.Reason, "长度不能超过80", "body")
	case r.FundsAccount != "" && r.FundsAccount != "AVAILABLE" && r.FundsAccount != "UNSETTLED":
		return paramError("/funds_account", r.FundsAccount, "应为AVAILABLE或UNSETTLED", "body")
	case r.Amount == nil:
		return paramError("/amount", "", "必填字段缺失", "body")
	case r.Amount.Currency == "":
		return paramError("/amount/currency", "", "必填字段缺失", "body")
	case r.Amount.Currency != "CNY":
		return paramError("/amount/currency", r.Amount.Currency, "Currency code is invalid", "body")
	case r.NotifyURL != "":
		return checkURL("/notify_url", r.NotifyURL, 256)
	}
	return nil
}

// positiveFen reads an integer amount in fen greater than zero.
func positiveFen(field string, raw json.RawMessage) (int64, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, paramError(field, "", "必填字段缺失", "body")
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, paramError(field, string(raw), "应为整数，单位为分", "body")
	}
	if n <= 0 {
		return 0, paramError(field, string(raw), "应大于0", "body")
	}
	return n, nil
}

func refundOrderMismatch() *apiError {
	return refuse(http.StatusBadRequest, "INVALID_REQUEST", "您的请求参数与订单信息不一致")
}

// handleRefund is POST /v3/refund/domestic/refunds.
func (s *Simulator) handleRefund(c *call) (answer, *apiError) {
	a, e := validateRefund(c.body)
	if e != nil {
		return answer{}, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, e := s.refundLocked(c.m, a, false)
	if e != nil {
		return answer{}, e
	}
	return jsonAnswer(s.refundBodyLocked(r)), nil
}

// handleRefundQuery is GET /v3/refund/domestic/refunds/{out_refund_no}.
func (s *Simulator) handleRefundQuery(c *call) (answer, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.refunds[c.m.id][c.r.PathValue("out_refund_no")]
	if r == nil {
		return answer{}, refuse(http.StatusNotFound, "RESOURCE_NOT_EXISTS", "退款单不存在")
	}
	return jsonAnswer(s.refundBodyLocked(r)), nil
}

// refundLocked takes a refund, or answers the one taken before under the same
// out_refund_no ("同一退款单号多次请求只退一笔").
func (s *Simulator) refundLocked(m *merchant, a refundAsk, console bool) (*refund, *apiError) {
	now := s.now()
	o, e := s.refundOrderLocked(m, a.req)
	if e != nil {
		return nil, e
	}
	if a.total != o.total {
		return nil, refundOrderMismatch()
	}
	if r := s.refunds[m.id][a.req.OutRefundNo]; r != nil {
		if r.o != o || r.amount != a.refund {
			return nil, s.refundMismatch()
		}
		s.log.Info("refund repeated", "mchid", m.id, "out_refund_no", r.outRefundNo, "status", r.status)
		return r, nil
	}
	if e := s.checkRefundRules(o, a.refund, now); e != nil {
		return nil, e
	}
	r := s.newRefundLocked(o, a, now, console)
	s.log.Info("refund taken", "mchid", m.id, "out_trade_no", o.outTradeNo, "out_refund_no", r.outRefundNo, "refund", r.amount)
	return r, nil
}

// refundOrderLocked finds the paid order a refund names by transaction_id or out_trade_no.
func (s *Simulator) refundOrderLocked(m *merchant, req refundRequest) (*order, *apiError) {
	var o *order
	if req.TransactionID != "" {
		if o = s.byTxID[req.TransactionID]; o != nil && o.m != m {
			o = nil
		}
		if o != nil && req.OutTradeNo != "" && req.OutTradeNo != o.outTradeNo {
			return nil, refundOrderMismatch()
		}
	} else {
		o = s.orders[m.id][req.OutTradeNo]
	}
	if o == nil || !o.paid() {
		return nil, refuse(http.StatusNotFound, "RESOURCE_NOT_EXISTS", "订单不存在")
	}
	return o, nil
}

func (s *Simulator) refundMismatch() *apiError {
	if s.cfg.RefundMismatch == RefundMismatchFeeMismatch {
		return refuse(http.StatusBadRequest, "REFUND_FEE_MISMATCH", "订单金额或退款金额与之前请求不一致，请核实后再试")
	}
	return refuse(http.StatusBadRequest, "INVALID_REQUEST", "商户退款单号已存在，退款金额或订单与之前请求不一致")
}

// checkRefundRules applies the refund limits: the refund window, what is left, the
// number of refunds and the interval between two.
func (s *Simulator) checkRefundRules(o *order, amount int64, now time.Time) *apiError {
	refunded, _ := o.refundedLocked()
	switch {
	case now.Sub(o.paidAt) > s.cfg.RefundWindow:
		return refuse(http.StatusBadRequest, "INVALID_REQUEST", "订单已超过可退款的最大期限")
	case amount > o.total-refunded:
		if s.cfg.OverRefund == OverRefundNotEnough {
			return refuse(http.StatusForbidden, "NOT_ENOUGH", "基本账户余额不足，请充值后重新发起")
		}
		return refuse(http.StatusBadRequest, "INVALID_REQUEST", "申请退款金额超过订单可退金额")
	case len(o.refunds) >= s.cfg.RefundMaxPerOrder:
		return refuse(http.StatusBadRequest, "INVALID_REQUEST", "订单已达到退款次数上限")
	case s.cfg.RefundInterval > 0 && len(o.refunds) > 0 && now.Sub(o.refunds[len(o.refunds)-1].createdAt) < s.cfg.RefundInterval:
		if s.cfg.RefundTooSoon == RefundTooSoonInvalidRequest {
			return refuse(http.StatusBadRequest, "INVALID_REQUEST", "同一笔订单的退款请求需间隔1分钟")
		}
		return refuse(http.StatusTooManyRequests, "FREQUENCY_LIMITED", "该笔退款为受理中，请调用查单接口确认或降低频率原单重试")
	}
	return nil
}

func (s *Simulator) newRefundLocked(o *order, a refundAsk, now time.Time, console bool) *refund {
	r := &refund{
		o: o, outRefundNo: a.req.OutRefundNo, refundID: s.nextRefundIDLocked(now), amount: a.refund,
		reason: a.req.Reason, notifyURL: a.req.NotifyURL, fundsAccount: a.req.FundsAccount,
		status: RefundProcessing, target: RefundSuccess, console: console, createdAt: now,
	}
	if r.notifyURL == "" {
		r.notifyURL = o.notifyURL
	}
	if r.fundsAccount == "" {
		r.fundsAccount = "AVAILABLE"
	}
	refunded, discounted := o.refundedLocked()
	r.discountRefund = a.refund * o.discount / o.total
	if refunded+a.refund == o.total {
		r.discountRefund = o.discount - discounted // the last refund evens out the rounding
	}
	r.payerRefund = a.refund - r.discountRefund
	if s.refundFault.Next > 0 {
		s.refundFault.Next--
		r.target = s.refundFault.Status
	}
	o.refunds = append(o.refunds, r)
	o.state = StateRefund
	if s.refunds[o.m.id] == nil {
		s.refunds[o.m.id] = map[string]*refund{}
	}
	s.refunds[o.m.id][r.outRefundNo] = r
	s.refundList = append(s.refundList, r)
	if s.cfg.RefundDelay > 0 && r.target != RefundProcessing && !s.closed {
		s.wg.Add(1)
		go s.settleAfter(r, s.scaled(s.cfg.RefundDelay))
	}
	return r
}

// nextRefundIDLocked returns a 29-digit refund_id shaped like WeChat Pay's: "503", five
// digits, the date and a thirteen-digit sequence.
func (s *Simulator) nextRefundIDLocked(now time.Time) string {
	s.seq++
	return fmt.Sprintf("503%05d%s%013d", s.instance, now.Format("20060102"), s.seq)
}

// settleAfter moves a PROCESSING refund to its target status after d.
func (s *Simulator) settleAfter(r *refund, d time.Duration) {
	defer s.wg.Done()
	if !s.sleep(d) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.cancelled || r.status != RefundProcessing {
		return
	}
	if err := s.settleLocked(r, r.target); err != nil {
		s.log.Error("settle refund", "out_refund_no", r.outRefundNo, "err", err)
	}
}

// settleLocked moves a refund to status and notifies the merchant.
func (s *Simulator) settleLocked(r *refund, status string) error {
	switch {
	case status != RefundSuccess && status != RefundClosed && status != RefundAbnormal:
		return fmt.Errorf("%w, not %q", ErrBadRefundStatus, status)
	case r.status == RefundSuccess || r.status == RefundClosed || r.status == status:
		return fmt.Errorf("%w: it is %s", ErrRefundFinal, r.status)
	}
	r.status = status
	if status == RefundSuccess {
		r.successAt = s.now()
	}
	s.log.Info("refund settled", "mchid", r.o.m.id, "out_refund_no", r.outRefundNo, "status", status)
	s.notifyRefundLocked(r)
	return nil
}

// refundBodyLocked is the refund as the refund API and its query answer it.
// success_time is left out while the refund has not succeeded (never "").
func (s *Simulator) refundBodyLocked(r *refund) map[string]any {
	o := r.o
	b := map[string]any{
		"refund_id": r.refundID, "out_refund_no": r.outRefundNo, "transaction_id": o.transactionID,
		"out_trade_no": o.outTradeNo, "channel": "ORIGINAL", "user_received_account": r.account(),
		"create_time": r.createdAt.In(s.loc).Format(time.RFC3339), "status": r.status, "funds_account": r.fundsAccount,
		"amount": map[string]any{
			"total": o.total, "refund": r.amount, "from": []any{}, "payer_total": o.total - o.discount,
			"payer_refund": r.payerRefund, "settlement_refund": r.amount, "settlement_total": o.total,
			"discount_refund": r.discountRefund, "currency": "CNY", "refund_fee": s.fee(r.amount),
		},
		"promotion_detail": []any{},
	}
	if r.status == RefundSuccess {
		b["success_time"] = r.successAt.In(s.loc).Format(time.RFC3339)
	}
	if o.discount > 0 {
		b["promotion_detail"] = []any{map[string]any{
			"promotion_id": "1" + randomDigits(10), "scope": "GLOBAL", "type": "COUPON",
			"amount": o.discount, "refund_amount": r.discountRefund, "goods_detail": []any{},
		}}
	}
	return b
}

// refundResourceLocked is the plaintext of a refund notification's resource.
func (s *Simulator) refundResourceLocked(r *refund) map[string]any {
	o := r.o
	res := map[string]any{
		"mchid": o.m.id, "out_trade_no": o.outTradeNo, "transaction_id": o.transactionID,
		"out_refund_no": r.outRefundNo, "refund_id": r.refundID, "refund_status": r.status,
		"user_received_account": r.account(),
		"amount": map[string]any{
			"total": o.total, "refund": r.amount, "payer_total": o.total - o.discount, "payer_refund": r.payerRefund,
		},
	}
	if r.status == RefundSuccess {
		res["success_time"] = r.successAt.In(s.loc).Format(time.RFC3339)
	}
	return res
}

// findRefundLocked finds a refund by out_refund_no, in mchid's refunds or, with mchid
// empty, in the only merchant that has it.
func (s *Simulator) findRefundLocked(mchid, outRefundNo string) (*refund, error) {
	var found *refund
	for id, byNo := range s.refunds {
		if r := byNo[outRefundNo]; r != nil && (mchid == "" || id == mchid) {
			if found != nil {
				return nil, ErrAmbiguous
			}
			found = r
		}
	}
	if found == nil {
		return nil, ErrRefundNotFound
	}
	return found, nil
}

// Refund returns one refund (mchid may be empty when only one merchant has that
// out_refund_no).
func (s *Simulator) Refund(mchid, outRefundNo string) (Refund, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.findRefundLocked(mchid, outRefundNo)
	if err != nil {
		return Refund{}, err
	}
	return r.view(), nil
}

// Refunds lists every refund (of mchid and of outTradeNo, if not empty) in the order
// they were taken.
func (s *Simulator) Refunds(mchid, outTradeNo string) []Refund {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Refund{}
	for _, r := range s.refundList {
		if (mchid == "" || r.o.m.id == mchid) && (outTradeNo == "" || r.o.outTradeNo == outTradeNo) {
			out = append(out, r.view())
		}
	}
	return out
}

// SettleRefund moves a refund to status (RefundSuccess, RefundClosed or RefundAbnormal)
// and sends its notification: REFUND.SUCCESS, REFUND.CLOSED or REFUND.ABNORMAL. A
// PROCESSING or ABNORMAL refund can move; SUCCESS and CLOSED are final.
func (s *Simulator) SettleRefund(mchid, outRefundNo, status string) (Refund, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.findRefundLocked(mchid, outRefundNo)
	if err != nil {
		return Refund{}, err
	}
	if err := s.settleLocked(r, status); err != nil {
		return r.view(), err
	}
	return r.view(), nil
}

// ConsoleRefund describes a refund made in the merchant's WeChat Pay console.
type ConsoleRefund struct {
	// Refund is the amount in fen; zero refunds all that is left.
	Refund int64 `json:"refund"`
	// Reason is shown to the buyer.
	Reason string `json:"reason"`
	// NotifyURL receives its notifications; empty means the order's notify_url, the
	// simulator's stand-in for the console's refund notification setting.
	NotifyURL string `json:"notify_url"`
}

// ConsoleRefund refunds an order as the merchant's WeChat Pay console would: the
// merchant's system did not ask for it, and its out_refund_no ("C" and the refund_id)
// is made up. The refund rules apply; a refusal is returned as an error carrying WeChat
// Pay's code.
func (s *Simulator) ConsoleRefund(mchid, outTradeNo string, opts ConsoleRefund) (Refund, error) {
	if opts.Refund < 0 {
		return Refund{}, fmt.Errorf("wechatpaysim: a negative refund")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, err := s.findLocked(mchid, outTradeNo)
	if err != nil {
		return Refund{}, err
	}
	a := refundAsk{req: refundRequest{OutTradeNo: outTradeNo, Reason: opts.Reason, NotifyURL: opts.NotifyURL}, refund: opts.Refund, total: o.total}
	if a.refund == 0 {
		refunded, _ := o.refundedLocked()
		a.refund = o.total - refunded
	}
	if a.refund == 0 {
		return Refund{}, refuse(http.StatusBadRequest, "INVALID_REQUEST", "订单已全额退款")
	}
	a.req.OutRefundNo = fmt.Sprintf("C503%05d%s%013d", s.instance, s.now().Format("20060102"), s.seq+1)
	r, e := s.refundLocked(o.m, a, true)
	if e != nil {
		return Refund{}, e
	}
	return r.view(), nil
}

// RefundFaults changes how the next new refunds end.
type RefundFaults struct {
	// Next is how many of the next new refunds end in Status instead of SUCCESS.
	Next int `json:"next"`
	// Status is RefundClosed, RefundAbnormal (each after RefundDelay, with its
	// notification) or RefundProcessing (they stay PROCESSING until the control API
	// settles them).
	Status string `json:"status"`
}

// SetRefundFaults replaces the refund fault settings.
func (s *Simulator) SetRefundFaults(f RefundFaults) error {
	if f.Next < 0 {
		return fmt.Errorf("wechatpaysim: refund faults must not be negative")
	}
	if f.Next > 0 && !slices.Contains([]string{RefundClosed, RefundAbnormal, RefundProcessing}, f.Status) {
		return fmt.Errorf("wechatpaysim: a refund fault's status is CLOSED, ABNORMAL or PROCESSING, not %q", f.Status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refundFault = f
	return nil
}
