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
	// Unclaimable counts the due payments skipped because their claim could not be
	// written: no query was made of them, and they are due again on the next run.
	Unclaimable int `json:"unclaimable,omitempty"`
	// Behind is true when the run stopped at its budget with payments still due.
	Behind bool `json:"behind,omitempty"`
}

// maxClaimFailures is how many claims in a row may fail before a run gives up: so many
// rows refusing one after another says the database refuses writes, and it bounds the
// statements a run sends to one that does.
const maxClaimFailures = 64

// ReconcileDue is the scheduled reconciler's work: it pages through the pending payments
// whose next query is due and, for each, first claims the query (a compare-and-set that
// counts it and moves the payment to its next query, so that two reconcilers, or a run
// and its retry, never make one query twice), then queries Alipay through its app's call
// limit and wakes the run of a payment Alipay says is paid (the run queries again and
// takes the success path). A query that fails still counts: the schedule stays bounded,
// and the close path at expiry asks Alipay in any case. Each query heartbeats, and no
// query is started past the budget.
//
// No query is made without its claim. A claim that cannot be written (a row another
// transaction holds locked, say) skips its payment, which is logged and counted
// unclaimable: the run pages on past it rather than meet it at the head of every page,
// and it is tried again on the next run. The run fails, with the claim's error, when
// maxClaimFailures claims fail in a row or when it ends having written none: either says
// the database, not one row, refuses, and a failed run is seen and retried rather than
// turned into a loop. A run whose only due payments are unclaimable therefore fails too;
// it holds up no other payment.
func (a *Activities) ReconcileDue(ctx context.Context, in ReconcileDueInput) (ReconcileDueResult, error) {
	page, parallel := max(in.Page, 1), max(in.Parallel, 1)
	// The run takes what was due when it started: the payments it claims move past now,
	// so its walk of the due ones ends.
	now := time.Now()
	deadline := now.Add(max(in.Budget, time.Second))
	var res ReconcileDueResult
	var claims claimTally
	var after payment.Cursor
	for {
		due, next, err := a.Store.DueQueries(ctx, now, after, page)
		if err != nil {
			return res, classify("due queries", err)
		}
		if len(due) == 0 {
			return res, claims.verdict()
		}
		if time.Now().After(deadline) {
			res.Behind = true
			return res, claims.verdict()
		}
		started, err := a.reconcilePage(ctx, in.Interval, due, parallel, deadline, &res, &claims)
		if err != nil {
			return res, err
		}
		activity.RecordHeartbeat(ctx, res)
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if started < len(due) {
			res.Behind = true
			return res, claims.verdict()
		}
		if next.IsZero() {
			return res, claims.verdict()
		}
		after = next
	}
}

// claimTally follows a run's claims: how many were written, how many failed since the
// last that was, and the first error.
type claimTally struct {
	written, failedInARow int
	err                   error
}

// add counts one claim, written or not, and reports whether the run must stop.
func (c *claimTally) add(err error) bool {
	if err == nil {
		c.written++
		c.failedInARow = 0
		return false
	}
	c.failedInARow++
	if c.err == nil {
		c.err = err
	}
	return c.failedInARow >= maxClaimFailures
}

// verdict is the error of a run that ends with this tally: none, unless claims failed
// and none was written.
func (c *claimTally) verdict() error {
	if c.err != nil && c.written == 0 {
		return fmt.Errorf("reconcile: no claim could be written: %w", c.err)
	}
	return nil
}

// reconcilePage claims and queries the due payments of one page, parallel at a time,
// starting none past deadline, and returns how many it started. It returns an error when
// a query panicked or when claims failed maxClaimFailures times in a row.
func (a *Activities) reconcilePage(ctx context.Context, interval time.Duration, due []payment.DueQuery, parallel int,
	deadline time.Time, res *ReconcileDueResult, claims *claimTally) (int, error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var stopErr error
	work := make(chan payment.DueQuery)
	for range min(parallel, len(due)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q := range work {
				outcome, err := a.reconcileOne(ctx, interval, q)
				mu.Lock()
				res.count(outcome)
				switch {
				case outcome == "unclaimable":
					a.log().WarnContext(ctx, "reconciler cannot claim a due payment's query; it skips the payment until the next run",
						"payment_no", q.PaymentNo, "err", err)
					a.Metrics.reconcilerQuery(outcome)
					if claims.add(err) && stopErr == nil {
						stopErr = fmt.Errorf("reconcile: %d claims in a row could not be written: %w", claims.failedInARow, err)
					}
				case err != nil:
					if stopErr == nil {
						stopErr = err
					}
				default:
					claims.add(nil)
				}
				mu.Unlock()
				activity.RecordHeartbeat(ctx, nil)
			}
		}()
	}
	started := 0
	for _, q := range due {
		mu.Lock()
		stop := stopErr != nil
		mu.Unlock()
		if stop || ctx.Err() != nil || time.Now().After(deadline) {
			break
		}
		work <- q
		started++
	}
	close(work)
	wg.Wait()
	return started, stopErr
}

// count adds one payment's outcome to the result.
func (r *ReconcileDueResult) count(outcome string) {
	switch outcome {
	case "", "taken":
		return
	case "unclaimable":
		r.Unclaimable++
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
// "taken" when another reconciler claimed it first or it is no longer pending, and
// "unclaimable" with the error when the claim could not be written (no query is made).
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
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "unclaimable", fmt.Errorf("reconcile %s: claim its query: %w", q.PaymentNo, err)
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
