// Package inbox is where Alipay's notifications land: each is verified and recorded
// (Receive), then handed to its payment's workflow as a signal (dispatch), again by the
// sweep until its effect is seen (Run, Sweep), and purged past its retention.
package inbox

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/runs"
)

// Defaults of the inbox (Config.SettleBound, SweepInterval, Retention).
const (
	DefaultSettleBound   = 30 * time.Second
	DefaultSweepInterval = 5 * time.Second
	DefaultRetention     = 30 * 24 * time.Hour
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
	// refundRunWait is how long a refund notification is handed over every two bounds
	// while its refund's run works, without being an anomaly (refundRunWorking).
	refundRunWait = time.Hour
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

// AnomalyRefundUnknown is recorded for a verified refund notification whose out_biz_no is
// no refund of the payment it names: a refund made outside paykit (in Alipay's console)
// or another payment's. Its subject is the out_biz_no.
const AnomalyRefundUnknown = "refund_unknown"

// Inbox hands acknowledged notifications to their payments. A verified notification is
// recorded (Receive) with a hand-over due SettleBound later and answered success at once;
// the hand-over is tried here in the process straight away, and the sweep (Run) tries
// again every notification whose effect is not seen by its due time, in this process or
// another, until it is settled. A crash between the record and the hand-over loses
// nothing: the row is due.
type Inbox struct {
	cfg      Config
	store    Stores
	gateways payment.Gateways
	orch     Orchestrator
	log      *slog.Logger
	metrics  *Metrics
	// unverified bounds the rows and error lines of unverified callbacks.
	unverified *unverifiedSampler

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

// Config tunes the inbox; a zero field takes its default.
type Config struct {
	// SettleBound is how long an acknowledged notification may go without its effect
	// being seen before it is handed to its payment again (then with backoff).
	SettleBound time.Duration
	// SweepInterval is how often the inbox is swept (Run).
	SweepInterval time.Duration
	// Retention is how long a notification that needs nothing more is kept; it must be
	// longer than Alipay's 25 h of redeliveries, which it dedupes.
	Retention time.Duration
}

func (c Config) withDefaults() Config {
	if c.SettleBound <= 0 {
		c.SettleBound = DefaultSettleBound
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	if c.Retention <= 0 {
		c.Retention = DefaultRetention
	}
	return c
}

// Stores are the records the inbox reads and writes, one interface per noun of package
// payment. New refuses a Stores with one left nil.
type Stores struct {
	payment.Payments      // the payment a notification names
	payment.Refunds       // the refund a refund notification names, the automatic refund
	payment.Notifications // Alipay's notifications as received
	payment.Inbox         // their hand-over to the payments after the acknowledgement
	payment.Tenants       // whether a tenant refunds money paid after close
	payment.Anomalies     // what an operator must look at
}

// Orchestrator is what the inbox needs from the workflow engine.
type Orchestrator interface {
	// Notify signals the run of a payment; running=false if it has none.
	Notify(ctx context.Context, p payment.Payment, n runs.NotificationPayload) (running bool, err error)
	// NotifyOrRedrive starts a run that adopts the pending payment p and signals it.
	NotifyOrRedrive(ctx context.Context, p payment.Payment, n runs.NotificationPayload) error
	// StartRefund makes sure a workflow is working on a pending refund.
	StartRefund(ctx context.Context, r payment.Refund) error
}

// New builds the inbox and starts its hand-over workers (Close stops them). logger nil
// is slog.Default, metrics nil a set registered nowhere. It panics if a noun of store is
// not set: that is a wiring mistake, not a condition to serve with.
func New(cfg Config, store Stores, gateways payment.Gateways, orch Orchestrator, logger *slog.Logger, metrics *Metrics) *Inbox {
	if err := payment.UnsetNoun(store); err != nil {
		panic(err)
	}
	if logger == nil {
		logger = slog.Default()
	}
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	ib := &Inbox{
		cfg: cfg.withDefaults(), store: store, gateways: gateways, orch: orch, log: logger, metrics: metrics,
		unverified: newUnverifiedSampler(),
		queue:      make(chan queued, inboxQueue), stop: make(chan struct{}),
	}
	ib.start()
	return ib
}

func (ib *Inbox) start() {
	for range inboxWorkers {
		ib.wg.Add(1)
		go func() {
			defer ib.wg.Done()
			for {
				select {
				case <-ib.stop:
					return
				case q := <-ib.queue:
					ib.dispatch(q.rec, q.n)
					ib.active.Done()
				}
			}
		}()
	}
}

// enqueue asks for an in-process hand-over; false if the queue is full (the sweep takes
// the notification when it is due).
func (ib *Inbox) enqueue(rec payment.ChannelNotification, n payment.Notification) bool {
	ib.active.Add(1)
	select {
	case ib.queue <- queued{rec, n}:
		return true
	default:
		ib.active.Done()
		ib.metrics.dispatches.WithLabelValues("queue_full").Inc()
		return false
	}
}

// Close stops the hand-overs; those still queued wait in MySQL for the sweep.
func (ib *Inbox) Close() {
	ib.once.Do(func() { close(ib.stop) })
	ib.wg.Wait()
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
func (ib *Inbox) dispatch(rec payment.ChannelNotification, n payment.Notification) {
	ctx, cancel := context.WithTimeout(context.Background(), dispatchTimeout)
	defer cancel()
	outcome, ok := ib.applyNotification(ctx, n)
	label := outcome
	if len(label) > len(outcomeRejectPrefix) && label[:len(outcomeRejectPrefix)] == outcomeRejectPrefix {
		label = "rejected"
	}
	if !ok {
		// MySQL or Temporal failed: the notification stays due and the sweep tries again.
		ib.metrics.dispatches.WithLabelValues("retry").Inc()
		return
	}
	ib.metrics.dispatches.WithLabelValues(label).Inc()
	var err error
	if settles(outcome) {
		err = ib.store.SettleNotification(ctx, rec.ID, outcome)
	} else {
		err = ib.store.SetNotificationOutcome(ctx, rec.ID, outcome)
	}
	if err != nil {
		ib.log.ErrorContext(ctx, "record notification outcome; the sweep hands it over again", "notify_id", n.NotifyID, "err", err)
	}
}

// backoff is the wait before the hand-over after attempt (1 for the first re-dispatch):
// SettleBound, doubled at each attempt up to maxDispatchBackoff, with no jitter.
func (ib *Inbox) backoff(attempt int) time.Duration {
	b := &backoff.ExponentialBackOff{InitialInterval: ib.cfg.SettleBound, Multiplier: 2, MaxInterval: maxDispatchBackoff}
	b.Reset()
	d := b.NextBackOff()
	for i := 1; i < attempt && d < maxDispatchBackoff; i++ {
		d = b.NextBackOff()
	}
	return min(d, maxDispatchBackoff)
}

// Run sweeps the inbox until ctx ends: every SweepInterval it settles the
// notifications whose payment is now PAID and hands over again those due; every hour it
// purges the notifications past Retention that need nothing more. Any number
// of API processes may run it: a hand-over is claimed with a compare-and-set first.
func (ib *Inbox) Run(ctx context.Context) {
	t := time.NewTicker(ib.cfg.SweepInterval)
	defer t.Stop()
	var lastPurge time.Time
	for {
		ib.Sweep(ctx, time.Now())
		if time.Since(lastPurge) >= purgeEvery {
			lastPurge = time.Now()
			ib.purgeNotifications(ctx, lastPurge.Add(-ib.cfg.Retention))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sweep runs one sweep at now and returns how many notifications it queued for a
// hand-over.
func (ib *Inbox) Sweep(ctx context.Context, now time.Time) int {
	if n, err := ib.store.SettlePaidNotifications(ctx, now); err != nil {
		ib.log.WarnContext(ctx, "inbox: settle paid notifications", "err", err)
	} else if n > 0 {
		ib.metrics.settled.Add(float64(n))
	}
	due, err := ib.store.DueNotifications(ctx, now, sweepBatch)
	if err != nil {
		if ctx.Err() == nil {
			ib.log.WarnContext(ctx, "inbox: read due notifications", "err", err)
		}
		return 0
	}
	handed := 0
	for _, rec := range due {
		attempt := rec.DispatchAttempts + 1
		working := refundRunWorking(rec, now)
		claimed, err := ib.store.ClaimNotificationDispatch(ctx, rec.ID, rec.DispatchAttempts, now.Add(ib.nextHandOver(working, attempt)))
		if err != nil || !claimed {
			continue // another process has it, or MySQL failed: still due
		}
		log := ib.log.With("notify_id", rec.NotifyID, "payment_no", rec.PaymentNo, "trade_no", rec.TradeNo, "attempt", attempt)
		// A refund notification waited for past refundRunWait has had its eighth hand-over
		// already: it is an anomaly at each hand-over from then on (recorded once, seen again).
		if !working && (attempt == unsettledAnomalyAt || (rec.Refund && attempt > unsettledAnomalyAt)) {
			ib.recordUnsettled(ctx, log, rec, now)
		}
		n, err := ib.redecode(ctx, rec)
		if err != nil {
			log.ErrorContext(ctx, "inbox: a recorded notification no longer decodes; it stays due", "err", err)
			continue
		}
		log.InfoContext(ctx, "inbox: handing a notification over again", "outcome", rec.Outcome, "received_at", rec.ReceivedAt)
		// The hand-over runs on the inbox's workers, so a Temporal that hangs holds no
		// sweep; a notification that finds the queue full is due again after its backoff.
		if ib.enqueue(rec, n) {
			handed++
		}
	}
	return handed
}

// refundRunWorking reports whether rec is a refund notification, received less than
// refundRunWait before now, whose last hand-over found its refund pending and its run
// working on it (started, or joined): the refund's run confirms it with Alipay, and the
// notification waits for that, not for a fault. A hand-over that fails writes no outcome,
// so the age bounds how long a failing one can pass for waiting.
func refundRunWorking(rec payment.ChannelNotification, now time.Time) bool {
	return rec.Refund && rec.Outcome == outcomeRefundStarted && now.Sub(rec.ReceivedAt) < refundRunWait
}

// nextHandOver is the wait before the hand-over after attempt: the doubling backoff, but
// at most two SettleBounds while a refund's run works on the notification's refund
// (working), so that the notification settles soon after the refund is final (only a
// hand-over that finds it final settles it) instead of up to maxDispatchBackoff later.
func (ib *Inbox) nextHandOver(working bool, attempt int) time.Duration {
	d := ib.backoff(attempt)
	if working {
		d = min(d, 2*ib.cfg.SettleBound)
	}
	return d
}

// redecode reads a recorded notification again from its raw body and the headers kept
// with it, verifying it with the key of the account it names at its channel, as at its
// arrival, but for the freshness of its timestamp (RawNotification.Recorded).
func (ib *Inbox) redecode(ctx context.Context, rec payment.ChannelNotification) (payment.Notification, error) {
	return ib.decodeNotification(ctx, payment.Channel(rec.Channel).OrAlipay(),
		payment.RawNotification{Header: rec.RawHeader, Body: []byte(rec.Raw), Recorded: true})
}

func (ib *Inbox) recordUnsettled(ctx context.Context, log *slog.Logger, rec payment.ChannelNotification, now time.Time) {
	tenantID := ""
	if p, err := ib.store.GetPayment(ctx, rec.PaymentNo); err == nil {
		tenantID = p.TenantID
	}
	ib.metrics.anomalies.Inc()
	err := ib.store.RecordAnomaly(ctx, payment.Anomaly{
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

func (ib *Inbox) purgeNotifications(ctx context.Context, before time.Time) {
	var total int64
	for ctx.Err() == nil {
		n, err := ib.store.PurgeNotifications(ctx, before, purgeBatch)
		total += n
		if err != nil {
			ib.log.WarnContext(ctx, "inbox: purge notifications", "err", err)
			break
		}
		if n < purgeBatch {
			break
		}
	}
	if total > 0 {
		ib.log.InfoContext(ctx, "inbox: purged notifications past their retention", "deleted", total, "received_before", before)
	}
}

// Wait waits for the queued hand-overs of notifications, or until ctx ends.
func (ib *Inbox) Wait(ctx context.Context) {
	done := make(chan struct{})
	go func() { ib.active.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
