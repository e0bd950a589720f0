package activities

import (
	"context"
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
// whose next query is due, queries each at Alipay through its app's call limit, wakes the
// run of each one Alipay says is paid (which queries again and takes the success path),
// and moves each to its next query (a compare-and-set on the due time it read, so two
// reconcilers never count one query twice). A query that fails counts too: the schedule
// stays bounded, and the close path at expiry asks Alipay in any case. Repeating a run
// repeats at most the queries of its last page.
func (a *Activities) ReconcileDue(ctx context.Context, in ReconcileDueInput) (ReconcileDueResult, error) {
	page, parallel := max(in.Page, 1), max(in.Parallel, 1)
	deadline := time.Now().Add(max(in.Budget, time.Second))
	var res ReconcileDueResult
	for {
		due, err := a.Store.DueQueries(ctx, time.Now(), page)
		if err != nil {
			return res, classify("due queries", err)
		}
		a.reconcilePage(ctx, in.Interval, due, parallel, &res)
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

// reconcilePage queries the due payments of one page, parallel at a time.
func (a *Activities) reconcilePage(ctx context.Context, interval time.Duration, due []payment.DueQuery, parallel int, res *ReconcileDueResult) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan payment.DueQuery)
	for range min(parallel, len(due)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q := range work {
				outcome := a.reconcileOne(ctx, interval, q)
				mu.Lock()
				res.Queried++
				switch outcome {
				case "paid", "woken":
					res.Paid++
					if outcome == "woken" {
						res.Woken++
					}
				case "failed":
					res.Failed++
				}
				mu.Unlock()
			}
		}()
	}
	for _, q := range due {
		if ctx.Err() != nil {
			break
		}
		work <- q
	}
	close(work)
	wg.Wait()
}

// reconcileOne queries one due payment and moves it to its next query: "woken" when Alipay
// says paid and its run was signalled, "paid" when the signal failed (the sweeper re-drives
// a run that is gone, and the close path at expiry finds the money), "unpaid" or "failed".
func (a *Activities) reconcileOne(ctx context.Context, interval time.Duration, q payment.DueQuery) string {
	a.knowApp(q)
	outcome := "unpaid"
	t, err := a.QueryTrade(ctx, q.PaymentNo)
	switch {
	case err != nil:
		outcome = "failed"
		a.log().WarnContext(ctx, "reconciler query failed; the payment's next query or its close path asks again",
			"payment_no", q.PaymentNo, "err", err)
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
	if q.Step > 0 {
		interval = q.Step
	}
	next := payment.NextQueryAt(time.Now(), q.ExpireAt, interval, q.PaymentNo, q.Queries+1)
	if _, err := a.Store.QueryMade(ctx, q, next); err != nil {
		// Left due: the next run queries it again.
		a.log().WarnContext(ctx, "reconciler could not move a payment to its next query", "payment_no", q.PaymentNo, "err", err)
	}
	return outcome
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
