package wechatpaysim

import (
	"fmt"
	"time"
)

// PayOptions describes how a buyer pays an order.
type PayOptions struct {
	// OpenID is the payer. A JSAPI order can only be paid by its payer.openid (the
	// default); other orders default to DefaultOpenID.
	OpenID string `json:"openid"`
	// DiscountFen is a merchant coupon: the buyer pays total less it (payer_total), and
	// promotion_detail shows it. It must be less than the total.
	DiscountFen int64 `json:"discount_fen"`
	// BankType is the paying instrument (default OTHERS).
	BankType string `json:"bank_type"`
}

// findLocked finds an order by out_trade_no, in mchid's orders or, with mchid empty, in
// the only merchant that has it.
func (s *Simulator) findLocked(mchid, outTradeNo string) (*order, error) {
	if mchid != "" {
		if o := s.orders[mchid][outTradeNo]; o != nil {
			return o, nil
		}
		return nil, ErrOrderNotFound
	}
	var found *order
	for _, byNo := range s.orders {
		if o := byNo[outTradeNo]; o != nil {
			if found != nil {
				return nil, ErrAmbiguous
			}
			found = o
		}
	}
	if found == nil {
		return nil, ErrOrderNotFound
	}
	return found, nil
}

// Order returns one order as the control API shows it (mchid may be empty when only
// one merchant has that out_trade_no).
func (s *Simulator) Order(mchid, outTradeNo string) (Order, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, err := s.findLocked(mchid, outTradeNo)
	if err != nil {
		return Order{}, err
	}
	s.expireLocked(o, s.now())
	return o.view(s.cfg.PublicURL), nil
}

// Orders lists every order (of mchid, if not empty) in the order they were placed.
func (s *Simulator) Orders(mchid string) []Order {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	out := []Order{}
	for _, o := range s.list {
		if mchid != "" && o.m.id != mchid {
			continue
		}
		s.expireLocked(o, now)
		out = append(out, o.view(s.cfg.PublicURL))
	}
	return out
}

// Pay pays an order as its buyer would, and sends the TRANSACTION.SUCCESS notification.
func (s *Simulator) Pay(mchid, outTradeNo string, opts PayOptions) (Order, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, err := s.findLocked(mchid, outTradeNo)
	if err != nil {
		return Order{}, err
	}
	if err := s.payLocked(o, opts); err != nil {
		return o.view(s.cfg.PublicURL), err
	}
	return o.view(s.cfg.PublicURL), nil
}

func (s *Simulator) payLocked(o *order, opts PayOptions) error {
	now := s.now()
	s.expireLocked(o, now)
	if o.state != StateNotPay {
		return fmt.Errorf("%w: %s", ErrNotPayable, o.state)
	}
	if opts.DiscountFen < 0 || opts.DiscountFen >= o.total {
		return ErrBadDiscount
	}
	payer := opts.OpenID
	switch {
	case o.tradeType == TradeTypeJSAPI && payer == "":
		payer = o.openID
	case o.tradeType == TradeTypeJSAPI && payer != o.openID:
		return fmt.Errorf("%w: a JSAPI order is paid by its payer.openid %s, not %s", ErrNotPayable, o.openID, payer)
	case payer == "":
		payer = DefaultOpenID
	}
	bank := opts.BankType
	if bank == "" {
		bank = "OTHERS"
	}
	o.state, o.paidAt, o.payerOpenID, o.discount, o.bankType = StateSuccess, now, payer, opts.DiscountFen, bank
	o.transactionID = s.nextTransactionIDLocked(now)
	s.byTxID[o.transactionID] = o
	s.log.Info("order paid", "mchid", o.m.id, "out_trade_no", o.outTradeNo, "transaction_id", o.transactionID)
	s.notifyLocked(o, "TRANSACTION.SUCCESS", "支付成功")
	return nil
}

// FailPayment ends an unpaid order in PAYERROR (支付失败), as when the buyer's bank
// refuses. WeChat Pay sends no notification for it.
func (s *Simulator) FailPayment(mchid, outTradeNo string) (Order, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, err := s.findLocked(mchid, outTradeNo)
	if err != nil {
		return Order{}, err
	}
	now := s.now()
	s.expireLocked(o, now)
	if o.state != StateNotPay {
		return o.view(s.cfg.PublicURL), fmt.Errorf("%w: %s", ErrNotPayable, o.state)
	}
	o.state = StatePayError
	o.transactionID = s.nextTransactionIDLocked(now)
	s.byTxID[o.transactionID] = o
	return o.view(s.cfg.PublicURL), nil
}

// Expire closes an unpaid order as if its time_expire had passed.
func (s *Simulator) Expire(mchid, outTradeNo string) (Order, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, err := s.findLocked(mchid, outTradeNo)
	if err != nil {
		return Order{}, err
	}
	if o.state != StateNotPay {
		return o.view(s.cfg.PublicURL), fmt.Errorf("%w: %s", ErrNotPayable, o.state)
	}
	o.expireAt = s.now()
	s.expireLocked(o, o.expireAt)
	return o.view(s.cfg.PublicURL), nil
}

// OrderNotifyFaults disturbs the notifications of one order.
type OrderNotifyFaults struct {
	// DelayMS holds the first delivery of the order's next notification back (real ms).
	DelayMS int64 `json:"delay_ms"`
	// FailNext loses the answers of the order's next N deliveries: the merchant gets
	// them, but WeChat Pay counts them failed and redelivers on its schedule.
	FailNext int `json:"fail_next"`
}

// SetOrderNotifyFaults sets the notification faults of one order.
func (s *Simulator) SetOrderNotifyFaults(mchid, outTradeNo string, f OrderNotifyFaults) (Order, error) {
	if f.DelayMS < 0 || f.FailNext < 0 {
		return Order{}, fmt.Errorf("wechatpaysim: notification faults must not be negative")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, err := s.findLocked(mchid, outTradeNo)
	if err != nil {
		return Order{}, err
	}
	o.notifyDelay, o.notifyFailNext = time.Duration(f.DelayMS)*time.Millisecond, f.FailNext
	return o.view(s.cfg.PublicURL), nil
}
