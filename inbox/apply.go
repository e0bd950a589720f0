package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/runs"
)

// applyNotification checks a verified, recorded notification against our records and
// hands it to the payment's workflow. It returns the outcome to record, and ok=false when
// MySQL or Temporal failed (the inbox hands it over again).
func (ib *Inbox) applyNotification(ctx context.Context, n payment.Notification) (string, bool) {
	p, err := ib.store.GetPayment(ctx, n.PaymentNo)
	if errors.Is(err, payment.ErrNotFound) {
		ib.log.ErrorContext(ctx, "alipay notification for an unknown out_trade_no", "notify_id", n.NotifyID, "payment_no", n.PaymentNo, "trade_no", n.TradeNo)
		return ib.reject(ctx, ib.log, payment.Payment{PaymentNo: n.PaymentNo}, n, "unknown out_trade_no")
	}
	if err != nil {
		ib.log.ErrorContext(ctx, "read payment for notification; handed over again later", "notify_id", n.NotifyID, "err", err)
		return outcomeReceived, false
	}
	log := ib.log.With("notify_id", n.NotifyID, "payment_no", p.PaymentNo, "tenant_id", p.TenantID, "order_id", p.OrderID, "trade_no", n.TradeNo,
		"channel", string(p.Channel.OrAlipay()))
	// Verified for the app it names, the notification must also be about a payment of
	// that app, the one the payment was opened on (its tenant may have moved since): app
	// B's valid signature never settles tenant A's payment.
	app, err := ib.gateways.ForPayment(ctx, p.TenantID, p.Channel, p.AlipayAppID)
	if err != nil {
		log.ErrorContext(ctx, "resolve the payment's merchant account for notification; handed over again later", "alipay_app_id", p.AlipayAppID, "err", err)
		return outcomeReceived, false
	}
	if (app.AppID != "" && n.AppID != app.AppID) || (app.SellerID != "" && n.SellerID != app.SellerID) {
		log.ErrorContext(ctx, "notification for another app or seller", "app_id", n.AppID, "seller_id", n.SellerID)
		return ib.reject(ctx, log, p, n, "app_id or seller_id mismatch")
	}
	if err := payment.CheckNotification(n, p); err != nil {
		log.ErrorContext(ctx, "notification does not match the payment", "err", err,
			"notified_fen", int64(n.TotalAmount), "amount_fen", int64(p.Amount))
		return ib.reject(ctx, log, p, n, payment.ErrorMessage(err))
	}
	if n.IsRefund() {
		return ib.applyRefundNotification(ctx, log, p, n)
	}
	if n.State != payment.TradePaid {
		log.InfoContext(ctx, "notification does not advance the payment", "trade_status", n.TradeStatus)
		return outcomeIgnored, true
	}
	sig := runs.NotificationPayload{
		NotifyID: n.NotifyID, TradeNo: n.TradeNo, PaymentNo: n.PaymentNo, TradeStatus: n.TradeStatus,
		State: n.State, Amount: n.TotalAmount, PaidAt: n.PaidAt,
	}
	switch p.Status {
	case payment.StatusPaid:
		return outcomeAlreadyPaid, true
	case payment.StatusPending:
		return ib.deliverSignal(ctx, log, p, sig)
	default:
		return ib.paidAfterClose(ctx, log, p, n)
	}
}

