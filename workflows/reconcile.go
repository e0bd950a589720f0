package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/paykit/paykit/payment"
)

// reconcileBackoff is the change id of the version whose reconciliation queries Alipay on
// a backoff (ReconcileInterval, then twice, four and eight times it, with jitter) instead
// of on every ReconcileInterval, as a local activity in the woken workflow task instead of
// a regular activity, and leaves the last query to the close path at expiry. Alipay's
// notification is the primary signal and the query is the safety net, so an abandoned
// checkout, the common case, costs three queries and the close instead of one per minute
// of its TTL. Runs that reached their wait before it keep the fixed tick.
const reconcileBackoff = "reconcile-backoff"

// reconcileDelay is the delay before the n-th query (0-based) of a payment:
// payment.QueryDelay, the schedule the scheduled reconciler follows too.
func reconcileDelay(interval time.Duration, paymentNo string, n int) time.Duration {
	return payment.QueryDelay(interval, paymentNo, n)
}

// scheduleReconcile sets when the backoff schedule next wakes the run, or clears it when
// the expiry timer comes first (the close path at expiry asks Alipay itself). attempts
// is the number of queries (or, once closing, of close attempts) made so far.
func (r *paymentRun) scheduleReconcile(now time.Time, attempts int) {
	d := reconcileDelay(r.timing.ReconcileInterval, r.st.PaymentNo, attempts)
	next := now.Add(d)
	closing := r.st.CancelRequested || !now.Before(r.st.ExpireAt)
	switch {
	case !closing && !next.Before(r.st.ExpireAt.Add(-r.timing.ReconcileInterval)):
		// The expiry timer wakes the run first, or soon after: the close path at expiry
		// asks Alipay itself.
		next = time.Time{}
	case !closing && r.st.ExpireAt.Sub(next) < d/2 && r.v2:
		// The close path's query at expiry comes within half a backoff step of this one:
		// an early jitter must not buy an abandoned checkout a fourth query.
		next = time.Time{}
	case r.st.CancelRequested && now.Before(r.st.ExpireAt) && next.After(r.st.ExpireAt):
		// A cancel waiting for an unused pay link to expire closes right at expiry.
		next = r.st.ExpireAt
	}
	r.st.NextReconcileAt = next
}

// retryCloseLater schedules the next try of a close path that left the payment pending,
// on the backoff from one interval again.
func (r *paymentRun) retryCloseLater(ctx workflow.Context) {
	if r.st.Status != payment.StatusPending {
		return
	}
	r.st.CloseAttempts++
	r.scheduleReconcile(workflow.Now(ctx), r.st.CloseAttempts-1)
}

// closeReason is why a tick closes the payment: an operator's cancel, or its expiry.
func (r *paymentRun) closeReason() string {
	if r.st.CancelRequested {
		return "cancelled"
	}
	return "expired"
}

// reconcileQueryOptions run the reconciliation query as a local activity: a short call to
// Alipay that costs no activity task and no second workflow task. A query that fails
// waits for the next tick (and the close path at expiry queries again).
func reconcileQueryOptions(ctx workflow.Context) workflow.Context {
	return alipayLocalOptions(ctx, 30*time.Second, 3)
}

// alipayLocalOptions bound a local activity that calls Alipay: 10 s an attempt, retried
// after 1, 2, 4 s (at most 5 s apart) for attempts tries within scheduleToClose.
func alipayLocalOptions(ctx workflow.Context, scheduleToClose time.Duration, attempts int32) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: scheduleToClose,
		StartToCloseTimeout:    10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    5 * time.Second,
			MaximumAttempts:    attempts,
		},
	})
}

// backoffReconcile is one tick of the backoff schedule: past expiry or once cancelled, the
// close path; before, a query that takes the success path when Alipay says paid.
func (r *paymentRun) backoffReconcile(ctx workflow.Context) {
	r.st.Reconciliations++
	now := workflow.Now(ctx)
	if r.st.CancelRequested || !now.Before(r.st.ExpireAt) {
		r.closePath(ctx, r.closeReason())
		r.retryCloseLater(ctx)
		workflow.SetCurrentDetails(ctx, r.details())
		return
	}
	trade, err := r.queryAlipay(ctx)
	r.scheduleReconcile(workflow.Now(ctx), r.st.Queries)
	r.actOnQuery(ctx, trade, err, "reconciliation query failed; will retry on the next tick")
}

