package alipaysim

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"
)

// billURLTTL is how long a bill_download_url stays valid (Alipay's are valid for 30 s).
const billURLTTL = 30 * time.Second

// billDateLayout is the bill_date format of a daily bill.
const billDateLayout = "2006-01-02"

// Bill corruption operations for BillCorruption.Op.
const (
	CorruptDrop   = "drop"   // leave the line of OutTradeNo (or OutRequestNo) out of the bill
	CorruptAmount = "amount" // write Amount as that line's 订单金额 (its 商家实收 follows, less its discounts)
	CorruptAdd    = "add"    // add a payment line for OutTradeNo (default: a new one) of Amount
	// CorruptReceived writes Amount as that line's 商家实收 alone, so that 订单金额 less
	// the line's discounts no longer gives it.
	CorruptReceived = "received"
)

// BillCorruption makes a day's bill differ from the simulator's trades on purpose, for
// tests of reconciliation. A line is named by OutTradeNo and, for a refund line,
// OutRequestNo.
type BillCorruption struct {
	AppID        string `json:"app_id,omitempty"`
	Op           string `json:"op"`
	OutTradeNo   string `json:"out_trade_no,omitempty"`
	OutRequestNo string `json:"out_request_no,omitempty"`
	// Amount is yuan ("12.34"); refund lines take it as the refunded amount.
	Amount  string `json:"amount,omitempty"`
	Subject string `json:"subject,omitempty"`
}

// BillStatus is the simulator's publication setting, as the control API shows it.
type BillStatus struct {
	// PublishedThrough is the last day whose bill is available; empty means the default,
	// every day before today (China time).
	PublishedThrough string `json:"published_through,omitempty"`
	// LastAvailable is the last day available now.
	LastAvailable string `json:"last_available"`
	// Corruptions lists the planted faults by "<app_id>/<bill_date>".
	Corruptions map[string][]BillCorruption `json:"corruptions,omitempty"`
}

// bills is the simulator's bill state: publication and planted faults.
type bills struct {
	key []byte // signs download URLs

	mu          sync.Mutex
	through     string // "" = yesterday
	corruptions map[string][]BillCorruption
}

func newBills() *bills {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return &bills{key: k, corruptions: map[string][]BillCorruption{}}
}

func (b *bills) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.through = ""
	b.corruptions = map[string][]BillCorruption{}
}

func (s *Simulator) lastPublished() string {
	s.bills.mu.Lock()
	defer s.bills.mu.Unlock()
	if s.bills.through != "" {
		return s.bills.through
	}
	return s.now().AddDate(0, 0, -1).Format(billDateLayout)
}

// PublishBills makes every day up to and including through available ("today" is
// today's China date, so a test can reconcile the current day early); an empty through
// restores the default, every day before today.
func (s *Simulator) PublishBills(through string) error {
	if through == "today" {
		through = s.now().Format(billDateLayout)
	}
	if through != "" {
		if _, err := time.ParseInLocation(billDateLayout, through, s.loc); err != nil {
			return fmt.Errorf("alipaysim: through %q is not yyyy-MM-dd", through)
		}
	}
	s.bills.mu.Lock()
	s.bills.through = through
	s.bills.mu.Unlock()
	return nil
}

// CorruptBill plants a fault in the bill of date (yyyy-MM-dd). Faults apply in the order
// planted, every time the bill is downloaded.
func (s *Simulator) CorruptBill(date string, c BillCorruption) error {
	if _, err := time.ParseInLocation(billDateLayout, date, s.loc); err != nil {
		return fmt.Errorf("alipaysim: bill date %q is not yyyy-MM-dd", date)
	}
	if c.AppID == "" {
		c.AppID = s.cfg.AppID
	}
	switch c.Op {
	case CorruptDrop:
		if c.OutTradeNo == "" {
			return errors.New("alipaysim: drop needs out_trade_no")
		}
	case CorruptAmount, CorruptAdd, CorruptReceived:
		if _, err := parseYuan(c.Amount); err != nil {
			return fmt.Errorf("alipaysim: %s needs amount: %w", c.Op, err)
		}
		if c.Op != CorruptAdd && c.OutTradeNo == "" {
			return fmt.Errorf("alipaysim: %s needs out_trade_no", c.Op)
		}
	default:
		return fmt.Errorf("alipaysim: unknown bill corruption op %q (drop, amount, received, add)", c.Op)
	}
	s.bills.mu.Lock()
	defer s.bills.mu.Unlock()
	k := c.AppID + "/" + date
	s.bills.corruptions[k] = append(s.bills.corruptions[k], c)
	return nil
}

// BillStatus returns the publication setting and the planted faults.
func (s *Simulator) BillStatus() BillStatus {
	last := s.lastPublished()
	s.bills.mu.Lock()
	defer s.bills.mu.Unlock()
	st := BillStatus{PublishedThrough: s.bills.through, LastAvailable: last}
	if len(s.bills.corruptions) > 0 {
		st.Corruptions = map[string][]BillCorruption{}
		for k, v := range s.bills.corruptions {
			st.Corruptions[k] = slices.Clone(v)
		}
	}
	return st
}