// paidAfterClose records money that arrived for a payment we closed. Never lose it
// silently: record it for refund and alert, and refund it at once if its tenant says so.
// The tenant is read only here, before anything is recorded, so the common notification
// costs no tenant read.
func (ib *Inbox) paidAfterClose(ctx context.Context, log *slog.Logger, p payment.Payment, n payment.Notification) (string, bool) {
	tenant, err := ib.store.GetTenant(ctx, p.TenantID)
	if err != nil {
		log.ErrorContext(ctx, "read tenant for notification; handed over again later", "err", err)
		return outcomeReceived, false
	}
	ib.metrics.anomalies.Inc()
	// About the payment as a whole (no subject): its one trade took money, which
	// Alipay's redeliveries and the payment's run report again as the same anomaly.
	anomaly := payment.Anomaly{
		Kind: payment.AnomalyPaidAfterClose, TenantID: p.TenantID, PaymentNo: p.PaymentNo, TradeNo: n.TradeNo, Amount: n.TotalAmount,
		Detail: fmt.Sprintf("%s notified %s (notify_id %s) for a payment that is %s locally; refund or reconcile",
			channelWord(p), n.TradeStatus, n.NotifyID, p.Status),
		CreatedAt: time.Now().UTC(),
	}
	if err := ib.store.RecordAnomaly(ctx, anomaly); err != nil {
		log.ErrorContext(ctx, "record anomaly failed; handed over again later", "err", err)
		return outcomeReceived, false
	}
	if tenant.AutoRefundPaidAfterClose {
		// The refund_no is derived from the payment, so Alipay's redeliveries of this
		// notification land on the same refund.
		r, _, err := ib.store.CreateRefund(ctx, payment.AnomalyRefund(p, anomaly))
		if err == nil {
			err = ib.orch.StartRefund(ctx, r)
		}
		if err != nil {
			log.ErrorContext(ctx, "automatic refund of paid_after_close failed; handed over again later", "err", err)
			return outcomeReceived, false
		}
		log.WarnContext(ctx, "paid_after_close: refunding automatically", "refund_no", r.RefundNo)
	}
	log.ErrorContext(ctx, "payment anomaly: the channel says paid but the payment is closed; recorded for refund", "status", p.Status.String())
	return outcomeAnomaly, true
}

// applyRefundNotification handles Alipay's announcement of a refund. It never touches the
// payment: a refund is not a payment, and a TRADE_CLOSED after a full refund must not
// close a PAID payment. A refund still pending here has its workflow started again if it
// is gone (a running one is joined), and that run confirms it with Alipay's refund query;
// the notification itself is only evidence, never the confirmation.
func (ib *Inbox) applyRefundNotification(ctx context.Context, log *slog.Logger, p payment.Payment, n payment.Notification) (string, bool) {
	log = log.With("out_biz_no", n.OutBizNo, "refund_fee_fen", int64(n.RefundFee), "trade_status", n.TradeStatus)
	if n.OutBizNo == "" {
		return ib.unknownRefund(ctx, log, p, n, "without out_biz_no")
	}
	r, err := ib.store.GetRefundByOutRequestNo(ctx, n.OutBizNo)
	if errors.Is(err, payment.ErrNotFound) {
		// Refunded outside paykit (in Alipay's console, say).
		return ib.unknownRefund(ctx, log, p, n, "that paykit did not make")
	}
	if err == nil && r.PaymentNo != p.PaymentNo {
		return ib.unknownRefund(ctx, log, p, n, fmt.Sprintf("whose out_biz_no is refund %s of payment %s", r.RefundNo, r.PaymentNo))
	}
	if err != nil {
		log.ErrorContext(ctx, "read refund for notification; handed over again later", "err", err)
		return outcomeReceived, false
	}
	if r.Status == payment.RefundFailed {
		// Alipay announces money moved for a refund that failed here and released its
		// reservation: an operator must reconcile it, never let it pass.
		ib.metrics.anomalies.Inc()
		// About the refund (its out_request_no), as the refund's run records it.
		err := ib.store.RecordAnomaly(ctx, payment.Anomaly{
			Kind: "refund_succeeded_after_fail", TenantID: p.TenantID, PaymentNo: p.PaymentNo, Subject: r.OutRequestNo,
			TradeNo: n.TradeNo, Amount: r.Amount,
			Detail: fmt.Sprintf("alipay notified refund %s (out_request_no %s, refund_fee %s) that is FAILED locally; notify_id %s",
				r.RefundNo, r.OutRequestNo, n.RefundFee.Yuan(), n.NotifyID),
			CreatedAt: time.Now().UTC(),
		})
		if err != nil {
			log.ErrorContext(ctx, "record anomaly failed; handed over again later", "err", err)
			return outcomeReceived, false
		}
		log.ErrorContext(ctx, "refund anomaly: alipay notified a refund that failed locally", "refund_no", r.RefundNo)
		return outcomeAnomaly, true
	}
	if r.Status.Final() {
		return outcomeRefundFinal, true
	}
	if err := ib.orch.StartRefund(ctx, r); err != nil {
		log.ErrorContext(ctx, "start refund workflow for notification; handed over again later", "refund_no", r.RefundNo, "err", err)
		return outcomeReceived, false
	}
	return outcomeRefundStarted, true
}

