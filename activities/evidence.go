package activities

import (
	"context"
	"errors"
	"fmt"

	"github.com/paykit/paykit/payment"
)

// EvidenceNotification is MarkPaidInput.Evidence for a payment marked paid on a
// notification signal: the signal is only a pointer to the verified notification recorded
// under its notify_id, and MarkPaid acts on that record, never on the signal's fields.
const EvidenceNotification = "notification"

// confirmNotification reads the verified notification in.NotifyID names, among those of
// the payment's channel, and checks that it is the channel's signed word that
// in.PaymentNo is paid: its recorded body (with the headers kept with it) verifies again
// with the key of the account the payment was opened on (the app_id and seller_id, or
// appid and mchid, included; not the freshness of its timestamp, which guarded its
// receipt),
// and it names this payment, its amount and a paid state. It returns the notification, or
// why the signal is not evidence (a non-empty reason), or an error to retry (MySQL or the
// app's keys unavailable): a signal backed by a genuine notification is never dropped for
// an outage.
func (a *Activities) confirmNotification(ctx context.Context, in MarkPaidInput) (payment.Notification, string, error) {
	if in.NotifyID == "" {
		return payment.Notification{}, "the signal names no notify_id", nil
	}
	on, err := a.appOf(ctx, in.PaymentNo)
	if errors.Is(err, payment.ErrNotFound) {
		return payment.Notification{}, fmt.Sprintf("payment %q does not exist", in.PaymentNo), nil
	}
	if err != nil {
		return payment.Notification{}, "", fmt.Errorf("confirm notification %s: %w", in.NotifyID, err)
	}
	rec, err := a.Store.NotificationByNotifyID(ctx, string(on.channel), in.NotifyID)
	if errors.Is(err, payment.ErrNotFound) {
		return payment.Notification{}, fmt.Sprintf("no verified notification %q is recorded", in.NotifyID), nil
	}
	if err != nil {
		return payment.Notification{}, "", fmt.Errorf("confirm notification %s: %w", in.NotifyID, err)
	}
	if !rec.Verified {
		return payment.Notification{}, fmt.Sprintf("notification %q is not recorded as verified", in.NotifyID), nil
	}
	gw, err := a.gatewayOf(ctx, in.PaymentNo)
	if err != nil {
		return payment.Notification{}, "", fmt.Errorf("confirm notification %s: %w", in.NotifyID, err)
	}
	n, err := gw.DecodeNotification(ctx, payment.RawNotification{Header: rec.RawHeader, Body: []byte(rec.Raw), Recorded: true})
	if err != nil {
		return payment.Notification{}, fmt.Sprintf("recorded notification %q does not verify with the payment's app: %v", in.NotifyID, err), nil
	}
	switch {
	case n.NotifyID != in.NotifyID:
		return payment.Notification{}, fmt.Sprintf("recorded notification carries notify_id %q, not %q", n.NotifyID, in.NotifyID), nil
	case n.IsRefund():
		return payment.Notification{}, fmt.Sprintf("notification %q announces a refund, not a payment", in.NotifyID), nil
	case n.State != payment.TradePaid:
		return payment.Notification{}, fmt.Sprintf("notification %q says %s, not paid", in.NotifyID, n.TradeStatus), nil
	}
	if err := payment.CheckNotification(n, payment.Payment{PaymentNo: in.PaymentNo, Amount: on.amount}); err != nil {
		return payment.Notification{}, fmt.Sprintf("notification %q: %s", in.NotifyID, payment.ErrorMessage(err)), nil
	}
	return n, "", nil
}

// refuseUnverified records that a notification signal for in.PaymentNo is not backed by
// Alipay's word, and returns the transition that says so: nothing changed.
func (a *Activities) refuseUnverified(ctx context.Context, in MarkPaidInput, reason string) (payment.Transition, error) {
	tenantID := in.TenantID
	if on, err := a.appOf(ctx, in.PaymentNo); err == nil {
		tenantID = on.tenantID
	}
	// It is about the notification the signal named: each unverified notify_id is an
	// anomaly of its own, and the same one signalled again is the same anomaly.
	err := a.RecordAnomaly(ctx, AnomalyInput{
		Kind: payment.AnomalyUnverifiedSignal, TenantID: tenantID, PaymentNo: in.PaymentNo, Subject: in.NotifyID, TradeNo: in.TradeNo,
		Detail: fmt.Sprintf("a notification signal claimed payment %s paid (trade_no %q, notify_id %q) and was not acted on: %s",
			in.PaymentNo, in.TradeNo, in.NotifyID, reason),
	})
	if err != nil {
		return payment.Transition{}, err
	}
	return payment.Transition{Unverified: reason}, nil
}
