package wechatpaysim

import (
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Bill types (bill_type) of GET /v3/bill/tradebill. SUCCESS and REFUND bills keep the
// ALL bill's 27 columns with only their rows: WeChat Pay shows their own layouts only as
// spreadsheet samples.
const (
	BillTypeAll     = "ALL"
	BillTypeSuccess = "SUCCESS"
	BillTypeRefund  = "REFUND"
)

// BillDateLayout is bill_date's layout.
const BillDateLayout = "2006-01-02"

// billTimeLayout is the bill's times: Beijing time without a zone.
const billTimeLayout = "2006-01-02 15:04:05"

// billHeader is the ALL bill's header: plain names, no backticks.
const billHeader = "交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,付款银行,货币种类," +
	"应结订单金额,代金券金额,微信退款单号,商户退款单号,退款金额,充值券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率," +
	"订单金额,申请退款金额,费率备注"

const billSummaryHeader = "总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额"

// ErrBadBillDate means a bill date that is not YYYY-MM-DD.
var ErrBadBillDate = errors.New("wechatpaysim: a bill date is YYYY-MM-DD")

// billFile is a bill handed out under a download token.
type billFile struct {
	m       *merchant
	body    []byte // as downloaded (gzip when asked)
	gzipped bool
	expires time.Time
}

// billLine is one row of a bill with the amounts its summary adds up (fen).
type billLine struct {
	at                                                 time.Time
	fields                                             []string
	settlement, refund, couponRefund, fee, total, asks int64
}

// handleTradeBill is GET /v3/bill/tradebill?bill_date=&bill_type=&tar_type=.
func (s *Simulator) handleTradeBill(c *call) (answer, *apiError) {
	q := c.r.URL.Query()
	now := s.now()
	day, e := s.billDay(q.Get("bill_date"), now)
	if e != nil {
		return answer{}, e
	}
	billType := q.Get("bill_type")
	if billType == "" {
		billType = BillTypeAll
	}
	if !slices.Contains([]string{BillTypeAll, BillTypeSuccess, BillTypeRefund}, billType) {
		return answer{}, paramError("bill_type", billType, "应为ALL、SUCCESS或REFUND", "query")
	}
	tar := q.Get("tar_type")
	if tar != "" && tar != "GZIP" {
		return answer{}, paramError("tar_type", tar, "应为GZIP", "query")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.billReadyLocked(day, now) {
		return answer{}, refuse(http.StatusBadRequest, "STATEMENT_CREATING", "账单生成中")
	}
	lines := s.billLinesLocked(c.m, day, billType)
	if len(lines) == 0 {
		return answer{}, refuse(http.StatusBadRequest, "NO_STATEMENT_EXIST", "请求的账单文件不存在")
	}
	return s.issueBillLocked(c.m, s.renderBill(lines), tar == "GZIP", now), nil
}

// billDay reads bill_date: a day of the last three months, today included.
func (s *Simulator) billDay(raw string, now time.Time) (time.Time, *apiError) {
	if raw == "" {
		return time.Time{}, paramError("bill_date", "", "必填字段缺失", "query")
	}
	day, err := time.ParseInLocation(BillDateLayout, raw, s.loc)
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, s.loc)
	switch {
	case err != nil:
		return day, refuse(http.StatusBadRequest, "INVALID_REQUEST", "账单日期格式不正确，应为yyyy-MM-dd")
	case day.After(today):
		return day, refuse(http.StatusBadRequest, "INVALID_REQUEST", "账单日期不能晚于当前日期")
	case day.Before(today.AddDate(0, -BillHistory, 0)):
		return day, refuse(http.StatusBadRequest, "INVALID_REQUEST", "仅支持下载三个月内的账单")
	}
	return day, nil
}

// billReadyLocked: a day's bill is ready at BillReadyHour the next day, unless it was
// made late (until released) or released early.
func (s *Simulator) billReadyLocked(day, now time.Time) bool {
	if held, ok := s.billHolds[day.Format(BillDateLayout)]; ok {
		return !held
	}
	if s.cfg.BillReadyHour < 0 {
		return true
	}
	ready := day.AddDate(0, 0, 1).Add(time.Duration(s.cfg.BillReadyHour) * time.Hour)
	return !now.Before(ready)
}

// issueBillLocked keeps the bill under a fresh token and answers its hash and URL.
func (s *Simulator) issueBillLocked(m *merchant, plain []byte, gz bool, now time.Time) answer {
	for t, f := range s.bills {
		if !now.Before(f.expires) {
			delete(s.bills, t)
		}
	}
	token := randomString(48, apiV3KeyAlphabet)
	u := APIHost + "/v3/billdownload/file?token=" + token
	body, hashed := plain, plain
	if gz {
		body = gzipBytes(plain)
		u += "&tartype=gzip"
		if s.cfg.BillHashCompressed {
			hashed = body
		}
	}
	s.bills[token] = &billFile{m: m, body: body, gzipped: gz, expires: now.Add(s.cfg.BillURLLifetime)}
	sum := sha1.Sum(hashed)
	return jsonAnswer(map[string]string{"hash_type": "SHA1", "hash_value": hex.EncodeToString(sum[:]), "download_url": u})
}

func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

// handleBillDownload is GET /v3/billdownload/file?token=: signed like any request, the
// answer the raw file, unsigned.
func (s *Simulator) handleBillDownload(c *call) (answer, *apiError) {
	s.mu.Lock()
	f := s.bills[c.r.URL.Query().Get("token")]
	s.mu.Unlock()
	switch {
	case f == nil || !s.now().Before(f.expires):
		return answer{}, refuse(http.StatusBadRequest, "INVALID_REQUEST", "下载链接已失效，请重新申请账单")
	case f.m != c.m:
		return answer{}, refuse(http.StatusForbidden, "NO_AUTH", "无权下载该账单")
	}
	ct := "text/plain; charset=utf-8"
	if f.gzipped {
		ct = "application/x-gzip"
	}
	return answer{status: http.StatusOK, body: f.body, unsigned: true, contentType: ct}, nil
}

// billLinesLocked is the merchant's bill for day: its payments by success time and its
// successful refunds by their success time, in time order.
func (s *Simulator) billLinesLocked(m *merchant, day time.Time, billType string) []billLine {
	next := day.AddDate(0, 0, 1)
	on := func(t time.Time) bool { return !t.IsZero() && !t.Before(day) && t.Before(next) }
	var lines []billLine
	if billType != BillTypeRefund {
		for _, o := range s.list {
			if o.m == m && o.paid() && on(o.paidAt) {
				lines = append(lines, s.paymentLine(o))
			}
		}
	}
	if billType != BillTypeSuccess {
		for _, r := range s.refundList {
			if r.o.m == m && r.status == RefundSuccess && on(r.successAt) {
				lines = append(lines, s.refundLine(r))
			}
		}
	}
	slices.SortStableFunc(lines, func(a, b billLine) int { return a.at.Compare(b.at) })
	return lines
}

var billText = strings.NewReplacer("\r", " ", "\n", " ")

func (s *Simulator) paymentLine(o *order) billLine {
	fee := s.fee(o.total)
	return billLine{
		at: o.paidAt, settlement: o.total, fee: fee, total: o.total,
		fields: []string{
			o.paidAt.In(s.loc).Format(billTimeLayout), o.appID, o.m.id, "0", o.deviceID, o.transactionID, o.outTradeNo,
			o.payerOpenID, o.tradeType, StateSuccess, o.bankType, "CNY", yuan(o.total), yuan(o.discount), "0", "0",
			"0.00", "0.00", "", "", billText.Replace(o.description), billText.Replace(o.attach), feeYuan(fee), s.feeRate(),
			yuan(o.total), "0.00", "",
		},
	}
}

// refundLine is a refund's row: its fee share comes back, so 手续费 is negative.
func (s *Simulator) refundLine(r *refund) billLine {
	o := r.o
	fee := -s.fee(r.amount)
	return billLine{
		at: r.successAt, refund: r.amount, couponRefund: r.discountRefund, fee: fee, asks: r.amount,
		fields: []string{
			r.successAt.In(s.loc).Format(billTimeLayout), o.appID, o.m.id, "0", o.deviceID, o.transactionID, o.outTradeNo,
			o.payerOpenID, o.tradeType, StateRefund, o.bankType, "CNY", "0.00", "0.00", r.refundID, r.outRefundNo,
			yuan(r.amount), yuan(r.discountRefund), "ORIGINAL", RefundSuccess, billText.Replace(o.description),
			billText.Replace(o.attach), feeYuan(fee), s.feeRate(), "0.00", yuan(r.amount), "",
		},
	}
}

// renderBill writes the bill as WeChat Pay does: a UTF-8 BOM, CRLF line ends, the header
// without backticks, every data field after a backtick, then the summary's header and
// line (counts and totals float-style: 45.0, 0.0).
func (s *Simulator) renderBill(lines []billLine) []byte {
	var b bytes.Buffer
	b.WriteString("\ufeff" + billHeader + "\r\n")
	var sum billLine
	for _, l := range lines {
		b.WriteString("`" + strings.Join(l.fields, ",`") + "\r\n")
		sum.settlement += l.settlement
		sum.refund += l.refund
		sum.couponRefund += l.couponRefund
		sum.fee += l.fee
		sum.total += l.total
		sum.asks += l.asks
	}
	b.WriteString(billSummaryHeader + "\r\n")
	summary := []string{
		strconv.Itoa(len(lines)) + ".0", floatYuan(sum.settlement), floatYuan(sum.refund), floatYuan(sum.couponRefund),
		floatYuan(sum.fee), floatYuan(sum.total), floatYuan(sum.asks),
	}
	b.WriteString("`" + strings.Join(summary, ",`") + "\r\n")
	return b.Bytes()
}

// fee is the fee on fen at FeeRateBP, rounded half up to the fen.
func (s *Simulator) fee(fen int64) int64 {
	if s.cfg.FeeRateBP < 0 {
		return 0
	}
	return (fen*int64(s.cfg.FeeRateBP) + 5000) / 10000
}

// feeRate is 费率 as the bill shows it: "0.60%".
func (s *Simulator) feeRate() string {
	bp := max(s.cfg.FeeRateBP, 0)
	return fmt.Sprintf("%d.%02d%%", bp/100, bp%100)
}

func splitFen(fen int64) (sign string, whole, cents int64) {
	if fen < 0 {
		sign, fen = "-", -fen
	}
	return sign, fen / 100, fen % 100
}

// feeYuan is 手续费 with five decimals: 0.01000.
func feeYuan(fen int64) string { return yuan(fen) + "000" }

// floatYuan is a summary amount, float-style: 0.47, 0.1, 0.0.
func floatYuan(fen int64) string {
	sign, w, c := splitFen(fen)
	switch {
	case c == 0:
		return fmt.Sprintf("%s%d.0", sign, w)
	case c%10 == 0:
		return fmt.Sprintf("%s%d.%d", sign, w, c/10)
	}
	return fmt.Sprintf("%s%d.%02d", sign, w, c)
}

// SetBillLate makes day's bills (YYYY-MM-DD, every merchant's) answer
// STATEMENT_CREATING whatever the hour (late), or releases them: ready at once, even
// before their hour.
func (s *Simulator) SetBillLate(day string, late bool) error {
	if _, err := time.Parse(BillDateLayout, day); err != nil {
		return fmt.Errorf("%w, not %q", ErrBadBillDate, day)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.billHolds[day] = late
	return nil
}

// TradeBill renders a merchant's trade bill for day (YYYY-MM-DD) as it stands, plain,
// whether or not it is ready (mchid may be empty when only one merchant is served).
func (s *Simulator) TradeBill(mchid, day, billType string) ([]byte, error) {
	d, err := time.ParseInLocation(BillDateLayout, day, s.loc)
	if err != nil {
		return nil, fmt.Errorf("%w, not %q", ErrBadBillDate, day)
	}
	if billType == "" {
		billType = BillTypeAll
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.merchants[mchid]
	if mchid == "" && len(s.merchants) == 1 {
		for _, only := range s.merchants {
			m = only
		}
	}
	if m == nil {
		return nil, fmt.Errorf("wechatpaysim: unknown mchid %q", mchid)
	}
	return s.renderBill(s.billLinesLocked(m, d, billType)), nil
}
