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

// outcomeDeferred is never recorded: the notification stays received, answered failure
// (Alipay redelivers), while its signal goes on in the background (signalPending).
const outcomeDeferred = "deferred"

// finalOutcome reports whether a recorded notification needs no more work, so a
// redelivery can be acknowledged at once.
func finalOutcome(o string) bool {
	switch o {
	case outcomeSignalled, outcomeRedriven, outcomeAlreadyPaid, outcomeIgnored, outcomeAnomaly,
		outcomeRefundFinal, outcomeRefundStarted, outcomeRefundUnknown:
		return true
	}
	return false
}

const notificationDoneTTL = 48 * time.Hour // longer than Alipay's 25 h redelivery window

func alipayReply(c echo.Context, ok bool) error {
	if ok {
		return c.String(http.StatusOK, "success")
	}
	return c.String(http.StatusOK, "failure")
}

// alipayCallback handles Alipay's asynchronous notification. It answers "success" only
// once the notification is durably handled (signalled to the workflow, or an equivalent
// record); anything else makes Alipay deliver it again.
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
	if s.cache != nil {
		if done, err := s.cache.NotificationDone(ctx, n.NotifyID); err == nil && done {
			s.metrics.callbacks.WithLabelValues("duplicate_cached").Inc()
			return alipayReply(c, true)
		}
	}
	verified := payment.ChannelNotification{
		Channel: "alipay", NotifyID: n.NotifyID, PaymentNo: n.PaymentNo, TradeNo: n.TradeNo,
		Verified: true, Outcome: outcomeReceived, ReceivedAt: time.Now().UTC(),
	}
	verified.KeepRaw(string(raw))
	rec, inserted, err := s.store.RecordNotification(ctx, verified)
	if err != nil {
		s.metrics.callbacks.WithLabelValues("store_unavailable").Inc()
		s.log.ErrorContext(ctx, "record notification failed; alipay will retry", "notify_id", n.NotifyID, "err", err)
		return alipayReply(c, false)
	}
	if !inserted && finalOutcome(rec.Outcome) {
		s.metrics.callbacks.WithLabelValues("duplicate").Inc()
		s.markDone(c, n.NotifyID)
		return alipayReply(c, true)
	}
	outcome, ok := s.applyNotification(c, rec.ID, n)
	if outcome == outcomeDeferred {
		// Recorded as received and answered failure; the signal goes on in the background
		// and records the outcome (and counts it) if it lands.
		s.metrics.callbacks.WithLabelValues("deferred").Inc()
		return alipayReply(c, false)
	}
	if err := s.store.SetNotificationOutcome(detached(c), rec.ID, outcome); err != nil {
		s.log.ErrorContext(ctx, "record notification outcome", "notify_id", n.NotifyID, "err", err)
	}
	label := outcome
	if len(label) > len(outcomeRejectPrefix) && label[:len(outcomeRejectPrefix)] == outcomeRejectPrefix {
		label = "rejected"
	}
	s.metrics.callbacks.WithLabelValues(label).Inc()
	if ok && finalOutcome(outcome) {
		s.markDone(c, n.NotifyID)
	}
	return alipayReply(c, ok)
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

func (s *Server) markDone(c echo.Context, notifyID string) {
	if s.cache == nil {
		return
	}
	if err := s.cache.MarkNotificationDone(detached(c), notifyID, notificationDoneTTL); err != nil {
		s.log.DebugContext(c.Request().Context(), "notification cache write skipped", "err", err)
	}
}

