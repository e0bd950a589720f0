package checkout

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/runs"
)

// directCheckout is the checkout of a payment whose hand-off the channel lets paykit sign
// with no call to it (Alipay's page, wap and app pay: payment.Gateway's SignedHandOff);
// any other method is done=false before anything is written. The API signs the link,
// creates the pending payment with it
// in one transaction (the active-order unique index is the payment's identity: one
// pending payment per order), starts the payment's workflow, which adopts the committed
// row with no activity in its first task, and answers without waiting for any workflow
// task.
//
// done=false (and a nil error) hands the checkout to the workflow's checkout update
// instead: the order has a pending payment without a pay link yet (its run is opening
// the trade), or a run of the order is already running (a concurrent checkout's, one a
// notification started for this payment, or the previous payment's, still finishing),
// whose update answers which.
//
// A crash or an outage between the commit and the start leaves a pending payment with
// its pay link and no run, and an answer never given (a failed start is a 503): a retry
// of the checkout finds the payment by the unique index and starts its run; without one,
// the sweeper re-drives it and it is closed at its expiry (nobody has its pay link); and
// a notification for it (impossible without the link, but handled) starts its run
// through the inbox.
func (co *Checkout) directCheckout(ctx context.Context, in runs.PaymentInput) (res runs.CheckoutResult, done bool, err error) {
	now := time.Now()
	expireAt := now.Add(co.cfg.DirectTTL).UTC().Truncate(time.Second)
	no, err := newPaymentNo(now, in.Method.Channel())
	if err != nil {
		return res, true, &payment.Error{Code: payment.EUNAVAILABLE, Message: "the payment could not be set up right now, retry", Err: err}
	}
	app, err := co.gateways.For(ctx, in.TenantID, in.Method.Channel())
	if err != nil {
		return res, true, &payment.Error{Code: payment.EUNAVAILABLE, Message: "the payment could not be set up right now, retry",
			Err: fmt.Errorf("gateway of tenant %s: %w", in.TenantID, err)}
	}
	h, signed, err := app.Gateway.SignedHandOff(ctx, payment.TradeRequest{
		PaymentNo: no, Method: in.Method, Subject: in.Subject, Amount: in.Amount, ExpireAt: expireAt,
		ReturnURL: in.ReturnURL, QuitURL: in.QuitURL, OpenID: in.Payer.OpenID, ClientIP: in.Payer.ClientIP,
	})
	switch {
	case err != nil:
		return res, true, channelRefusal(err)
	case !signed:
		// Only the channel can open this method's trade: the workflow's checkout opens it.
		return res, false, nil
	}
	link := h.Link()
	p, existed, err := co.store.CreatePendingPayment(ctx, payment.NewPayment{
		PaymentNo: no, TenantID: in.TenantID, OrderID: in.OrderID, Amount: in.Amount, Currency: in.Currency,
		Subject: in.Subject, Method: in.Method, Repurchase: in.Repurchase, ExpireAt: expireAt,
		WorkflowID: payment.WorkflowID(in.TenantID, in.OrderID), PayLink: link, AlipayAppID: app.ID,
		QueryInterval: co.cfg.QueryInterval,
	})
	if err != nil {
		var pe *payment.Error
		if errors.As(err, &pe) {
			return res, true, err
		}
		return res, true, &payment.Error{Code: payment.EUNAVAILABLE, Message: "the payment could not be set up right now, retry", Err: err}
	}
	if existed {
		var done bool
		if link, done, err = co.joinExisting(ctx, in, p); !done || err != nil {
			return res, done, err
		}
	}
	res, opened := openedWith(p, link)
	started, err := co.orch.StartOpened(ctx, runs.PaymentInput{
		TenantID: p.TenantID, OrderID: p.OrderID, Amount: p.Amount, Currency: p.Currency, Subject: p.Subject, Method: p.Method,
		ReturnURL: in.ReturnURL, QuitURL: in.QuitURL, Repurchase: p.Repurchase, PaymentNo: p.PaymentNo, Opened: opened,
	})
	if err != nil {
		return runs.CheckoutResult{}, true, err
	}
	if !started {
		return runs.CheckoutResult{}, false, nil
	}
	if p.Method.OrPage() != in.Method.OrPage() {
		// Its run is started (the payment is recovered either way), but a checkout never
		// gets a link of a method it did not ask for: it is told which one the order is
		// being paid by.
		return runs.CheckoutResult{}, true, methodConflict(p)
	}
	return res, true, nil
}

// joinExisting is the pay link of the pending payment another checkout of the order
// created first: done=false (and no link) hands the checkout to the workflow's update
// (the payment is no longer pending, or has no link yet), and a payment of another amount
// is a conflict.
func (co *Checkout) joinExisting(ctx context.Context, in runs.PaymentInput, p payment.Payment) (link string, done bool, err error) {
	if p.Status != payment.StatusPending {
		return "", false, nil
	}
	if p.Amount != in.Amount || p.Currency != in.Currency {
		return "", true, &payment.Error{Code: payment.ECONFLICT,
			Message: fmt.Sprintf("order %s is already being paid with %d fen %s (payment %s)", p.OrderID, p.Amount, p.Currency, p.PaymentNo)}
	}
	if link, err = co.store.PendingPayLink(ctx, p.TenantID, p.PaymentNo); err != nil || link == "" {
		return "", false, nil
	}
	return link, true, nil
}

// openedWith is the checkout's answer and the run's opened payment for the pending
// payment p and its link. The link is of the method the payment was created with, which
// a checkout that found another checkout's payment may not share.
func openedWith(p payment.Payment, link string) (runs.CheckoutResult, *runs.OpenedPayment) {
	opened := &runs.OpenedPayment{ExpireAt: p.ExpireAt.UTC(), QueryScheduled: p.QueryScheduled}
	res := runs.CheckoutResult{PaymentNo: p.PaymentNo, TenantID: p.TenantID, OrderID: p.OrderID, Status: payment.StatusPending,
		Amount: p.Amount, Currency: p.Currency, Subject: p.Subject, ExpireAt: p.ExpireAt.UTC()}
	h := payment.HandOffOf(p.Method, link)
	opened.PayURL, opened.QRCode, opened.OrderString = h.PayURL, h.QRCode, h.OrderString
	res.PayURL, res.QRCode, res.OrderString = h.PayURL, h.QRCode, h.OrderString
	return res, opened
}

// channelRefusal maps a failure to sign a pay link: the adapter's refusal of the request
// is the client's to fix, anything else is retryable.
func channelRefusal(err error) error {
	var ce *payment.ChannelError
	if errors.As(err, &ce) && !ce.Retryable {
		return &payment.Error{Code: payment.ECHANNEL, Message: ce.Error(), Err: err}
	}
	return &payment.Error{Code: payment.EUNAVAILABLE, Message: "the payment could not be set up right now, retry", Err: err}
}

// newPaymentNo is a new out_trade_no at ch: P, the UTC date and the channel's count of
// random hex digits, the shape the workflow gives the payments it creates.
func newPaymentNo(now time.Time, ch payment.Channel) (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "P" + now.UTC().Format("20060102") + hex.EncodeToString(b[:])[:ch.PaymentNoRandomDigits()], nil
}

// methodConflict refuses a checkout of another method than the order's pending payment's.
func methodConflict(p payment.Payment) error {
	return &payment.Error{Code: payment.ECONFLICT, Message: fmt.Sprintf(
		"order %s is already being paid by a %s payment (%s); pay that one, or cancel it before a checkout of another method",
		p.OrderID, p.Method.OrPage(), p.PaymentNo)}
}