// apiBillDownloadURL is alipay.data.dataservice.bill.downloadurl.query.
func (s *Simulator) apiBillDownloadURL(r *http.Request, a *app, biz bizContent, _ url.Values) fields {
	if bt := biz["bill_type"]; bt != "trade" {
		return invalidArgs("isv.invalid-parameter", "参数无效: bill_type must be trade (signcustomer is not simulated)")
	}
	date := biz["bill_date"]
	day, err := time.ParseInLocation(billDateLayout, date, s.loc)
	if err != nil {
		return invalidArgs("isv.invalid-parameter", "参数无效: bill_date must be yyyy-MM-dd")
	}
	if date > s.lastPublished() {
		return bizFailure("isp.bill_not_exist", "账单不存在")
	}
	exp := strconv.FormatInt(s.now().Add(billURLTTL).Unix(), 10)
	q := url.Values{
		"bizType": {"trade"}, "appId": {a.id}, "bizDates": {day.Format("20060102")},
		"fileType": {"csv.zip"}, "timestamp": {exp},
	}
	q.Set("token", s.billToken(a.id, day.Format("20060102"), exp))
	return success().add("bill_download_url", s.baseURL(r)+ControlPrefix+"/bills/downloadBillFile.resource?"+q.Encode())
}

func (s *Simulator) billToken(appID, day, exp string) string {
	m := hmac.New(sha256.New, s.bills.key)
	m.Write([]byte(appID + "|" + day + "|" + exp))
	return hex.EncodeToString(m.Sum(nil))
}

// billRoutes adds the bill download and the bill control API to mux.
func (s *Simulator) billRoutes(mux *http.ServeMux) {
	p := ControlPrefix
	mux.HandleFunc("GET "+p+"/bills/downloadBillFile.resource", s.serveBillDownload)
	mux.HandleFunc("GET "+p+"/bills", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.BillStatus())
	})
	mux.HandleFunc("POST "+p+"/bills/publish", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Through string `json:"through"`
		}
		if !decodeBody(w, r, &body) {
			return
		}
		if err := s.PublishBills(body.Through); err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, http.StatusOK, s.BillStatus())
	})
	mux.HandleFunc("POST "+p+"/bills/{date}/corrupt", func(w http.ResponseWriter, r *http.Request) {
		var c BillCorruption
		if !decodeBody(w, r, &c) {
			return
		}
		if err := s.CorruptBill(r.PathValue("date"), c); err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, http.StatusOK, s.BillStatus())
	})
	mux.HandleFunc("GET "+p+"/bills/{date}", func(w http.ResponseWriter, r *http.Request) {
		appID := r.URL.Query().Get("app_id")
		if appID == "" {
			appID = s.cfg.AppID
		}
		day, err := time.ParseInLocation(billDateLayout, r.PathValue("date"), s.loc)
		if err != nil || s.app(appID) == nil {
			writeError(w, http.StatusBadRequest, errors.New("want /_sim/bills/yyyy-MM-dd[?app_id=]"))
			return
		}
		s.writeBill(w, s.app(appID), day)
	})
}

func (s *Simulator) serveBillDownload(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	appID, day, exp := q.Get("appId"), q.Get("bizDates"), q.Get("timestamp")
	want := s.billToken(appID, day, exp)
	if !hmac.Equal([]byte(want), []byte(q.Get("token"))) {
		http.Error(w, "invalid token", http.StatusForbidden)
		return
	}
	if sec, err := strconv.ParseInt(exp, 10, 64); err != nil || s.now().Unix() > sec {
		http.Error(w, "download url expired", http.StatusForbidden)
		return
	}
	d, err := time.ParseInLocation("20060102", day, s.loc)
	a := s.app(appID)
	if err != nil || a == nil {
		http.Error(w, "no such bill", http.StatusNotFound)
		return
	}
	s.writeBill(w, a, d)
}

// writeBill answers the bill zip of app a for day.
func (s *Simulator) writeBill(w http.ResponseWriter, a *app, day time.Time) {
	rows := s.billRows(a, day)
	w.Header().Set("Content-Type", "application/zip")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s_%s.csv.zip"`, a.sellerID, day.Format("20060102")))
	h := BillHeader{Account: a.sellerID + "0156", Date: day, ExportedAt: s.now()}
	if err := WriteBill(w, h, slices.Values(rows)); err != nil {
		s.log.Warn("bill download interrupted", "app_id", a.id, "bill_date", day.Format(billDateLayout), "err", err)
	}
}