// applyNotification checks a verified notification against our records and hands it to
// the payment's workflow. It returns the outcome to record and whether to acknowledge.
func (s *Server) applyNotification(c echo.Context, recID int64, n payment.Notification) (string, bool) {
	ctx := c.Request().Context()
	p, err := s.store.GetPayment(ctx, n.PaymentNo)
	if errors.Is(err, payment.ErrNotFound) {
		s.log.ErrorContext(ctx, "alipay notification for an unknown out_trade_no", "notify_id", n.NotifyID, "payment_no", n.PaymentNo, "trade_no", n.TradeNo)
		return outcomeRejectPrefix + "unknown out_trade_no", false
	}
	if err != nil {
		s.log.ErrorContext(ctx, "read payment for notification; alipay will retry", "notify_id", n.NotifyID, "err", err)
		return outcomeReceived, false
	}
	log := s.log.With("notify_id", n.NotifyID, "payment_no", p.PaymentNo, "tenant_id", p.TenantID, "order_id", p.OrderID, "trade_no", n.TradeNo)
	tenant, err := s.store.GetTenant(ctx, p.TenantID)
	if err != nil {
		log.ErrorContext(ctx, "read tenant for notification; alipay will retry", "err", err)
		return outcomeReceived, false
	}
	// Verified for the app it names, the notification must also be about a payment of
	// that app: app B's valid signature never settles tenant A's payment.
	if app := s.gateways.AppID(tenant); (app != "" && n.AppID != app) || (tenant.AlipaySeller != "" && n.SellerID != tenant.AlipaySeller) {
		log.ErrorContext(ctx, "alipay notification for another app or seller", "app_id", n.AppID, "seller_id", n.SellerID)
		return outcomeRejectPrefix + "app_id or seller_id mismatch", false
	}
	if err := payment.CheckNotification(n, p); err != nil {
		log.ErrorContext(ctx, "alipay notification does not match the payment", "err", err,
			"notified_fen", int64(n.TotalAmount), "amount_fen", int64(p.Amount))
		return outcomeRejectPrefix + payment.ErrorMessage(err), false
	}
	if n.IsRefund() {
		return s.applyRefundNotification(c, log, p, n)
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
		return s.signalPending(c, log, recID, p, sig)
	default:
		// Money arrived for a payment we closed. Never lose it silently: record it for
		// refund and alert.
		s.metrics.anomalies.Inc()
		anomaly := payment.Anomaly{
			Kind: payment.AnomalyPaidAfterClose, TenantID: p.TenantID, PaymentNo: p.PaymentNo, TradeNo: n.TradeNo, Amount: n.TotalAmount,
			Detail:    fmt.Sprintf("alipay notified %s (notify_id %s) for a payment that is %s locally; refund or reconcile", n.TradeStatus, n.NotifyID, p.Status),
			CreatedAt: time.Now().UTC(),
		}
		if err := s.store.RecordAnomaly(ctx, anomaly); err != nil {
			log.ErrorContext(ctx, "record anomaly failed; alipay will retry", "err", err)
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
				log.ErrorContext(ctx, "automatic refund of paid_after_close failed; alipay will retry", "err", err)
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
func (s *Server) applyRefundNotification(c echo.Context, log *slog.Logger, p payment.Payment, n payment.Notification) (string, bool) {
	ctx := c.Request().Context()
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
		log.ErrorContext(ctx, "read refund for notification; alipay will retry", "err", err)
		return outcomeReceived, false
	}
	if r.Status == payment.RefundFailed {
		// Alipay announces money moved for a refund that failed here and released its
		// reservation: an operator must reconcile it, never let it pass.
		s.metrics.anomalies.Inc()
		err := s.store.RecordAnomaly(ctx, payment.Anomaly{
			Kind: "refund_succeeded_after_fail", TenantID: p.TenantID, PaymentNo: p.PaymentNo, TradeNo: n.TradeNo, Amount: r.Amount,
			Detail: fmt.Sprintf("alipay notified refund %s (out_request_no %s, refund_fee %s) that is FAILED locally; notify_id %s",
				r.RefundNo, r.OutRequestNo, n.RefundFee.Yuan(), n.NotifyID),
			CreatedAt: time.Now().UTC(),
		})
		if err != nil {
			log.ErrorContext(ctx, "record anomaly failed; alipay will retry", "err", err)
			return outcomeReceived, false
		}
		log.ErrorContext(ctx, "refund anomaly: alipay notified a refund that failed locally", "refund_no", r.RefundNo)
		return outcomeAnomaly, true
	}
	if r.Status.Final() {
		return outcomeRefundFinal, true
	}
	if err := s.orch.StartRefund(ctx, r); err != nil {
		log.ErrorContext(ctx, "start refund workflow for notification; alipay will retry", "refund_no", r.RefundNo, "err", err)
		return outcomeReceived, false
	}
	return outcomeRefundStarted, true
}
