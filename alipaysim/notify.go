package alipaysim

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

type notifyKind string

// Notification kinds, as shown in NotificationAttempt.Kind.
const (
	notifyPay    notifyKind = "payment"
	notifyClose  notifyKind = "close"
	notifyRefund notifyKind = "refund"
	notifyFinish notifyKind = "finish"
)

// Release orders for held notifications.
const (
	ReleaseFIFO   = "fifo"
	ReleaseLIFO   = "lifo"
	ReleaseRandom = "random"
)

// NotificationAttempt is one delivery attempt of one asynchronous notification, as logged
// by the simulator. A dropped notification has a single entry with Dropped set.
type NotificationAttempt struct {
	NotifyID     string    `json:"notify_id"`
	Kind         string    `json:"kind"`
	AppID        string    `json:"app_id"`
	OutTradeNo   string    `json:"out_trade_no"`
	TradeNo      string    `json:"trade_no"`
	TradeStatus  string    `json:"trade_status"`
	NotifyURL    string    `json:"notify_url"`
	Attempt      int       `json:"attempt"`
	Copy         int       `json:"copy"`
	At           time.Time `json:"at"`
	StatusCode   int       `json:"status_code,omitempty"`
	ResponseBody string    `json:"response_body"`
	Error        string    `json:"error,omitempty"`
	Acknowledged bool      `json:"acknowledged"`
	Dropped      bool      `json:"dropped,omitempty"`
}

type notification struct {
	id         string
	kind       notifyKind
	appID      string
	outTradeNo string
	tradeNo    string
	status     string
	url        string
	body       string // the signed form, encoded once so every delivery is identical
}

func (n *notification) entry(attempt, copyNo int) NotificationAttempt {
	return NotificationAttempt{
		NotifyID: n.id, Kind: string(n.kind), AppID: n.appID, OutTradeNo: n.outTradeNo,
		TradeNo: n.tradeNo, TradeStatus: n.status, NotifyURL: n.url, Attempt: attempt, Copy: copyNo,
	}
}

// notifyLocked builds, signs and schedules the notification for the trade's new state.
func (s *Simulator) notifyLocked(t *trade, kind notifyKind, r *refund) {
	if t.notifyURL == "" || s.closed {
		return
	}
	now := s.now()
	form := s.notificationFormLocked(t, r, now)
	n := &notification{
		id: form.Get("notify_id"), kind: kind, appID: t.app.id, outTradeNo: t.outTradeNo,
		tradeNo: t.tradeNo, status: t.status, url: t.notifyURL,
	}
	if err := signNotification(s.signingKey(t.app), form); err != nil {
		s.log.Error("sign notification", "err", err)
		return
	}
	n.body = form.Encode()
	if s.notifyFaults.DropNext > 0 {
		s.notifyFaults.DropNext--
		e := n.entry(0, 0)
		e.At, e.Dropped = time.Now(), true
		s.attempts = append(s.attempts, e)
		s.log.Info("notification dropped by fault", "notify_id", n.id, "out_trade_no", n.outTradeNo, "trade_status", n.status)
		return
	}
	if s.notifyFaults.Hold {
		s.held = append(s.held, n)
		s.log.Info("notification held", "notify_id", n.id, "out_trade_no", n.outTradeNo, "trade_status", n.status)
		return
	}
	start := time.Now().Add(time.Duration(s.notifyFaults.DelayMS) * time.Millisecond)
	s.wg.Add(1)
	go s.deliver(n, start, 1)
}

func (s *Simulator) notificationFormLocked(t *trade, r *refund, now time.Time) url.Values {
	v := url.Values{}
	v.Set("notify_time", now.Format(timeLayout))
	v.Set("notify_type", "trade_status_sync")
	v.Set("notify_id", newNotifyID())
	v.Set("app_id", t.app.id)
	v.Set("auth_app_id", t.app.id)
	v.Set("charset", "utf-8")
	v.Set("version", "1.0")
	v.Set("trade_no", t.tradeNo)
	v.Set("out_trade_no", t.outTradeNo)
	v.Set("seller_id", t.app.sellerID)
	v.Set("trade_status", t.status)
	v.Set("total_amount", formatYuan(t.total))
	v.Set("subject", t.subject)
	v.Set("gmt_create", t.createdAt.In(s.loc).Format(timeLayout))
	if !t.paidAt.IsZero() {
		// The merchant funds its discounts: the buyer pays, and the merchant receives,
		// the total less them (see PayOptions).
		amt := formatYuan(t.receipt())
		v.Set("buyer_id", t.buyerID)
		v.Set("buyer_logon_id", maskedLogon(t.buyerID))
		v.Set("receipt_amount", amt)
		v.Set("invoice_amount", amt)
		v.Set("buyer_pay_amount", amt)
		v.Set("point_amount", "0.00")
		v.Set("gmt_payment", t.paidAt.In(s.loc).Format(timeLayout))
		v.Set("fund_bill_list", fundBillList(t))
	}
	if !t.closedAt.IsZero() {
		v.Set("gmt_close", t.closedAt.In(s.loc).Format(timeLayout))
	}
	if r != nil {
		v.Set("out_biz_no", r.outRequestNo)
		v.Set("refund_fee", formatYuan(t.refunded))
		v.Set("gmt_refund", r.refundedAt.In(s.loc).Format(refundLayout))
	}
	return v
}