// billRows is every payment and refund of app a that completed on day (China time), in
// completion order, with the day's planted faults applied.
func (s *Simulator) billRows(a *app, day time.Time) []BillRow {
	date := day.Format(billDateLayout)
	var rows []BillRow
	s.mu.Lock()
	for _, t := range s.order {
		if t.app == a && !t.paidAt.IsZero() && t.paidAt.In(s.loc).Format(billDateLayout) == date {
			rows = append(rows, BillRow{
				TradeNo: t.tradeNo, OutTradeNo: t.outTradeNo, Type: BillTypeTrade, Subject: t.subject,
				CreatedAt: t.createdAt.In(s.loc), FinishedAt: t.paidAt.In(s.loc), Buyer: maskedLogon(t.buyerID),
				AmountFen: t.total, ReceivedFen: t.receipt(), MerchantDiscountFen: t.discount, RedPacketFen: t.redPacket,
				FeeFen: -serviceFee(t.receipt()),
			})
		}
	}
	for _, r := range s.refunds {
		if r.state == RefundSucceeded && r.t.app == a && r.refundedAt.In(s.loc).Format(billDateLayout) == date {
			row := refundRow(r.t.tradeNo, r.t.outTradeNo, r.t.subject, r.outRequestNo,
				r.t.createdAt.In(s.loc), r.refundedAt.In(s.loc), maskedLogon(r.t.buyerID), r.amount)
			row.MerchantDiscountFen, row.RedPacketFen = -r.discount, -r.redPacket
			row.ReceivedFen = -(r.amount - r.discount - r.redPacket)
			row.FeeFen = serviceFee(-row.ReceivedFen)
			rows = append(rows, row)
		}
	}
	s.mu.Unlock()
	slices.SortStableFunc(rows, func(x, y BillRow) int { return x.FinishedAt.Compare(y.FinishedAt) })

	s.bills.mu.Lock()
	faults := slices.Clone(s.bills.corruptions[a.id+"/"+date])
	s.bills.mu.Unlock()
	for _, c := range faults {
		rows = s.corrupt(rows, c, day)
	}
	return rows
}

// refundRow is the line of a refund of fen without discount: a refund line's amounts are
// negative, and the fee comes back.
func refundRow(tradeNo, outTradeNo, subject, reqNo string, created, at time.Time, buyer string, fen int64) BillRow {
	return BillRow{
		TradeNo: tradeNo, OutTradeNo: outTradeNo, Type: BillTypeRefund, Subject: subject,
		CreatedAt: created, FinishedAt: at, Buyer: buyer, AmountFen: -fen, ReceivedFen: -fen, OutRequestNo: reqNo,
		FeeFen: serviceFee(fen),
	}
}

// corrupt applies one planted fault to the day's bill rows.
func (s *Simulator) corrupt(rows []BillRow, c BillCorruption, day time.Time) []BillRow {
	fen, _ := parseYuan(c.Amount)
	match := func(r BillRow) bool {
		if r.OutTradeNo != c.OutTradeNo {
			return false
		}
		if c.OutRequestNo != "" {
			return r.Type == BillTypeRefund && r.OutRequestNo == c.OutRequestNo
		}
		return r.Type == BillTypeTrade
	}
	switch c.Op {
	case CorruptDrop:
		if i := slices.IndexFunc(rows, match); i >= 0 {
			rows = slices.Delete(rows, i, i+1)
		}
	case CorruptAmount:
		if i := slices.IndexFunc(rows, match); i >= 0 {
			r := &rows[i]
			if r.Type == BillTypeRefund {
				fen = -fen
			}
			r.AmountFen = fen
			r.ReceivedFen = fen - r.MerchantDiscountFen - r.RedPacketFen
			r.FeeFen = -serviceFee(r.ReceivedFen)
		}
	case CorruptReceived:
		if i := slices.IndexFunc(rows, match); i >= 0 {
			if rows[i].Type == BillTypeRefund {
				fen = -fen
			}
			rows[i].ReceivedFen = fen
		}
	case CorruptAdd:
		rows = append(rows, s.extraRow(c, fen, day))
	}
	return rows
}

// extraRow is a row of the day for a trade (or, with OutRequestNo, a refund) the
// simulator never had.
func (s *Simulator) extraRow(c BillCorruption, fen int64, day time.Time) BillRow {
	s.mu.Lock()
	at := time.Date(day.Year(), day.Month(), day.Day(), 12, 0, 0, 0, s.loc)
	tradeNo := s.nextTradeNoLocked(at)
	s.mu.Unlock()
	no, subject := c.OutTradeNo, c.Subject
	if no == "" {
		no = "SIMADD" + tradeNo[len(tradeNo)-12:]
	}
	if subject == "" {
		subject = "账单外交易"
	}
	if c.OutRequestNo != "" {
		return refundRow(tradeNo, no, subject, c.OutRequestNo, at, at, "sim***@sandbox.test", fen)
	}
	return BillRow{TradeNo: tradeNo, OutTradeNo: no, Type: BillTypeTrade, Subject: subject,
		CreatedAt: at, FinishedAt: at, Buyer: "sim***@sandbox.test", AmountFen: fen, ReceivedFen: fen, FeeFen: -serviceFee(fen)}
}

// BillRowsFunc adapts a generator of n rows to WriteBill, for bills too big to hold.
func BillRowsFunc(n int, row func(i int) BillRow) iter.Seq[BillRow] {
	return func(yield func(BillRow) bool) {
		for i := range n {
			if !yield(row(i)) {
				return
			}
		}
	}
}
