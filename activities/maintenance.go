package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/paykit/paykit/payment"
)

// Defaults of SweepOptions.
const (
	// DefaultGrantGrace leaves a freshly paid payment to its workflow, which grants right
	// after MarkPaid, before the sweeper counts its grant as lost.
	DefaultGrantGrace = 2 * time.Minute
	// DefaultGrantLookback bounds how far back the sweeper looks for lost grants, so that
	// each sweep reads a window of recent payments rather than every paid payment ever.
	// A grant is lost for good only if the sweeper has not run for this long.
	DefaultGrantLookback = 7 * 24 * time.Hour
)

// SweepOptions are the sweeper settings added after its first release. Zero values take
// the defaults, so a sweep scheduled with only the first two arguments still works.
type SweepOptions struct {
	// GrantGrace is how long after MarkPaid a payment without its grant is repaired.
	GrantGrace time.Duration `json:"grant_grace"`
	// GrantLookback is how long ago a payment may have been paid and still be repaired.
	GrantLookback time.Duration `json:"grant_lookback"`
	// After is where the last sweep stopped in its walk of the pending payments
	// (SweepResult.Cursor); zero starts from the oldest.
	After payment.Cursor `json:"after,omitzero"`
}

func (o SweepOptions) withDefaults() SweepOptions {
	if o.GrantGrace <= 0 {
		o.GrantGrace = DefaultGrantGrace
	}
	if o.GrantLookback <= 0 {
		o.GrantLookback = DefaultGrantLookback
	}
	return o
}

// SweepResult counts what one sweep did.
type SweepResult struct {
	Checked  int `json:"checked"`
	Redriven int `json:"redriven"`
	// RefundsRedriven counts pending refunds whose workflow was started again.
	RefundsRedriven   int `json:"refunds_redriven,omitempty"`
	GrantsRepaired    int `json:"grants_repaired"`
	GrantsFailed      int `json:"grants_failed"`
	EventsRedelivered int `json:"events_redelivered"`
	// EventsFailed counts failed attempts, EventsDead those of them that were the
	// event's last, and EventsDeferred the due events this sweep did not attempt: their
	// tenant kept failing, another sweep held them, or time ran out.
	EventsFailed   int `json:"events_failed"`
	EventsDead     int `json:"events_dead"`
	EventsDeferred int `json:"events_deferred"`
	// Cursor is where the next sweep goes on in the walk of the pending payments: past
	// the last this one checked, or from the oldest again (zero) once it read the last.
	Cursor payment.Cursor `json:"cursor,omitzero"`
}

// SweepStalePayments re-drives payments still pending in MySQL after staleAfter whose
// workflow is not running (terminated by an operator, say), grants the benefit of paid
// payments whose workflow never did, and redelivers outbox events the workflows gave up
// on. The guarantee then depends on no single callback or workflow surviving.
//
// Each sweep checks limit pending payments from opts.After on and hands the next sweep
// where it stopped (SweepResult.Cursor): the oldest would otherwise fill every sweep,
// and stuck runs beyond them would never be re-driven. Over sweeps it walks every
// pending payment, and starts again from the oldest once it read the last.
func (a *Activities) SweepStalePayments(ctx context.Context, staleAfter time.Duration, limit int, opts SweepOptions) (SweepResult, error) {
	ctx, stopBeating := keepAlive(ctx)
	defer stopBeating()
	var res SweepResult
	if limit <= 0 {
		limit = 500
	}
	opts = opts.withDefaults()
	now := a.now()
	before := now.Add(-staleAfter)
	pending, next, err := a.Store.PendingPaymentsBefore(ctx, before, opts.After, limit)
	if err != nil {
		return res, fmt.Errorf("sweep: list pending: %w", err)
	}
	res.Cursor = next
	for _, p := range pending {
		heartbeat(ctx, res)
		res.Checked++
		running, err := a.Redriver.Running(ctx, p.WorkflowID)
		if err != nil {
			a.log().ErrorContext(ctx, "sweep: workflow check failed", "payment_no", p.PaymentNo, "workflow_id", p.WorkflowID, "err", err)
			continue
		}
		if running {
			continue
		}
		// The run may have ended the payment after the list was read and before the check
		// saw it closed: re-read, and re-drive only a payment still pending with no run.
		cur, err := a.Store.GetPayment(ctx, p.PaymentNo)
		if err != nil {
			a.log().ErrorContext(ctx, "sweep: re-read pending payment failed", "payment_no", p.PaymentNo, "err", err)
			continue
		}
		if cur.Status != payment.StatusPending {
			continue
		}
		started, err := a.Redriver.Redrive(ctx, cur)
		if err != nil {
			a.log().ErrorContext(ctx, "sweep: re-drive failed", "payment_no", p.PaymentNo, "workflow_id", p.WorkflowID, "err", err)
			continue
		}
		if started {
			res.Redriven++
			a.Metrics.redrive()
			a.log().WarnContext(ctx, "sweep: re-drove pending payment whose workflow was not running",
				"tenant_id", p.TenantID, "order_id", p.OrderID, "payment_no", p.PaymentNo, "workflow_id", p.WorkflowID)
		}
	}
	if err := a.redriveRefunds(ctx, before, limit, &res); err != nil {
		return res, err
	}
	if err := a.repairGrants(ctx, now, opts, limit, &res); err != nil {
		return res, err
	}
	if err := a.redeliver(ctx, now, before, limit, &res); err != nil {
		return res, err
	}
	return res, nil
}

