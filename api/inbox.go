package api

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/paykit/paykit/alipay"
	"github.com/paykit/paykit/payment"
)

// Defaults of the inbox (Config.InboxSettleBound, InboxSweepInterval, NotificationRetention).
const (
	DefaultInboxSettleBound      = 30 * time.Second
	DefaultInboxSweepInterval    = 5 * time.Second
	DefaultNotificationRetention = 30 * 24 * time.Hour
)

const (
	// inboxQueue bounds the notifications waiting for an in-process hand-over; past it a
	// notification waits for the sweep (it is recorded already, so nothing is lost).
	inboxQueue = 4096
	// inboxWorkers hand notifications over concurrently.
	inboxWorkers = 16
	// dispatchTimeout bounds one hand-over (the signal to Temporal, with its reads).
	dispatchTimeout = 10 * time.Second
	// maxDispatchBackoff caps the wait between two hand-overs of one notification.
	maxDispatchBackoff = 15 * time.Minute
	// unsettledAnomalyAt is the hand-over after which a notification still unsettled is
	// an operator's matter (about an hour after it arrived with the default bound); the
	// hand-overs go on every maxDispatchBackoff.
	unsettledAnomalyAt = 8
	// sweepBatch is how many due notifications one sweep takes.
	sweepBatch = 200
	// purgeBatch is how many old notifications one purge statement deletes.
	purgeBatch = 1000
	// purgeEvery is how often the sweep purges notifications past their retention.
	purgeEvery = time.Hour
)

// AnomalyNotificationUnsettled is recorded for a verified notification whose effect is
// still not seen after unsettledAnomalyAt hand-overs.
const AnomalyNotificationUnsettled = "notification_unsettled"

// AnomalyNotificationRejected is recorded for a verified notification that does not match
// the payment it names (amount, app, seller) or names no payment at all: Alipay's own
// word that paykit cannot act on.
const AnomalyNotificationRejected = "notification_rejected"

// inbox hands acknowledged notifications to their payments. A verified notification is
// recorded with a hand-over due InboxSettleBound later and answered success at once; the
// hand-over is tried here in the process straight away, and the sweep (RunInbox) tries
// again every notification whose effect is not seen by its due time, in this process or
// another, until it is settled. A crash between the record and the hand-over loses
// nothing: the row is due.
type inbox struct {
	queue  chan queued
	wg     sync.WaitGroup
	stop   chan struct{}
	once   sync.Once
	active sync.WaitGroup // hand-overs in progress (tests wait for them)
}

type queued struct {
	rec payment.ChannelNotification
	n   payment.Notification
}

func newInbox() *inbox {
	return &inbox{queue: make(chan queued, inboxQueue), stop: make(chan struct{})}
}

func (s *Server) startInbox() {
	for range inboxWorkers {
		s.inbox.wg.Add(1)
		go func() {
			defer s.inbox.wg.Done()
			for {
				select {
				case <-s.inbox.stop:
					return
				case q := <-s.inbox.queue:
					s.dispatch(q.rec, q.n)
					s.inbox.active.Done()
				}
			}
		}()
	}
}

// enqueue asks for an in-process hand-over; false if the queue is full (the sweep takes
// the notification when it is due).
func (s *Server) enqueue(rec payment.ChannelNotification, n payment.Notification) bool {
	s.inbox.active.Add(1)
	select {
	case s.inbox.queue <- queued{rec, n}:
		return true
	default:
		s.inbox.active.Done()
		s.metrics.dispatches.WithLabelValues("queue_full").Inc()
		return false
	}
}

// closeInbox stops the hand-overs; those still queued wait in MySQL for the sweep.
func (s *Server) closeInbox() {
	s.inbox.once.Do(func() { close(s.inbox.stop) })
	s.inbox.wg.Wait()
}

// settles reports whether a hand-over's outcome settles its notification: the
// notification needs nothing more, or an anomaly names it. A signal accepted by Temporal
// (signalled, redriven) and a refund workflow started settle nothing: their effect is
// seen later (the payment PAID, the refund final).
func settles(outcome string) bool {
	switch outcome {
	case outcomeAlreadyPaid, outcomeIgnored, outcomeAnomaly, outcomeRefundFinal, outcomeRefundUnknown:
		return true
	}
	return len(outcome) > len(outcomeRejectPrefix) && outcome[:len(outcomeRejectPrefix)] == outcomeRejectPrefix
}

// dispatch hands one notification to its payment and records what came of it.
func (s *Server) dispatch(rec payment.ChannelNotification, n payment.Notification) {
	ctx, cancel := context.WithTimeout(context.Background(), dispatchTimeout)
	defer cancel()
	outcome, ok := s.applyNotification(ctx, n)
	label := outcome
	if len(label) > len(outcomeRejectPrefix) && label[:len(outcomeRejectPrefix)] == outcomeRejectPrefix {
		label = "rejected"
	}
	if !ok {
		// MySQL or Temporal failed: the notification stays due and the sweep tries again.
		s.metrics.dispatches.WithLabelValues("retry").Inc()
		return
	}
	s.metrics.dispatches.WithLabelValues(label).Inc()
	var err error
	if settles(outcome) {
		err = s.store.SettleNotification(ctx, rec.ID, outcome)
	} else {
		err = s.store.SetNotificationOutcome(ctx, rec.ID, outcome)
	}
	if err != nil {
		s.log.ErrorContext(ctx, "record notification outcome; the sweep hands it over again", "notify_id", n.NotifyID, "err", err)
	}
}

