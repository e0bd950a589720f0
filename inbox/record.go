package inbox

import (
	"context"
	"net/url"
	"time"

	"github.com/paykit/paykit/alipay"
	"github.com/paykit/paykit/payment"
)

// Notification outcomes recorded on channel_notifications.
const (
	outcomeReceived     = "received"
	outcomeSignalled    = "signalled"
	outcomeRedriven     = "redriven"
	outcomeAlreadyPaid  = "already_paid"
	outcomeIgnored      = "ignored"
	outcomeAnomaly      = "anomaly_recorded"
	outcomeRejectPrefix = "rejected: "
	// Outcomes of refund notifications, which never change the payment.
	outcomeRefundFinal   = "refund_already_final"
	outcomeRefundStarted = "refund_workflow_started"
	outcomeRefundUnknown = "refund_unknown"
)

// legacyFinal reports whether a notification recorded before the inbox (no hand-over due,
// never settled) was handled then: it was answered failure until it was.
func legacyFinal(o string) bool {
	switch o {
	case outcomeSignalled, outcomeRedriven, outcomeAlreadyPaid, outcomeIgnored, outcomeAnomaly,
		outcomeRefundFinal, outcomeRefundStarted, outcomeRefundUnknown:
		return true
	}
	return false
}

// Unreadable counts a notification of ch whose body could not be read: it is answered
// failure, so that the channel delivers it again.
func (ib *Inbox) Unreadable(ch payment.Channel) {
	ib.metrics.callbacksOf(ch).WithLabelValues("unreadable").Inc()
}

// Receive takes the raw body of Alipay's asynchronous notification and reports whether
// to answer success. A verified notification is answered success as soon as it is
// recorded in MySQL (one INSERT, whose unique notify_id also dedupes Alipay's
// redeliveries): from then on paykit owns it, hands it to its payment in the background
// and again until its effect is seen. Anything refused or not recorded is answered
// failure, so that Alipay delivers it again. requestID names the request in log lines.
func (ib *Inbox) Receive(ctx context.Context, raw []byte, requestID string) bool {
	form, err := alipay.ParseNotificationBody(raw)
	if err != nil {
		// Not a form, empty, or a parameter repeated (Alipay never sends one twice):
		// refused before any signature is checked, and nothing is stored.
		ib.metrics.callbacks.WithLabelValues("malformed").Inc()
		if keep, _ := ib.unverified.take("", time.Now()); keep {
			ib.log.ErrorContext(ctx, "alipay notification refused before verifying", "request_id", requestID, "err", err)
		}
		return false
	}
	n, err := ib.decodeNotification(ctx, payment.ChannelAlipay, payment.RawNotification{Body: raw})
	if err != nil {
		ib.keepUnverified(ctx, raw, form, requestID, err)
		return false
	}
	return ib.record(ctx, payment.ChannelAlipay, payment.RawNotification{Body: raw}, n)
}

// keepUnverified keeps a forged or tampered notification, or one for another app or
// seller, for audit without letting it claim the notify_id, and without letting it fill
// the database: only the start of its body, with the hash and length of all of it.
func (ib *Inbox) keepUnverified(ctx context.Context, raw []byte, form url.Values, requestID string, verr error) {
	ib.metrics.callbacks.WithLabelValues("unverified").Inc()
	ib.metrics.unverifiedBytes.Add(float64(len(raw)))
	keep, first := ib.unverified.take(form.Get("app_id"), time.Now())
	if !keep {
		// Past the sample: counted in the metrics only, never a row or a line each.
		if first {
			ib.log.WarnContext(ctx, "unverified alipay notifications beyond the sample are only counted this minute",
				"per_app_per_minute", unverifiedPerAppPerMinute, "per_minute", unverifiedPerMinute)
		}
		return
	}
	ib.log.ErrorContext(ctx, "alipay notification rejected", "request_id", requestID,
		"notify_id", form.Get("notify_id"), "payment_no", form.Get("out_trade_no"), "raw_len", len(raw), "err", verr)
	rejected := payment.ChannelNotification{
		Channel: "alipay", NotifyID: form.Get("notify_id"), PaymentNo: form.Get("out_trade_no"), TradeNo: form.Get("trade_no"),
		Verified: false, Outcome: outcomeRejectPrefix + verr.Error(), ReceivedAt: time.Now().UTC(),
	}
	rejected.KeepRaw(string(raw))
	if _, _, err := ib.store.RecordNotification(context.WithoutCancel(ctx), rejected); err != nil {
		ib.log.ErrorContext(ctx, "record rejected notification", "err", err)
	}
}

// record records a verified notification of ch, raw as it arrived with only the headers
// its signature needs, and queues its hand-over; it reports whether the notification is
// paykit's now (recorded, or recorded before).
func (ib *Inbox) record(ctx context.Context, ch payment.Channel, raw payment.RawNotification, n payment.Notification) bool {
	// The writes finish even if Alipay hangs up: the answer is lost, the row is not.
	wctx := context.WithoutCancel(ctx)
	now := time.Now().UTC()
	verified := payment.ChannelNotification{
		Channel: string(ch), NotifyID: n.NotifyID, PaymentNo: n.PaymentNo, TradeNo: n.TradeNo,
		Verified: true, Outcome: outcomeReceived, ReceivedAt: now, DispatchDueAt: now.Add(ib.cfg.SettleBound),
		Refund: n.IsRefund(), RawHeader: raw.Header,
	}
	verified.KeepRaw(string(raw.Body))
	rec, inserted, err := ib.store.RecordNotification(wctx, verified)
	if err != nil {
		ib.metrics.callbacksOf(ch).WithLabelValues("store_unavailable").Inc()
		ib.log.ErrorContext(ctx, "record notification failed; the channel will retry", "channel", string(ch), "notify_id", n.NotifyID, "err", err)
		return false
	}
	if inserted {
		ib.metrics.callbacksOf(ch).WithLabelValues("accepted").Inc()
		ib.enqueue(rec, n)
		return true
	}
	// Alipay did not get our success (or delivers twice): the notification is ours
	// already. One recorded before the inbox and never handled is put in it now.
	ib.metrics.callbacksOf(ch).WithLabelValues("duplicate").Inc()
	if rec.DispatchDueAt.IsZero() && rec.SettledAt.IsZero() && !legacyFinal(rec.Outcome) {
		if err := ib.store.ArmNotification(wctx, rec.ID, now.Add(ib.cfg.SettleBound)); err != nil {
			ib.log.ErrorContext(ctx, "put a notification recorded before the inbox in it; the channel will retry", "channel", string(ch), "notify_id", n.NotifyID, "err", err)
			return false
		}
		ib.enqueue(rec, n)
	}
	return true
}

// decodeNotification verifies a notification of ch with the key of the account it names,
// and only that key (for Alipay: an app_id no tenant uses is refused).
func (ib *Inbox) decodeNotification(ctx context.Context, ch payment.Channel, raw payment.RawNotification) (payment.Notification, error) {
	gw, err := ib.gateways.ForNotification(ctx, ch, raw)
	if err != nil {
		return payment.Notification{}, err
	}
	return gw.DecodeNotification(ctx, raw)
}