// queryAlipay queries Alipay about the run's payment, as a local activity in the woken
// workflow task, and counts the query.
func (r *paymentRun) queryAlipay(ctx workflow.Context) (payment.Trade, error) {
	var trade payment.Trade
	err := workflow.ExecuteLocalActivity(reconcileQueryOptions(ctx), a.QueryTrade, r.st.PaymentNo).Get(ctx, &trade)
	r.st.Queries++
	return trade, err
}

// actOnQuery takes the success path when Alipay's answer says paid, logs a query that
// failed with failed (the next tick or the close path at expiry asks again), and shows
// the run's details.
func (r *paymentRun) actOnQuery(ctx workflow.Context, trade payment.Trade, err error, failed string) {
	switch {
	case err != nil:
		r.logger.Warn(failed, "payment_no", r.st.PaymentNo, "err", err)
	case trade.State == payment.TradePaid:
		r.paidAtAlipay(ctx, trade, "reconciliation")
	}
	workflow.SetCurrentDetails(ctx, r.details())
}

// closePathLocal is the change id of the version whose close path calls Alipay (close,
// then query) as local activities in the workflow task that expiry, a tick or a cancel
// woke, instead of as regular activities: the close of an abandoned checkout, the most
// common end of a payment, costs one workflow task instead of three and two activity
// tasks. Runs that had reached a close path before it keep the regular activities.
const closePathLocal = "close-path-local"

// closePathCall runs one of the close path's Alipay calls about this payment (CloseTrade
// or QueryTrade) with five attempts: a local activity from closePathLocal on, a regular
// one before.
func (r *paymentRun) closePathCall(ctx workflow.Context, summary string, fn, out any) error {
	if !r.localClose.on(ctx, closePathLocal) {
		return workflow.ExecuteActivity(channelOptions(ctx, 5, summary), fn, r.st.PaymentNo).Get(ctx, out)
	}
	return workflow.ExecuteLocalActivity(alipayLocalOptions(ctx, time.Minute, 5), fn, r.st.PaymentNo).Get(ctx, out)
}

// queryInterval is the first step of the query schedule a new payment of this run is
// created with (the scheduled reconciler's), or zero for a run before version 4, which
// keeps its own timer.
func (r *paymentRun) queryInterval() time.Duration {
	if !r.v4 {
		return 0
	}
	return r.timing.ReconcileInterval
}

// closing reports whether the run is past its payment's expiry or cancelled: the close
// path, not a query, is its next step.
func (r *paymentRun) closing(now time.Time) bool {
	return r.st.CancelRequested || !now.Before(r.st.ExpireAt)
}

// woken takes the scheduled reconciler's wakes off c and, for a payment still pending and
// not closing, queries Alipay itself (the wake is no evidence: anyone who can reach
// Temporal can send one) and takes the success path if Alipay says paid. Wakes closer
// together than half an interval are one: one that comes sooner after the last query is
// kept for half an interval after it (NextReconcileAt, the run's only timer before
// expiry), so a flood costs one query per half interval and a genuine wake right after
// a forged one is never lost.
func (r *paymentRun) woken(ctx workflow.Context, c workflow.ReceiveChannel) {
	for c.ReceiveAsync(nil) {
	}
	now := workflow.Now(ctx)
	if r.st.Status != payment.StatusPending || r.closing(now) {
		return
	}
	if at := r.st.WokenAt.Add(r.timing.ReconcileInterval / 2); !r.st.WokenAt.IsZero() && now.Before(at) {
		if r.st.NextReconcileAt.IsZero() {
			r.logger.Info("reconciler wake kept: the run queried Alipay moments ago", "payment_no", r.st.PaymentNo, "at", at)
			r.st.NextReconcileAt = at
		}
		return
	}
	r.queryOnWake(ctx)
}

// queryOnWake is the run's own query on a wake of the scheduled reconciler, kept or not.
func (r *paymentRun) queryOnWake(ctx workflow.Context) {
	now := workflow.Now(ctx)
	r.st.NextReconcileAt = time.Time{}
	r.st.WokenAt, r.st.Reconciliations = now, r.st.Reconciliations+1
	trade, err := r.queryAlipay(ctx)
	r.actOnQuery(ctx, trade, err, "query on the reconciler's wake failed; its next query or the close path at expiry asks again")
}
