package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/paykit/paykit/alipay"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
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

func alipayReply(c echo.Context, ok bool) error {
	if ok {
		return c.String(http.StatusOK, "success")
	}
	return c.String(http.StatusOK, "failure")
}

// alipayCallback handles Alipay's asynchronous notification. A verified notification is
// answered success as soon as it is recorded in MySQL (one INSERT, whose unique notify_id
// also dedupes Alipay's redeliveries): from then on paykit owns it, hands it to its
// payment in the background and again until its effect is seen (inbox.go). Anything
// refused or not recorded is answered failure, so that Alipay delivers it again.
func (s *Server) alipayCallback(c echo.Context) error {
	ctx := c.Request().Context()
	raw, err := readBody(c)
	if err != nil {
		s.metrics.callbacks.WithLabelValues("unreadable").Inc()
		return alipayReply(c, false)
	}
	form, err := alipay.ParseNotificationBody(raw)
	if err != nil {
		// Not a form, empty, or a parameter repeated (Alipay never sends one twice):
		// refused before any signature is checked, and nothing is stored.
		s.metrics.callbacks.WithLabelValues("malformed").Inc()
		if keep, _ := s.unverified.take("", time.Now()); keep {
			s.log.ErrorContext(ctx, "alipay notification refused before verifying", "request_id", requestID(c), "err", err)
		}
		return alipayReply(c, false)
	}
	n, err := s.decodeNotification(ctx, form)
	if err != nil {
		// Forged, tampered, or for another app or seller. Keep it for audit without
		// letting it claim the notify_id, and without letting it fill the database: only
		// the start of its body, with the hash and length of all of it.
		s.metrics.callbacks.WithLabelValues("unverified").Inc()
		s.metrics.unverifiedBytes.Add(float64(len(raw)))
		keep, first := s.unverified.take(form.Get("app_id"), time.Now())
		if !keep {
			// Past the sample: counted in the metrics only, never a row or a line each.
			if first {
				s.log.WarnContext(ctx, "unverified alipay notifications beyond the sample are only counted this minute",
					"per_app_per_minute", unverifiedPerAppPerMinute, "per_minute", unverifiedPerMinute)
			}
			return alipayReply(c, false)
		}
		s.log.ErrorContext(ctx, "alipay notification rejected", "request_id", requestID(c),
			"notify_id", form.Get("notify_id"), "payment_no", form.Get("out_trade_no"), "raw_len", len(raw), "err", err)
		rejected := payment.ChannelNotification{
			Channel: "alipay", NotifyID: form.Get("notify_id"), PaymentNo: form.Get("out_trade_no"), TradeNo: form.Get("trade_no"),
			Verified: false, Outcome: outcomeRejectPrefix + err.Error(), ReceivedAt: time.Now().UTC(),
		}
		rejected.KeepRaw(string(raw))
		_, _, rerr := s.store.RecordNotification(detached(c), rejected)
		if rerr != nil {
			s.log.ErrorContext(ctx, "record rejected notification", "err", rerr)
		}
		return alipayReply(c, false)
	}
	now := time.Now().UTC()
	verified := payment.ChannelNotification{
		Channel: "alipay", NotifyID: n.NotifyID, PaymentNo: n.PaymentNo, TradeNo: n.TradeNo,
		Verified: true, Outcome: outcomeReceived, ReceivedAt: now, DispatchDueAt: now.Add(s.cfg.InboxSettleBound),
		Refund: n.IsRefund(),
	}
	verified.KeepRaw(string(raw))
	rec, inserted, err := s.store.RecordNotification(detached(c), verified)
	if err != nil {
		s.metrics.callbacks.WithLabelValues("store_unavailable").Inc()
		s.log.ErrorContext(ctx, "record notification failed; alipay will retry", "notify_id", n.NotifyID, "err", err)
		return alipayReply(c, false)
	}
	if !inserted {
		// Alipay did not get our success (or delivers twice): the notification is ours
		// already. One recorded before the inbox and never handled is put in it now.
		s.metrics.callbacks.WithLabelValues("duplicate").Inc()
		if rec.DispatchDueAt.IsZero() && rec.SettledAt.IsZero() && !legacyFinal(rec.Outcome) {
			if err := s.store.ArmNotification(detached(c), rec.ID, now.Add(s.cfg.InboxSettleBound)); err != nil {
				s.log.ErrorContext(ctx, "put a notification recorded before the inbox in it; alipay will retry", "notify_id", n.NotifyID, "err", err)
				return alipayReply(c, false)
			}
			s.enqueue(rec, n)
		}
		return alipayReply(c, true)
	}
	s.metrics.callbacks.WithLabelValues("accepted").Inc()
	s.enqueue(rec, n)
	return alipayReply(c, true)
}

