package alipaysim

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Alipay trade_status values.
const (
	StatusWaitBuyerPay = "WAIT_BUYER_PAY"
	StatusClosed       = "TRADE_CLOSED"
	StatusSuccess      = "TRADE_SUCCESS"
	StatusFinished     = "TRADE_FINISHED"
)

// Reasons a trade was closed, as shown by the control API.
const (
	CloseReasonAPI      = "closed_by_api"  // alipay.trade.close
	CloseReasonExpired  = "expired"        // time_expire passed, or POST /_sim/trades/{no}/expire
	CloseReasonRefunded = "fully_refunded" // refunds reached the paid amount
)

// Trade is a snapshot of one simulated trade, as returned by the control API.
type Trade struct {
	AppID          string    `json:"app_id"`
	OutTradeNo     string    `json:"out_trade_no"`
	TradeNo        string    `json:"trade_no"`
	Method         string    `json:"method"`
	Subject        string    `json:"subject"`
	TradeStatus    string    `json:"trade_status"`
	TotalAmount    string    `json:"total_amount"`
	TotalFen       int64     `json:"total_fen"`
	RefundedAmount string    `json:"refunded_amount"`
	RefundedFen    int64     `json:"refunded_fen"`
	BuyerID        string    `json:"buyer_id,omitempty"`
	NotifyURL      string    `json:"notify_url,omitempty"`
	ReturnURL      string    `json:"return_url,omitempty"`
	QuitURL        string    `json:"quit_url,omitempty"` // wap pay: where a buyer who gives up goes
	QRCode         string    `json:"qr_code,omitempty"`
	CloseReason    string    `json:"close_reason,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
	ExpireAt       time.Time `json:"expire_at,omitzero"`
	PaidAt         time.Time `json:"paid_at,omitzero"`
	ClosedAt       time.Time `json:"closed_at,omitzero"`

	// MerchantDiscountFen (商家优惠) and RedPacketFen (商家红包) are what the merchant
	// funded of a paid trade (see PayOptions); ReceiptFen (receipt_amount, 商家实收) is
	// the total less both.
	MerchantDiscountFen int64 `json:"merchant_discount_fen,omitempty"`
	RedPacketFen        int64 `json:"red_packet_fen,omitempty"`
	ReceiptFen          int64 `json:"receipt_fen,omitempty"`
}

// Refund is a snapshot of one refund, as returned by the control API.
type Refund struct {
	AppID        string    `json:"app_id"`
	OutTradeNo   string    `json:"out_trade_no"`
	TradeNo      string    `json:"trade_no"`
	OutRequestNo string    `json:"out_request_no"`
	RefundAmount string    `json:"refund_amount"`
	RefundFen    int64     `json:"refund_fen"`
	Reason       string    `json:"reason,omitempty"`
	Replays      int       `json:"replays"`
	State        string    `json:"state"`
	CreatedAt    time.Time `json:"created_at"`

	// MerchantDiscountFen and RedPacketFen are the refund's share of the trade's
	// merchant-funded parts: the merchant gives back RefundFen less both.
	MerchantDiscountFen int64 `json:"merchant_discount_fen,omitempty"`
	RedPacketFen        int64 `json:"red_packet_fen,omitempty"`
}

type trade struct {
	app         *app
	outTradeNo  string
	tradeNo     string
	method      string
	productCode string
	subject     string
	total       int64
	refunded    int64
	processing  int64 // refunds answered fund_change "N" that have not settled yet
	status      string
	buyerID     string
	notifyURL   string
	returnURL   string
	quitURL     string
	qrCode      string
	closeReason string
	createdAt   time.Time
	expireAt    time.Time
	paidAt      time.Time
	closedAt    time.Time
	refunds     map[string]*refund
	timer       *time.Timer

	// discount and redPacket are the merchant-funded parts of the payment (see
	// PayOptions); discountBack and redPacketBack how much of them refunds gave back.
	discount, redPacket         int64
	discountBack, redPacketBack int64
}

type refund struct {
	t            *trade
	outRequestNo string
	amount       int64
	reason       string
	replays      int
	createdAt    time.Time
	// state is RefundSucceeded, or RefundProcessing until settleRefund, or RefundFailed.
	state string
	// refundedAt is when the money moved (createdAt, or when a processing refund settled).
	refundedAt time.Time
	// visibleAt is when the refund query first sees the refund (its success plus the
	// query lag), in real time.
	visibleAt time.Time

	// discount and redPacket are the refund's share of the trade's merchant-funded
	// parts, set when it succeeds (see refundLocked).
	discount, redPacket int64
}

// Refund states, as GET /_sim/refunds shows them.
const (
	RefundSucceeded  = "succeeded"
	RefundProcessing = "processing"
	RefundFailed     = "failed"
)

func (t *trade) snapshot() Trade {
	return Trade{
		AppID:          t.app.id,
		OutTradeNo:     t.outTradeNo,
		TradeNo:        t.tradeNo,
		Method:         t.method,
		Subject:        t.subject,
		TradeStatus:    t.status,
		TotalAmount:    formatYuan(t.total),
		TotalFen:       t.total,
		RefundedAmount: formatYuan(t.refunded),
		RefundedFen:    t.refunded,
		BuyerID:        t.buyerID,
		NotifyURL:      t.notifyURL,
		ReturnURL:      t.returnURL,
		QuitURL:        t.quitURL,
		QRCode:         t.qrCode,
		CloseReason:    t.closeReason,
		CreatedAt:      t.createdAt,
		ExpireAt:       t.expireAt,
		PaidAt:         t.paidAt,
		ClosedAt:       t.closedAt,

		MerchantDiscountFen: t.discount,
		RedPacketFen:        t.redPacket,
		ReceiptFen:          t.receipt(),
	}
}

func (r *refund) snapshot() Refund {
	return Refund{
		AppID:        r.t.app.id,
		OutTradeNo:   r.t.outTradeNo,
		TradeNo:      r.t.tradeNo,
		OutRequestNo: r.outRequestNo,
		RefundAmount: formatYuan(r.amount),
		RefundFen:    r.amount,
		Reason:       r.reason,
		Replays:      r.replays,
		State:        r.state,
		CreatedAt:    r.createdAt,

		MerchantDiscountFen: r.discount,
		RedPacketFen:        r.redPacket,
	}
}

func (t *trade) stopTimer() {
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
}

func (t *trade) paid() bool { return t.status == StatusSuccess || t.status == StatusFinished }

// receipt is what the merchant received of a paid trade (receipt_amount, 商家实收): the
// total less the parts it funded itself. Zero before the payment.
func (t *trade) receipt() int64 {
	if t.paidAt.IsZero() {
		return 0
	}
	return t.total - t.discount - t.redPacket
}

// newTradeLocked registers a trade and arms its expiry timer.
func (s *Simulator) newTradeLocked(t *trade) {
	if s.trades[t.app.id] == nil {
		s.trades[t.app.id] = make(map[string]*trade)
	}
	s.trades[t.app.id][t.outTradeNo] = t
	s.byTradeNo[t.tradeNo] = t
	s.order = append(s.order, t)
	t.refunds = make(map[string]*refund)
	s.armExpiryLocked(t)
	s.log.Info("trade created", "app_id", t.app.id, "out_trade_no", t.outTradeNo, "trade_no", t.tradeNo,
		"method", t.method, "total_amount", formatYuan(t.total), "expire_at", t.expireAt)
}

// armExpiryLocked closes the trade by itself once time_expire passes, so that the
// TRADE_CLOSED notification goes out on time. Every access also checks expiry lazily.
func (s *Simulator) armExpiryLocked(t *trade) {
	if t.expireAt.IsZero() || t.status != StatusWaitBuyerPay {
		return
	}
	t.stopTimer()
	t.timer = time.AfterFunc(time.Until(t.expireAt), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed || t.status != StatusWaitBuyerPay {
			return
		}
		if time.Now().Before(t.expireAt) {
			s.armExpiryLocked(t) // woke a little early: wall and monotonic clocks differ
			return
		}
		s.expireLocked(t, s.now())
	})
}

// expireLocked closes an unpaid trade whose time_expire has passed.
func (s *Simulator) expireLocked(t *trade, now time.Time) {
	if t.status == StatusWaitBuyerPay && !t.expireAt.IsZero() && !now.Before(t.expireAt) {
		s.closeLocked(t, t.expireAt.In(s.loc), CloseReasonExpired)
	}
}

func (s *Simulator) closeLocked(t *trade, at time.Time, reason string) {
	t.stopTimer()
	t.status = StatusClosed
	t.closedAt = at
	t.closeReason = reason
	s.log.Info("trade closed", "app_id", t.app.id, "out_trade_no", t.outTradeNo, "trade_no", t.tradeNo, "reason", reason)
	if !s.cfg.PaymentNotificationsOnly {
		s.notifyLocked(t, notifyClose, nil)
	}
}

// PayOptions are how a buyer pays a trade: who, and the discounts the merchant funds.
//
// The simulator's model of a discount is the simplest one consistent with Alipay's bill:
// both parts are funded by the merchant, so the buyer pays, and the merchant receives
// (receipt_amount, 商家实收), total_amount less MerchantDiscountFen (商家优惠) and
// RedPacketFen (商家红包消费金额); total_amount (订单金额) stays what the merchant asked
// for. Alipay-funded parts (支付宝红包, 集分宝, 支付宝优惠) are not simulated. The service
// fee is charged on what the merchant receives. A refund gives back a share of each part
// in proportion to the amount refunded, rounded down and settled on the last refund,
// so the trade's refunds together give back exactly what was funded.
type PayOptions struct {
	BuyerID             string // defaults to DefaultBuyerID
	MerchantDiscountFen int64  // 商家优惠, fen
	RedPacketFen        int64  // 商家红包, fen
}

// payLocked is the buyer paying without discount. It fails unless the trade is
// WAIT_BUYER_PAY.
func (s *Simulator) payLocked(t *trade, buyerID string, now time.Time) error {
	return s.payWithLocked(t, PayOptions{BuyerID: buyerID}, now)
}

// payWithLocked is the buyer paying as o says. It fails unless the trade is
// WAIT_BUYER_PAY and the discounts leave the buyer at least a fen to pay.
func (s *Simulator) payWithLocked(t *trade, o PayOptions, now time.Time) error {
	s.expireLocked(t, now)
	if t.status != StatusWaitBuyerPay {
		return fmt.Errorf("%w: %s is %s", ErrNotPayable, t.outTradeNo, t.status)
	}
	if o.MerchantDiscountFen < 0 || o.RedPacketFen < 0 || o.MerchantDiscountFen+o.RedPacketFen >= t.total {
		return fmt.Errorf("%w: merchant discount %d fen and red packet %d fen on a trade of %d fen (each at least 0, together less than the total)",
			ErrBadDiscount, o.MerchantDiscountFen, o.RedPacketFen, t.total)
	}
	buyerID := o.BuyerID
	if buyerID == "" {
		buyerID = DefaultBuyerID
	}
	t.stopTimer()
	t.status = StatusSuccess
	t.buyerID = buyerID
	t.paidAt = now
	t.discount, t.redPacket = o.MerchantDiscountFen, o.RedPacketFen
	s.log.Info("trade paid", "app_id", t.app.id, "out_trade_no", t.outTradeNo, "trade_no", t.tradeNo,
		"buyer_id", buyerID, "total_amount", formatYuan(t.total), "merchant_discount", formatYuan(t.discount),
		"red_packet", formatYuan(t.redPacket))
	s.notifyLocked(t, notifyPay, nil)
	return nil
}

// findLocked looks a trade up by out_trade_no across apps (appID optional).
func (s *Simulator) findLocked(appID, outTradeNo string) (*trade, error) {
	if appID != "" {
		if t := s.trades[appID][outTradeNo]; t != nil {
			return t, nil
		}
		return nil, fmt.Errorf("%w: %s", ErrTradeNotFound, outTradeNo)
	}
	var found *trade
	for _, m := range s.trades {
		if t := m[outTradeNo]; t != nil {
			if found != nil {
				return nil, fmt.Errorf("%w: %s", ErrAmbiguous, outTradeNo)
			}
			found = t
		}
	}
	if found == nil {
		return nil, fmt.Errorf("%w: %s", ErrTradeNotFound, outTradeNo)
	}
	return found, nil
}

// Pay pays a WAIT_BUYER_PAY trade as a buyer would (buyerID defaults to DefaultBuyerID)
// and sends the TRADE_SUCCESS notification. appID may be empty when out_trade_no is
// unique across apps.
func (s *Simulator) Pay(appID, outTradeNo, buyerID string) (Trade, error) {
	return s.PayWith(appID, outTradeNo, PayOptions{BuyerID: buyerID})
}

// PayWith pays a WAIT_BUYER_PAY trade as Pay does, with the merchant-funded discounts
// of o (see PayOptions). Discounts that leave the buyer nothing to pay are
// ErrBadDiscount.
func (s *Simulator) PayWith(appID, outTradeNo string, o PayOptions) (Trade, error) {
	return s.withTrade(appID, outTradeNo, func(t *trade) error { return s.payWithLocked(t, o, s.now()) })
}

// Expire closes a WAIT_BUYER_PAY trade as if its time_expire had passed.
func (s *Simulator) Expire(appID, outTradeNo string) (Trade, error) {
	return s.withTrade(appID, outTradeNo, func(t *trade) error {
		s.expireLocked(t, s.now())
		if t.status != StatusWaitBuyerPay {
			if t.closeReason == CloseReasonExpired {
				return nil
			}
			return fmt.Errorf("%w: %s is %s", ErrNotPayable, outTradeNo, t.status)
		}
		s.closeLocked(t, s.now(), CloseReasonExpired)
		return nil
	})
}

// Finish moves a TRADE_SUCCESS trade to TRADE_FINISHED (the refund window ended) and
// sends the TRADE_FINISHED notification.
func (s *Simulator) Finish(appID, outTradeNo string) (Trade, error) {
	return s.withTrade(appID, outTradeNo, func(t *trade) error {
		if t.status != StatusSuccess {
			return fmt.Errorf("alipaysim: %s is %s, not %s", outTradeNo, t.status, StatusSuccess)
		}
		t.status = StatusFinished
		t.closedAt = s.now()
		if !s.cfg.PaymentNotificationsOnly {
			s.notifyLocked(t, notifyFinish, nil)
		}
		return nil
	})
}

// PayOnClose arms the pay/close race: when the next alipay.trade.close for outTradeNo
// arrives while the trade is still WAIT_BUYER_PAY, the buyer pays an instant before the
// close is processed, so the close answers ACQ.TRADE_STATUS_ERROR.
func (s *Simulator) PayOnClose(outTradeNo, buyerID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.payOnClose[outTradeNo] = buyerID
}

// Trade returns the trade with that out_trade_no (appID optional).
func (s *Simulator) Trade(appID, outTradeNo string) (Trade, error) {
	return s.withTrade(appID, outTradeNo, func(t *trade) error {
		s.expireLocked(t, s.now())
		return nil
	})
}

// withTrade runs fn on one trade under the simulator's lock and returns the trade as fn
// left it, with fn's error.
func (s *Simulator) withTrade(appID, outTradeNo string, fn func(t *trade) error) (Trade, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.findLocked(appID, outTradeNo)
	if err != nil {
		return Trade{}, err
	}
	err = fn(t)
	return t.snapshot(), err
}

// Trades returns every trade in creation order.
func (s *Simulator) Trades() []Trade {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	out := make([]Trade, 0, len(s.order))
	for _, t := range s.order {
		s.expireLocked(t, now)
		out = append(out, t.snapshot())
	}
	return out
}

// Refunds returns every refund in creation order.
func (s *Simulator) Refunds() []Refund {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Refund, 0, len(s.refunds))
	for _, r := range s.refunds {
		out = append(out, r.snapshot())
	}
	return out
}

// validOutTradeNo reports whether s is a legal out_trade_no: 1–64 letters, digits or underscores.
func validOutTradeNo(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// maxFen is Alipay's largest single trade: 100,000,000.00 yuan.
const maxFen = 100_000_000_00

// parseYuan converts a decimal yuan string to fen without floating point. Alipay accepts
// "10", "9.9" and "9.90"; signs, exponents and more than two decimals are refused.
func parseYuan(s string) (int64, error) {
	intPart, frac, hasDot := strings.Cut(s, ".")
	if intPart == "" || len(intPart) > 12 || (hasDot && (frac == "" || len(frac) > 2)) {
		return 0, fmt.Errorf("malformed amount %q", s)
	}
	for _, r := range intPart + frac {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("malformed amount %q", s)
		}
	}
	yuan, err := strconv.ParseInt(intPart, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("malformed amount %q: %w", s, err)
	}
	for len(frac) < 2 {
		frac += "0"
	}
	fen, _ := strconv.ParseInt(frac, 10, 64)
	return yuan*100 + fen, nil
}

// parseTradeAmount parses an amount that must lie in [0.01, 100000000.00].
func parseTradeAmount(s string) (int64, error) {
	fen, err := parseYuan(s)
	if err != nil {
		return 0, err
	}
	if fen < 1 || fen > maxFen {
		return 0, errors.New("amount out of range [0.01, 100000000]")
	}
	return fen, nil
}

func formatYuan(fen int64) string {
	sign := ""
	if fen < 0 {
		sign, fen = "-", -fen
	}
	return fmt.Sprintf("%s%d.%02d", sign, fen/100, fen%100)
}

// parseExpiry works out when an unpaid trade closes: time_expire (absolute, China time)
// wins over timeout_express (relative to creation), which defaults to 15d.
func parseExpiry(biz bizContent, created time.Time, loc *time.Location) (time.Time, error) {
	if te := biz["time_expire"]; te != "" {
		t, err := time.ParseInLocation(timeLayout, te, loc)
		if err != nil {
			return time.Time{}, fmt.Errorf("malformed time_expire %q", te)
		}
		return t, nil
	}
	te := biz["timeout_express"]
	if te == "" {
		te = "15d"
	}
	if te == "1c" {
		y, m, d := created.Date()
		return time.Date(y, m, d+1, 0, 0, 0, 0, loc), nil
	}
	n, err := strconv.Atoi(te[:len(te)-1])
	if err != nil || n <= 0 {
		return time.Time{}, fmt.Errorf("malformed timeout_express %q", te)
	}
	switch te[len(te)-1] {
	case 'm':
		return created.Add(time.Duration(n) * time.Minute), nil
	case 'h':
		return created.Add(time.Duration(n) * time.Hour), nil
	case 'd':
		return created.Add(time.Duration(n) * 24 * time.Hour), nil
	}
	return time.Time{}, fmt.Errorf("malformed timeout_express %q", te)
}