// redriveRefunds starts the workflow of every refund still pending since before whose
// workflow is not running: the API's start failed and the client never retried, or an
// operator terminated the run. The new run reads the refund and resumes it with the same
// out_request_no, so a refund Alipay already carried out is confirmed, not repeated.
func (a *Activities) redriveRefunds(ctx context.Context, before time.Time, limit int, res *SweepResult) error {
	if a.RefundRedriver == nil {
		return nil
	}
	refunds, err := a.Store.PendingRefundsBefore(ctx, before, limit)
	if err != nil {
		return fmt.Errorf("sweep: list pending refunds: %w", err)
	}
	for _, r := range refunds {
		heartbeat(ctx, *res)
		started, err := a.RefundRedriver.RedriveRefund(ctx, r)
		if err != nil {
			a.log().ErrorContext(ctx, "sweep: refund re-drive failed", "refund_no", r.RefundNo, "workflow_id", r.WorkflowID, "err", err)
			continue
		}
		if started {
			res.RefundsRedriven++
			a.log().WarnContext(ctx, "sweep: re-drove pending refund whose workflow was not running",
				"tenant_id", r.TenantID, "payment_no", r.PaymentNo, "refund_no", r.RefundNo, "workflow_id", r.WorkflowID)
		}
	}
	return nil
}

// Bounds of the sweeper's redelivery.
const (
	// sweepConcurrency is how many webhooks one sweep has in flight.
	sweepConcurrency = 8
	// sweepTenantInFlight is how many of them may go to one tenant, so that a merchant
	// whose endpoint hangs holds at most that many of the sweep's workers.
	sweepTenantInFlight = 2
	// sweepEventsPerTenant is one tenant's share of the due events a sweep takes.
	sweepEventsPerTenant = 20
	// sweepTenantFailures is how many failures in a row make a sweep leave a tenant's
	// other events to the next sweep: its endpoint is down, and trying every event
	// would spend a timeout on each.
	sweepTenantFailures = 3
)

// tenantQueue is one tenant's share of a sweep's due events.
type tenantQueue struct {
	id       string
	tenant   payment.Tenant
	loaded   bool // tenant was read
	events   []payment.Event
	inFlight int
	failures int // in a row
}

// usable reports whether the sweep may start another delivery to this tenant.
func (q *tenantQueue) usable() bool {
	return len(q.events) > 0 && q.inFlight < sweepTenantInFlight && q.failures < sweepTenantFailures
}

// delivered is the outcome of one delivery started by redeliver.
type delivered struct {
	q   *tenantQueue
	err error
}