// decodeNotification verifies a notification with the key of the app it names, and only
// that key: an app_id no tenant uses is refused.
func (s *Server) decodeNotification(ctx context.Context, form url.Values) (payment.Notification, error) {
	gw, err := s.gateways.ForApp(ctx, form.Get("app_id"))
	if err != nil {
		return payment.Notification{}, fmt.Errorf("app_id %q: %w", form.Get("app_id"), err)
	}
	return gw.DecodeNotification(ctx, form)
}

// applyNotification checks a verified, recorded notification against our records and
// hands it to the payment's workflow. It returns the outcome to record, and ok=false when
// MySQL or Temporal failed (the inbox hands it over again).
func (s *Server) applyNotification(ctx context.Context, n payment.Notification) (string, bool) {
	p, err := s.store.GetPayment(ctx, n.PaymentNo)
	if errors.Is(err, payment.ErrNotFound) {
		s.log.ErrorContext(ctx, "alipay notification for an unknown out_trade_no", "notify_id", n.NotifyID, "payment_no", n.PaymentNo, "trade_no", n.TradeNo)
		return s.reject(ctx, s.log, payment.Payment{PaymentNo: n.PaymentNo}, n, "unknown out_trade_no")
	}
	if err != nil {
		s.log.ErrorContext(ctx, "read payment for notification; handed over again later", "notify_id", n.NotifyID, "err", err)
		return outcomeReceived, false
	}
	log := s.log.With("notify_id", n.NotifyID, "payment_no", p.PaymentNo, "tenant_id", p.TenantID, "order_id", p.OrderID, "trade_no", n.TradeNo)
	// Verified for the app it names, the notification must also be about a payment of
	// that app, the one the payment was opened on (its tenant may have moved since): app
	// B's valid signature never settles tenant A's payment.
	app, err := s.gateways.ForPayment(ctx, p.TenantID, p.AlipayAppID)
	if err != nil {
		log.ErrorContext(ctx, "resolve the payment's alipay app for notification; handed over again later", "alipay_app_id", p.AlipayAppID, "err", err)
		return outcomeReceived, false
	}
	if (app.AppID != "" && n.AppID != app.AppID) || (app.SellerID != "" && n.SellerID != app.SellerID) {
		log.ErrorContext(ctx, "alipay notification for another app or seller", "app_id", n.AppID, "seller_id", n.SellerID)
		return s.reject(ctx, log, p, n, "app_id or seller_id mismatch")
	}
	if err := payment.CheckNotification(n, p); err != nil {
		log.ErrorContext(ctx, "alipay notification does not match the payment", "err", err,
			"notified_fen", int64(n.TotalAmount), "amount_fen", int64(p.Amount))
		return s.reject(ctx, log, p, n, payment.ErrorMessage(err))
	}
	if n.IsRefund() {
		return s.applyRefundNotification(ctx, log, p, n)
	}
	if n.State != payment.TradePaid {
		log.InfoContext(ctx, "alipay notification does not advance the payment", "trade_status", n.TradeStatus)
		return outcomeIgnored, true
	}
	sig := workflows.NotificationPayload{
		NotifyID: n.NotifyID, TradeNo: n.TradeNo, PaymentNo: n.PaymentNo, TradeStatus: n.TradeStatus,
		State: n.State, Amount: n.TotalAmount, PaidAt: n.PaidAt,
	}
	switch p.Status {
	case payment.StatusPaid:
		return outcomeAlreadyPaid, true
	case payment.StatusPending:
		return s.deliverSignal(ctx, log, p, sig)
	default:
		// Money arrived for a payment we closed. Never lose it silently: record it for
		// refund and alert. The tenant (does it refund automatically?) is read only here,
		// before anything is recorded, so the common notification costs no tenant read.
		tenant, err := s.store.GetTenant(ctx, p.TenantID)
		if err != nil {
			log.ErrorContext(ctx, "read tenant for notification; handed over again later", "err", err)
			return outcomeReceived, false
		}
		s.metrics.anomalies.Inc()
		// About the payment as a whole (no subject): its one trade took money, which
		// Alipay's redeliveries and the payment's run report again as the same anomaly.
		anomaly := payment.Anomaly{
			Kind: payment.AnomalyPaidAfterClose, TenantID: p.TenantID, PaymentNo: p.PaymentNo, TradeNo: n.TradeNo, Amount: n.TotalAmount,
			Detail:    fmt.Sprintf("alipay notified %s (notify_id %s) for a payment that is %s locally; refund or reconcile", n.TradeStatus, n.NotifyID, p.Status),
			CreatedAt: time.Now().UTC(),
		}
		if err := s.store.RecordAnomaly(ctx, anomaly); err != nil {
			log.ErrorContext(ctx, "record anomaly failed; handed over again later", "err", err)
			return outcomeReceived, false
		}
		if tenant.AutoRefundPaidAfterClose {
			// The refund_no is derived from the payment, so Alipay's redeliveries of this
			// notification land on the same refund.
			r, _, err := s.store.CreateRefund(ctx, payment.AnomalyRefund(p, anomaly))
			if err == nil {
				err = s.orch.StartRefund(ctx, r)
			}
			if err != nil {
				log.ErrorContext(ctx, "automatic refund of paid_after_close failed; handed over again later", "err", err)
				return outcomeReceived, false
			}
			log.WarnContext(ctx, "paid_after_close: refunding automatically", "refund_no", r.RefundNo)
		}
		log.ErrorContext(ctx, "payment anomaly: alipay says paid but the payment is closed; recorded for refund", "status", p.Status.String())
		return outcomeAnomaly, true
	}
}