// backoff is the wait before the hand-over after attempt (1 for the first re-dispatch).
func (s *Server) backoff(attempt int) time.Duration {
	d := s.cfg.InboxSettleBound
	for i := 1; i < attempt && d < maxDispatchBackoff; i++ {
		d *= 2
	}
	return min(d, maxDispatchBackoff)
}

// RunInbox sweeps the inbox until ctx ends: every InboxSweepInterval it settles the
// notifications whose payment is now PAID and hands over again those due; every hour it
// purges the notifications past NotificationRetention that need nothing more. Any number
// of API processes may run it: a hand-over is claimed with a compare-and-set first.
func (s *Server) RunInbox(ctx context.Context) {
	t := time.NewTicker(s.cfg.InboxSweepInterval)
	defer t.Stop()
	var lastPurge time.Time
	for {
		s.SweepInbox(ctx, time.Now())
		if time.Since(lastPurge) >= purgeEvery {
			lastPurge = time.Now()
			s.purgeNotifications(ctx, lastPurge.Add(-s.cfg.NotificationRetention))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SweepInbox runs one sweep at now and returns how many notifications it queued for a
// hand-over.
func (s *Server) SweepInbox(ctx context.Context, now time.Time) int {
	if n, err := s.store.SettlePaidNotifications(ctx, now); err != nil {
		s.log.WarnContext(ctx, "inbox: settle paid notifications", "err", err)
	} else if n > 0 {
		s.metrics.settled.Add(float64(n))
	}
	due, err := s.store.DueNotifications(ctx, now, sweepBatch)
	if err != nil {
		if ctx.Err() == nil {
			s.log.WarnContext(ctx, "inbox: read due notifications", "err", err)
		}
		return 0
	}
	handed := 0
	for _, rec := range due {
		attempt := rec.DispatchAttempts + 1
		claimed, err := s.store.ClaimNotificationDispatch(ctx, rec.ID, rec.DispatchAttempts, now.Add(s.backoff(attempt)))
		if err != nil || !claimed {
			continue // another process has it, or MySQL failed: still due
		}
		log := s.log.With("notify_id", rec.NotifyID, "payment_no", rec.PaymentNo, "trade_no", rec.TradeNo, "attempt", attempt)
		if attempt == unsettledAnomalyAt {
			s.recordUnsettled(ctx, log, rec, now)
		}
		n, err := s.redecode(ctx, rec)
		if err != nil {
			log.ErrorContext(ctx, "inbox: a recorded notification no longer decodes; it stays due", "err", err)
			continue
		}
		log.InfoContext(ctx, "inbox: handing a notification over again", "outcome", rec.Outcome, "received_at", rec.ReceivedAt)
		// The hand-over runs on the inbox's workers, so a Temporal that hangs holds no
		// sweep; a notification that finds the queue full is due again after its backoff.
		if s.enqueue(rec, n) {
			handed++
		}
	}
	return handed
}

// redecode reads a recorded notification again from its raw body, verifying it with the
// key of the app it names, as at its arrival.
func (s *Server) redecode(ctx context.Context, rec payment.ChannelNotification) (payment.Notification, error) {
	form, err := alipay.ParseNotificationBody([]byte(rec.Raw))
	if err != nil {
		return payment.Notification{}, err
	}
	return s.decodeNotification(ctx, form)
}

func (s *Server) recordUnsettled(ctx context.Context, log *slog.Logger, rec payment.ChannelNotification, now time.Time) {
	tenantID := ""
	if p, err := s.store.GetPayment(ctx, rec.PaymentNo); err == nil {
		tenantID = p.TenantID
	}
	s.metrics.anomalies.Inc()
	err := s.store.RecordAnomaly(ctx, payment.Anomaly{
		Kind: AnomalyNotificationUnsettled, TenantID: tenantID, PaymentNo: rec.PaymentNo, Subject: rec.NotifyID, TradeNo: rec.TradeNo,
		Detail: fmt.Sprintf("alipay notification %s (received %s, outcome %q) is not settled after %d hand-overs; paykit keeps handing it over every %s",
			rec.NotifyID, rec.ReceivedAt.UTC().Format(time.RFC3339), rec.Outcome, unsettledAnomalyAt, maxDispatchBackoff),
		CreatedAt: now.UTC(),
	})
	if err != nil {
		log.ErrorContext(ctx, "inbox: record unsettled anomaly", "err", err)
		return
	}
	log.ErrorContext(ctx, "payment anomaly: an acknowledged alipay notification is not settled", "outcome", rec.Outcome)
}

func (s *Server) purgeNotifications(ctx context.Context, before time.Time) {
	var total int64
	for ctx.Err() == nil {
		n, err := s.store.PurgeNotifications(ctx, before, purgeBatch)
		total += n
		if err != nil {
			s.log.WarnContext(ctx, "inbox: purge notifications", "err", err)
			break
		}
		if n < purgeBatch {
			break
		}
	}
	if total > 0 {
		s.log.InfoContext(ctx, "inbox: purged notifications past their retention", "deleted", total, "received_before", before)
	}
}