// redeliver delivers the due events, fairly across tenants: the store hands out a
// bounded share per tenant, deliveries start round robin over the tenants with at most
// sweepConcurrency in flight and sweepTenantInFlight per tenant, and a tenant failing
// sweepTenantFailures times in a row is left for a later sweep. Each event is claimed
// before it is sent, so that concurrent sweeps do not both deliver it. No delivery starts
// that could not finish before ctx's deadline.
func (a *Activities) redeliver(ctx context.Context, now, createdBefore time.Time, limit int, res *SweepResult) error {
	events, err := a.Store.DueEvents(ctx, now, createdBefore, sweepEventsPerTenant, limit)
	if err != nil {
		return fmt.Errorf("sweep: list due events: %w", err)
	}
	queues := tenantQueues(events)
	timeout := a.webhookTimeout()
	// A claim outlasts the request and the write that records its outcome, so another
	// sweep takes the event over only from a sweep that died.
	lease := max(time.Minute, 3*timeout+bookkeepingTimeout)
	done := make(chan delivered)
	inFlight, next := 0, 0
	start := func() {
		for inFlight < sweepConcurrency && timeLeft(ctx, timeout) {
			q := nextQueue(queues, &next)
			if q == nil {
				return
			}
			if !q.loaded {
				t, err := a.Store.GetTenant(ctx, q.id)
				if err != nil {
					a.log().ErrorContext(ctx, "sweep: cannot read tenant; its events wait for a later sweep", "tenant_id", q.id, "err", err)
					q.failures = sweepTenantFailures
					continue
				}
				q.tenant, q.loaded = t, true
			}
			ev := q.events[0]
			q.events = q.events[1:]
			claimed, err := a.Store.ClaimEvent(ctx, ev, a.now().Add(lease))
			if err != nil || !claimed {
				if err != nil {
					a.log().WarnContext(ctx, "sweep: cannot claim event", "event_id", ev.EventID, "tenant_id", ev.TenantID, "err", err)
				}
				res.EventsDeferred++
				continue
			}
			inFlight++
			q.inFlight++
			tenant := q.tenant
			go func() { done <- delivered{q: q, err: a.deliverTo(ctx, tenant, ev)} }()
		}
	}
	start()
	for inFlight > 0 {
		d := <-done
		inFlight--
		d.q.inFlight--
		a.tally(ctx, d, res)
		heartbeat(ctx, *res)
		start()
	}
	for _, q := range queues {
		res.EventsDeferred += len(q.events)
	}
	return nil
}

// tenantQueues groups the due events by tenant, in the order the tenants first appear.
func tenantQueues(events []payment.Event) []*tenantQueue {
	var queues []*tenantQueue
	byTenant := map[string]*tenantQueue{}
	for _, ev := range events {
		q := byTenant[ev.TenantID]
		if q == nil {
			q = &tenantQueue{id: ev.TenantID}
			byTenant[ev.TenantID] = q
			queues = append(queues, q)
		}
		q.events = append(q.events, ev)
	}
	return queues
}

// tally counts a finished delivery, and a tenant's failures in a row.
func (a *Activities) tally(ctx context.Context, d delivered, res *SweepResult) {
	if d.err == nil {
		res.EventsRedelivered++
		d.q.failures = 0
		return
	}
	res.EventsFailed++
	if errors.Is(d.err, errEventDead) {
		res.EventsDead++
	}
	if d.q.failures++; d.q.failures == sweepTenantFailures && len(d.q.events) > 0 {
		a.log().WarnContext(ctx, "sweep: tenant's endpoint keeps failing; its other events wait for a later sweep",
			"tenant_id", d.q.id, "failures", d.q.failures, "waiting", len(d.q.events), "err", d.err)
	}
}

// nextQueue returns the next tenant, round robin from *next, that may take another
// delivery, or nil if none may.
func nextQueue(queues []*tenantQueue, next *int) *tenantQueue {
	for i := range queues {
		k := (*next + i) % len(queues)
		if queues[k].usable() {
			*next = (k + 1) % len(queues)
			return queues[k]
		}
	}
	return nil
}