// applyRefundNotification handles Alipay's announcement of a refund. It never touches the
// payment: a refund is not a payment, and a TRADE_CLOSED after a full refund must not
// close a PAID payment. A refund still pending here has its workflow started again if it
// is gone (a running one is joined), and that run confirms it with Alipay's refund query;
// the notification itself is only evidence, never the confirmation.
func (s *Server) applyRefundNotification(ctx context.Context, log *slog.Logger, p payment.Payment, n payment.Notification) (string, bool) {
	log = log.With("out_biz_no", n.OutBizNo, "refund_fee_fen", int64(n.RefundFee), "trade_status", n.TradeStatus)
	if n.OutBizNo == "" {
		log.WarnContext(ctx, "alipay refund notification without out_biz_no; nothing to confirm")
		return outcomeRefundUnknown, true
	}
	r, err := s.store.GetRefundByOutRequestNo(ctx, n.OutBizNo)
	if errors.Is(err, payment.ErrNotFound) || (err == nil && r.PaymentNo != p.PaymentNo) {
		// Refunded outside paykit (in Alipay's console, say); the auditor compares the totals.
		log.WarnContext(ctx, "alipay notified a refund paykit did not make")
		return outcomeRefundUnknown, true
	}
	if err != nil {
		log.ErrorContext(ctx, "read refund for notification; handed over again later", "err", err)
		return outcomeReceived, false
	}
	if r.Status == payment.RefundFailed {
		// Alipay announces money moved for a refund that failed here and released its
		// reservation: an operator must reconcile it, never let it pass.
		s.metrics.anomalies.Inc()
		// About the refund (its out_request_no), as the refund's run records it.
		err := s.store.RecordAnomaly(ctx, payment.Anomaly{
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
	if err := s.orch.StartRefund(ctx, r); err != nil {
		log.ErrorContext(ctx, "start refund workflow for notification; handed over again later", "refund_no", r.RefundNo, "err", err)
		return outcomeReceived, false
	}
	return outcomeRefundStarted, true
}

// reject records an anomaly for a verified notification paykit cannot act on (it names no
// payment, or another app's, or disagrees with it): Alipay delivering it again would not
// change that, so it is settled on the anomaly an operator sees.
func (s *Server) reject(ctx context.Context, log *slog.Logger, p payment.Payment, n payment.Notification, why string) (string, bool) {
	s.metrics.anomalies.Inc()
	err := s.store.RecordAnomaly(ctx, payment.Anomaly{
		Kind: AnomalyNotificationRejected, TenantID: p.TenantID, PaymentNo: n.PaymentNo, Subject: n.NotifyID,
		TradeNo: n.TradeNo, Amount: n.TotalAmount,
		Detail: fmt.Sprintf("alipay notification %s (%s, app_id %s, seller_id %s, total_amount %s) refused: %s",
			n.NotifyID, n.TradeStatus, n.AppID, n.SellerID, n.TotalAmount.Yuan(), why),
		CreatedAt: time.Now().UTC(),
	})
	if err != nil {
		log.ErrorContext(ctx, "record anomaly failed; handed over again later", "err", err)
		return outcomeReceived, false
	}
	return outcomeRejectPrefix + why, true
}

// deliverSignal signals the payment's workflow, re-driving it if it is not running.
func (s *Server) deliverSignal(ctx context.Context, log *slog.Logger, p payment.Payment, sig workflows.NotificationPayload) (string, bool) {
	running, err := s.orch.Notify(ctx, p, sig)
	if err != nil {
		log.ErrorContext(ctx, "signal payment workflow failed; handed over again later", "err", err)
		return outcomeReceived, false
	}
	if running {
		return outcomeSignalled, true
	}
	// The workflow is gone (terminated by an operator, say) but the payment is
	// pending: start a run that adopts this payment and give it the notification.
	if err := s.orch.NotifyOrRedrive(ctx, p, sig); err != nil {
		log.ErrorContext(ctx, "re-drive payment workflow failed; handed over again later", "err", err)
		return outcomeReceived, false
	}
	log.WarnContext(ctx, "payment workflow was not running; re-driven by a notification")
	return outcomeRedriven, true
}
