package api

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
)

// DefaultCallbackSignalWait is the default Config.CallbackSignalWait.
const DefaultCallbackSignalWait = 5 * time.Second

// signalBackgroundTimeout bounds a signal that goes on after its notification was
// answered.
const signalBackgroundTimeout = 30 * time.Second

// maxBackgroundSignals bounds the signals still running after their notification was
// answered; past it a notification is answered failure at once (Alipay redelivers), so a
// slow Temporal gets no more load from the callbacks than it can take.
const maxBackgroundSignals = 256

// signalPending hands a paid notification of a pending payment to its workflow (starting
// a run that adopts the payment if none is running). It waits at most
// cfg.CallbackSignalWait for Temporal. Only a signal that landed is acknowledged with
// success: Alipay's redelivery is the one safety net that survives this process dying, so
// a signal that takes longer (Temporal slow or down) is answered failure and goes on in the
// background, which records the outcome if it lands; Alipay then redelivers, and the
// redelivery finds the notification handled (or hands it over again).
func (s *Server) signalPending(c echo.Context, log *slog.Logger, recID int64, p payment.Payment, sig workflows.NotificationPayload) (string, bool) {
	select {
	case s.signalSlots <- struct{}{}:
	default:
		log.WarnContext(c.Request().Context(), "too many signals in flight; alipay will retry", "in_flight", maxBackgroundSignals)
		return outcomeReceived, false
	}
	type result struct {
		outcome string
		ok      bool
	}
	var (
		mu        sync.Mutex
		handedOff bool
		done      = make(chan result, 1)
	)
	ctx, cancel := context.WithTimeout(detached(c), signalBackgroundTimeout)
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		defer func() { <-s.signalSlots }()
		defer cancel()
		outcome, ok := s.deliverSignal(ctx, log, p, sig)
		mu.Lock()
		if !handedOff {
			done <- result{outcome, ok}
			mu.Unlock()
			return
		}
		mu.Unlock()
		// The notification was answered failure already (Alipay redelivers): record how the
		// signal ended, so the redelivery finds it handled.
		s.metrics.callbacks.WithLabelValues(outcome).Inc()
		if !ok {
			return
		}
		if err := s.store.SetNotificationOutcome(ctx, recID, outcome); err != nil {
			log.ErrorContext(ctx, "record notification outcome", "err", err)
		}
		if s.cache != nil {
			if err := s.cache.MarkNotificationDone(ctx, sig.NotifyID, notificationDoneTTL); err != nil {
				log.DebugContext(ctx, "notification cache write skipped", "err", err)
			}
		}
	}()
	timer := time.NewTimer(s.cfg.CallbackSignalWait)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.outcome, r.ok
	case <-timer.C:
	}
	mu.Lock()
	defer mu.Unlock()
	select {
	case r := <-done:
		return r.outcome, r.ok
	default:
	}
	handedOff = true
	log.WarnContext(c.Request().Context(), "signal slower than the callback wait; answered failure so that alipay redelivers, the signal goes on",
		"wait", s.cfg.CallbackSignalWait.String())
	return outcomeDeferred, false
}

// deliverSignal signals the payment's workflow, re-driving it if it is not running.
func (s *Server) deliverSignal(ctx context.Context, log *slog.Logger, p payment.Payment, sig workflows.NotificationPayload) (string, bool) {
	running, err := s.orch.Notify(ctx, p, sig)
	if err != nil {
		log.ErrorContext(ctx, "signal payment workflow failed; alipay will retry", "err", err)
		return outcomeReceived, false
	}
	if running {
		return outcomeSignalled, true
	}
	// The workflow is gone (terminated by an operator, say) but the payment is
	// pending: start a run that adopts this payment and give it the notification.
	if err := s.orch.NotifyOrRedrive(ctx, p, sig); err != nil {
		log.ErrorContext(ctx, "re-drive payment workflow failed; alipay will retry", "err", err)
		return outcomeReceived, false
	}
	log.WarnContext(ctx, "payment workflow was not running; re-driven by a notification")
	return outcomeRedriven, true
}