// deliver runs the retry schedule from attempt `from` on; attempt k is due at
// start + the (scaled) sum of the first k-1 intervals. It stops at the first
// acknowledgement, after the last attempt, or when the simulator closes.
func (s *Simulator) deliver(n *notification, start time.Time, from int) {
	defer s.wg.Done()
	sched := s.cfg.NotifySchedule
	var offset time.Duration
	for k := 1; k <= len(sched)+1; k++ {
		if k > 1 {
			offset += sched[k-2]
		}
		if k < from {
			continue
		}
		if !s.sleep(time.Until(start.Add(s.scaled(offset)))) {
			return
		}
		if s.attempt(n, k) {
			return
		}
	}
	s.log.Warn("notification never acknowledged", "notify_id", n.id, "out_trade_no", n.outTradeNo, "attempts", len(sched)+1)
}

// attempt delivers one attempt, as several concurrent copies if the copies fault is set.
// It reports whether any copy was acknowledged with a body of exactly "success".
func (s *Simulator) attempt(n *notification, k int) bool {
	s.mu.Lock()
	copies := max(s.notifyFaults.Copies, 1)
	s.mu.Unlock()
	results := make([]NotificationAttempt, copies)
	var wg sync.WaitGroup
	for i := range copies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = s.post(n, k, i+1)
		}()
	}
	wg.Wait()
	acked := false
	s.mu.Lock()
	for _, e := range results {
		s.attempts = append(s.attempts, e)
		acked = acked || e.Acknowledged
	}
	s.mu.Unlock()
	return acked
}

func (s *Simulator) post(n *notification, k, copyNo int) NotificationAttempt {
	e := n.entry(k, copyNo)
	e.At = time.Now()
	ctx, cancel := s.opContext(s.cfg.NotifyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url, strings.NewReader(n.body))
	if err != nil {
		e.Error = err.Error()
		return e
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	req.Header.Set("User-Agent", "alipaysim/1.0")
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		e.Error = err.Error()
		s.log.Info("notification delivery failed", "notify_id", n.id, "out_trade_no", n.outTradeNo, "attempt", k, "err", err)
		return e
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		e.Error = fmt.Sprintf("read response: %v", err)
	}
	e.StatusCode = resp.StatusCode
	e.ResponseBody = string(body)
	e.Acknowledged = err == nil && string(body) == "success"
	s.log.Info("notification delivered", "notify_id", n.id, "out_trade_no", n.outTradeNo, "trade_status", n.status,
		"attempt", k, "copy", copyNo, "status", resp.StatusCode, "acknowledged", e.Acknowledged)
	return e
}

// Notifications returns the delivery log ordered by the time each attempt was sent.
func (s *Simulator) Notifications() []NotificationAttempt {
	s.mu.Lock()
	out := slices.Clone(s.attempts)
	s.mu.Unlock()
	slices.SortStableFunc(out, func(a, b NotificationAttempt) int { return a.At.Compare(b.At) })
	return out
}

// ReleaseNotifications delivers the held notifications in the given order (ReleaseFIFO,
// ReleaseLIFO or ReleaseRandom): the first attempts go out one after another in that
// order, then each continues on its own retry schedule. It returns how many were released.
// Hold stays as it was set.
func (s *Simulator) ReleaseNotifications(order string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	held := s.held
	switch order {
	case "", ReleaseFIFO:
	case ReleaseLIFO, "reverse":
		slices.Reverse(held)
	case ReleaseRandom:
		rand.Shuffle(len(held), func(i, j int) { held[i], held[j] = held[j], held[i] })
	default:
		return 0, fmt.Errorf("alipaysim: unknown release order %q", order)
	}
	if s.closed {
		return 0, ErrClosed
	}
	s.held = nil
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for _, n := range held {
			at := time.Now()
			if s.attempt(n, 1) {
				continue
			}
			s.wg.Add(1)
			go s.deliver(n, at, 2)
		}
	}()
	return len(held), nil
}

// fundBillList is the notification's fund_bill_list: what the buyer paid from the
// account, and the merchant's discount (MDISCOUNT) and red packet (MCOUPON) if any.
func fundBillList(t *trade) string {
	list := `[{"amount":"` + formatYuan(t.receipt()) + `","fundChannel":"ALIPAYACCOUNT"}`
	if t.discount > 0 {
		list += `,{"amount":"` + formatYuan(t.discount) + `","fundChannel":"MDISCOUNT"}`
	}
	if t.redPacket > 0 {
		list += `,{"amount":"` + formatYuan(t.redPacket) + `","fundChannel":"MCOUPON"}`
	}
	return list + "]"
}
