package activities

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/paykit/paykit/payment"
)

// ReconcileSignal wakes a payment's run to query Alipay itself: the scheduled reconciler
// sends it when Alipay answered that the payment is paid. It carries nothing the run
// trusts (anyone who can reach Temporal can send it); the run's own query is the evidence.
const ReconcileSignal = "alipay-reconcile"

// ReconcileDueInput tunes one run of the scheduled reconciler.
type ReconcileDueInput struct {
	// Interval is the first step of the query schedule (payment.NextQueryAt) of a payment
	// that recorded none; each payment follows the step it was created with.
	Interval time.Duration `json:"interval"`
	// Page is how many due payments are read at a time, Parallel how many are queried at
	// once (each query still waits for the app's call limit), and Budget how long the run
	// takes new pages: what is left is due on the next run.
	Page     int           `json:"page"`
	Parallel int           `json:"parallel"`
	Budget   time.Duration `json:"budget"`
}

// ReconcileDueResult counts what one run of the reconciler did.
type ReconcileDueResult struct {
	Queried int `json:"queried"`
	Paid    int `json:"paid"`
	Woken   int `json:"woken"`
	Failed  int `json:"failed"`
	// Behind is true when the run stopped at its budget with payments still due.
	Behind bool `json:"behind,omitempty"`
}

// ReconcileDue is the scheduled reconciler's work: it pages through the pending payments
// whose next query is due and, for each, first claims the query (a compare-and-set that
// counts it and moves the payment to its next query, so that two reconcilers, or a run
// and its retry, never make one query twice), then queries Alipay through its app's call
// limit and wakes the run of a payment Alipay says is paid (the run queries again and
// takes the success path). A query that fails still counts: the schedule stays bounded,
// and the close path at expiry asks Alipay in any case. A claim that cannot be written
// stops the run before any query (the payments stay due), so a database that refuses
// writes never turns it into a loop of queries. Each query heartbeats, and no query is
// started past the budget.
func (a *Activities) ReconcileDue(ctx context.Context, in ReconcileDueInput) (ReconcileDueResult, error) {
	page, parallel := max(in.Page, 1), max(in.Parallel, 1)
	deadline := time.Now().Add(max(in.Budget, time.Second))
	var res ReconcileDueResult
	for {
		due, err := a.Store.DueQueries(ctx, time.Now(), page)
		if err != nil {
			return res, classify("due queries", err)
		}
		if err := a.reconcilePage(ctx, in.Interval, due, parallel, deadline, &res); err != nil {
			return res, err
		}
		activity.RecordHeartbeat(ctx, res)
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if len(due) < page {
			return res, nil
		}
		if time.Now().After(deadline) {
			res.Behind = true
			return res, nil
		}
	}
}

// reconcilePage claims and queries the due payments of one page, parallel at a time,
// starting none past deadline; it returns the first claim that could not be written.
func (a *Activities) reconcilePage(ctx context.Context, interval time.Duration, due []payment.DueQuery, parallel int,
	deadline time.Time, res *ReconcileDueResult) error {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var claimErr error
	work := make(chan payment.DueQuery)
	for range min(parallel, len(due)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q := range work {
				outcome, err := a.reconcileOne(ctx, interval, q)
				mu.Lock()
				res.count(outcome)
				if err != nil && claimErr == nil {
					claimErr = err
				}
				mu.Unlock()
				activity.RecordHeartbeat(ctx, nil)
			}
		}()
	}
	for _, q := range due {
		mu.Lock()
		stop := claimErr != nil
		mu.Unlock()
		if stop || ctx.Err() != nil || time.Now().After(deadline) {
			break
		}
		work <- q
	}
	close(work)
	wg.Wait()
	return claimErr
}

// count adds one payment's outcome to the result.
func (r *ReconcileDueResult) count(outcome string) {
	switch outcome {
	case "", "taken":
		return
	case "woken":
		r.Woken++
		r.Paid++
	case "paid":
		r.Paid++
	case "failed":
		r.Failed++
	}
	r.Queried++
}

// reconcileOne claims the query of one due payment and makes it: "woken" when Alipay says
// paid and its run was signalled, "paid" when the signal failed (the sweeper re-drives a
// run that is gone, and the close path at expiry finds the money), "unpaid" or "failed";
// "taken" when another reconciler claimed it first or it is no longer pending, and "" with
// an error when the claim could not be written (no query is made).
func (a *Activities) reconcileOne(ctx context.Context, interval time.Duration, q payment.DueQuery) (outcome string, err error) {
	defer func() {
		// A panic on this goroutine would take the worker down; it fails the run instead.
		if p := recover(); p != nil {
			outcome, err = "", fmt.Errorf("reconcile %s: panic: %v", q.PaymentNo, p)
		}
	}()
	if q.Step > 0 {
		interval = q.Step
	}
	next := payment.NextQueryAt(time.Now(), q.ExpireAt, interval, q.PaymentNo, q.Queries+1)
	claimed, err := a.Store.QueryMade(ctx, q, next)
	if err != nil {
		return "", fmt.Errorf("reconcile %s: claim its query: %w", q.PaymentNo, err)
	}
	if !claimed {
		return "taken", nil
	}
	a.knowApp(q)
	outcome = "unpaid"
	t, qerr := a.QueryTrade(ctx, q.PaymentNo)
	switch {
	case qerr != nil:
		outcome = "failed"
		a.log().WarnContext(ctx, "reconciler query failed; the payment's next query or its close path asks again",
			"payment_no", q.PaymentNo, "err", qerr)
	case t.State == payment.TradePaid:
		outcome = "paid"
		if a.Temporal == nil {
			break
		}
		if serr := a.Temporal.SignalWorkflow(ctx, q.WorkflowID, "", ReconcileSignal, q.PaymentNo); serr != nil {
			a.log().WarnContext(ctx, "alipay says paid but the payment's run could not be woken; the sweeper re-drives it",
				"payment_no", q.PaymentNo, "workflow_id", q.WorkflowID, "err", serr)
		} else {
			outcome = "woken"
		}
	}
	label := outcome
	if outcome == "woken" {
		label = "paid"
	}
	a.Metrics.reconcilerQuery(label)
	return outcome, nil
}

// knowApp keeps the tenant, app and amount the reconciler read with a due payment, so
// that its query does not read the payment again.
func (a *Activities) knowApp(q payment.DueQuery) {
	if _, ok := a.paymentApps.Load(q.PaymentNo); ok {
		return
	}
	if a.knownPayments.Add(1) > maxKnownPayments {
		a.paymentApps.Clear()
		a.knownPayments.Store(0)
	}
	a.paymentApps.Store(q.PaymentNo, paymentApp{tenantID: q.TenantID, appID: q.AlipayAppID, amount: q.Amount})
}