// timeLeft reports whether a delivery started now, taking up to timeout and then a
// write, would end before ctx does.
func timeLeft(ctx context.Context, timeout time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	deadline, ok := ctx.Deadline()
	return !ok || time.Until(deadline) > timeout+bookkeepingTimeout
}

// repairGrants grants the benefit of paid payments whose workflow lost it: the grant
// local activity gave up, or the run was terminated or cancelled between MarkPaid and
// the grant. It goes through GrantBenefit, whose unique row makes a race with a late
// workflow harmless; only grants this sweep created are counted.
func (a *Activities) repairGrants(ctx context.Context, now time.Time, opts SweepOptions, limit int, res *SweepResult) error {
	lost, err := a.Store.PaidWithoutGrant(ctx, now.Add(-opts.GrantLookback), now.Add(-opts.GrantGrace), limit)
	if err != nil {
		return fmt.Errorf("sweep: list paid payments without grant: %w", err)
	}
	for _, p := range lost {
		heartbeat(ctx, *res)
		created, err := a.GrantBenefit(ctx, GrantBenefitInput{TenantID: p.TenantID, PaymentNo: p.PaymentNo, OrderID: p.OrderID})
		if err != nil {
			res.GrantsFailed++
			a.log().ErrorContext(ctx, "sweep: grant repair failed", "tenant_id", p.TenantID, "payment_no", p.PaymentNo, "err", err)
			continue
		}
		if created {
			res.GrantsRepaired++
			a.Metrics.grantRepaired()
			a.log().WarnContext(ctx, "sweep: granted the benefit of a paid payment whose workflow did not",
				"tenant_id", p.TenantID, "order_id", p.OrderID, "payment_no", p.PaymentNo, "benefit", a.benefit(),
				"paid_for", now.Sub(p.UpdatedAt).Round(time.Second).String())
		}
	}
	return nil
}

// PurgeIdempotencyKeys deletes expired Idempotency-Key records.
func (a *Activities) PurgeIdempotencyKeys(ctx context.Context) (int64, error) {
	n, err := a.Store.PurgeExpiredIdempotencyKeys(ctx, a.now())
	if err != nil {
		return 0, fmt.Errorf("purge idempotency keys: %w", err)
	}
	return n, nil
}

// retentionBatch is how many rows one statement of a retention purge deletes.
const retentionBatch = 1000

// PurgeDeliveredEvents deletes the delivered merchant events older than EventRetention,
// a batch at a time. Undelivered and dead events are kept.
func (a *Activities) PurgeDeliveredEvents(ctx context.Context) (int64, error) {
	return a.purgeOld(ctx, "delivered events", a.EventRetention, payment.DefaultEventRetention, a.Store.PurgeDeliveredEvents)
}

// PurgeResolvedAnomalies deletes the anomalies resolved longer than AnomalyRetention ago,
// a batch at a time. Open anomalies are kept whatever their age.
func (a *Activities) PurgeResolvedAnomalies(ctx context.Context) (int64, error) {
	return a.purgeOld(ctx, "resolved anomalies", a.AnomalyRetention, payment.DefaultAnomalyRetention, a.Store.PurgeResolvedAnomalies)
}

// purgeOld runs purge on what is older than keep (def when zero), heartbeating after
// each batch, until none is left or the activity's time is nearly up (the next scheduled
// run goes on).
func (a *Activities) purgeOld(ctx context.Context, what string, keep, def time.Duration,
	purge func(ctx context.Context, before time.Time, limit int) (int64, error)) (int64, error) {
	if keep <= 0 {
		keep = def
	}
	before := a.now().Add(-keep)
	var total int64
	for {
		n, err := purge(ctx, before, retentionBatch)
		total += n
		if err != nil {
			return total, fmt.Errorf("purge %s: %w", what, err)
		}
		heartbeat(ctx, total)
		if n < retentionBatch || !timeLeft(ctx, 10*time.Second) {
			if total > 0 {
				a.log().InfoContext(ctx, "purged "+what, "deleted", total, "before", before.UTC().Format(time.RFC3339))
			}
			return total, nil
		}
	}
}