// unknownRefund records a refund_unknown anomaly for a verified refund notification whose
// out_biz_no names no refund of payment p (why says which): money left the trade that no
// refund of paykit accounts for, so an operator reconciles it with Alipay. Its subject is
// the out_biz_no (the notify_id if it has none), so Alipay's redeliveries and the
// inbox's hand-overs of it record it once. It settles the notification: delivering it
// again would not change that.
func (ib *Inbox) unknownRefund(ctx context.Context, log *slog.Logger, p payment.Payment, n payment.Notification, why string) (string, bool) {
	subject := n.OutBizNo
	if subject == "" {
		subject = n.NotifyID
	}
	ib.metrics.anomalies.Inc()
	err := ib.store.RecordAnomaly(ctx, payment.Anomaly{
		Kind: AnomalyRefundUnknown, TenantID: p.TenantID, PaymentNo: p.PaymentNo, Subject: subject, TradeNo: n.TradeNo, Amount: n.RefundFee,
		Detail: fmt.Sprintf("%s notified a refund %s (out_biz_no %q, refund_fee %s as the trade's refunded total, gmt_refund %q, notify_id %s); paykit has %s refunded on it: reconcile with %s",
			channelWord(p), why, n.OutBizNo, n.RefundFee.Yuan(), n.GmtRefund, n.NotifyID, p.Refunded.Yuan(), channelWord(p)),
		CreatedAt: time.Now().UTC(),
	})
	if err != nil {
		log.ErrorContext(ctx, "record anomaly failed; handed over again later", "err", err)
		return outcomeReceived, false
	}
	log.ErrorContext(ctx, "refund anomaly: the channel notified a refund paykit did not make", "why", why)
	return outcomeRefundUnknown, true
}

// reject records an anomaly for a verified notification paykit cannot act on (it names no
// payment, or another app's, or disagrees with it): Alipay delivering it again would not
// change that, so it is settled on the anomaly an operator sees.
func (ib *Inbox) reject(ctx context.Context, log *slog.Logger, p payment.Payment, n payment.Notification, why string) (string, bool) {
	ib.metrics.anomalies.Inc()
	err := ib.store.RecordAnomaly(ctx, payment.Anomaly{
		Kind: AnomalyNotificationRejected, TenantID: p.TenantID, PaymentNo: n.PaymentNo, Subject: n.NotifyID,
		TradeNo: n.TradeNo, Amount: n.TotalAmount,
		Detail: fmt.Sprintf("%s notification %s (%s, app_id %s, seller_id %s, total_amount %s) refused: %s",
			channelWord(p), n.NotifyID, n.TradeStatus, n.AppID, n.SellerID, n.TotalAmount.Yuan(), why),
		CreatedAt: time.Now().UTC(),
	})
	if err != nil {
		log.ErrorContext(ctx, "record anomaly failed; handed over again later", "err", err)
		return outcomeReceived, false
	}
	return outcomeRejectPrefix + why, true
}

// deliverSignal signals the payment's workflow, re-driving it if it is not running.
func (ib *Inbox) deliverSignal(ctx context.Context, log *slog.Logger, p payment.Payment, sig runs.NotificationPayload) (string, bool) {
	running, err := ib.orch.Notify(ctx, p, sig)
	if err != nil {
		log.ErrorContext(ctx, "signal payment workflow failed; handed over again later", "err", err)
		return outcomeReceived, false
	}
	if running {
		return outcomeSignalled, true
	}
	// The workflow is gone (terminated by an operator, say) but the payment is
	// pending: start a run that adopts this payment and give it the notification.
	if err := ib.orch.NotifyOrRedrive(ctx, p, sig); err != nil {
		log.ErrorContext(ctx, "re-drive payment workflow failed; handed over again later", "err", err)
		return outcomeReceived, false
	}
	log.WarnContext(ctx, "payment workflow was not running; re-driven by a notification")
	return outcomeRedriven, true
}

// channelWord names the channel of p in an anomaly's detail as the details always have:
// "alipay" (Alipay's are the details operators know), or "wechatpay".
func channelWord(p payment.Payment) string { return string(p.Channel.OrAlipay()) }
