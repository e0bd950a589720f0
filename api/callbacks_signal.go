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
const DefaultCallbackSignalWait = 10 * time.Millisecond

// signalBackgroundTimeout bounds a signal that goes on after its notification was
// acknowledged.
const signalBackgroundTimeout = 30 * time.Second

// signalPending hands a paid notification of a pending payment to its workflow (starting
// a run that adopts the payment if none is running). It waits at most
// cfg.CallbackSignalWait for Temporal. A signal that takes longer (Temporal busy) goes on
// in the background and the notification is acknowledged on its durable record, which
// already holds the notification as received: the background sets the outcome when the
// signal lands. If it never lands (the process dies, Temporal stays down), the payment is
// still pending and its workflow's reconciliation with Alipay, or the close path's query
// before any local close, finds it paid; a run that is not running is re-driven by the
// sweeper. So acknowledging early can delay PAID, never lose it.
func (s *Server) signalPending(c echo.Context, log *slog.Logger, recID int64, p payment.Payment, sig workflows.NotificationPayload) (string, bool) {
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
		defer cancel()
		outcome, ok := s.deliverSignal(ctx, log, p, sig)
		mu.Lock()
		if !handedOff {
			done <- result{outcome, ok}
			mu.Unlock()
			return
		}
		mu.Unlock()
		// The notification was acknowledged already: record how it ended.
		s.metrics.callbacks.WithLabelValues(outcome).Inc()
		if !ok {
			log.ErrorContext(ctx, "signal after acknowledgement failed; the workflow's reconciliation will find the payment paid")
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
	return outcomeDeferred, true
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
