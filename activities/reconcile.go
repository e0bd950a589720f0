package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	// Page is how many due payments are read at a time, Parallel how many are claimed and
	// queried at once (the apps with payments due share them, and each query is made on a
	// turn of its app's call limit), and Budget how long the run starts new queries: what
	// is left is due on the next run.
	Page     int           `json:"page"`
	Parallel int           `json:"parallel"`
	Budget   time.Duration `json:"budget"`
	// Every and Until make the run a loop: a pass every Every (at once after a pass that
	// left payments due) until Until, an absolute time, so that a retry of the run ends
	// when the first attempt would have. Without them the run is one pass.
	Every time.Duration `json:"every,omitempty"`
	Until time.Time     `json:"until,omitzero"`
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
	// Behind is true when the run left payments due: its budget ended first, or an app had
	// no turn of its call limit for them within it (of a loop: its last pass).
	Behind bool `json:"behind,omitempty"`
	// Passes counts a loop's passes.
	Passes int `json:"passes,omitempty"`
}

// add counts pass into the result of a loop.
func (r *ReconcileDueResult) add(pass ReconcileDueResult) {
	r.Queried += pass.Queried
	r.Paid += pass.Paid
	r.Woken += pass.Woken
	r.Failed += pass.Failed
	r.Unclaimable += pass.Unclaimable
	r.Behind = pass.Behind
	r.Passes++
}

// errWorkerStopping ends a reconciler loop whose worker stops: the run's retry carries on
// at another worker until the same Until.
var errWorkerStopping = errors.New("reconcile: worker stopping; the run's retry carries on")

// maxClaimFailures is how many claims in a row may fail before a run gives up: so many
// rows refusing one after another says the database refuses writes, and it bounds the
// statements a run sends to one that does.
const maxClaimFailures = 64

// maxQueuedPages bounds what a run holds: with this many pages of payments queued, a
// page read leaves the payments of an app that has a page queued already due for the
// next run.
const maxQueuedPages = 20

// reconcileBeat is how often a run heartbeats while its workers wait for their apps'
// turns.
const reconcileBeat = 10 * time.Second

// ReconcileDue is the scheduled reconciler's work: it pages through the pending payments
// whose next query is due and, for each, takes a turn of its app's call limit, claims the
// query (a compare-and-set that counts it and moves the payment to its next query, so
// that two reconcilers, or a run and its retry, never make one query twice), queries
// Alipay on that turn and wakes the run of a payment Alipay says is paid (the run queries
// again and takes the success path). A query that fails still counts: the schedule stays
// bounded, and the close path at expiry asks Alipay in any case. Each query heartbeats,
// and no query is started past the budget.
//
// Apps take turns. The payments read are queued by app, and the Parallel workers serve
// the apps round robin, each app no more than its share of them (Parallel over the apps
// being served) while another has payments ready. A worker never waits for an app's
// limit: an app with no turn free rests until its next, its payments queued, while the
// workers serve the others and read on; one whose next turn is past the budget leaves
// its payments due for the next run. So an app over its call rate, or one Alipay
// throttled, holds back its own queries only, and a claim never waits for a limit: its
// query is made at once.
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
	ctx, stopBeating := keepAlive(ctx)
	defer stopBeating()
	if in.Every <= 0 || in.Until.IsZero() {
		return a.reconcilePass(ctx, in)
	}
	var total ReconcileDueResult
	stop := activity.GetWorkerStopChannel(ctx)
	for next := time.Now(); ; {
		pass, err := a.reconcilePass(ctx, in)
		total.add(pass)
		if err != nil {
			return total, err
		}
		next = next.Add(in.Every)
		if pass.Behind {
			next = time.Now()
		}
		if !next.Before(in.Until) {
			return total, nil
		}
		if err := waitForPass(ctx, stop, next, total); err != nil {
			return total, err
		}
	}
}

// waitForPass waits until the loop's next pass, heartbeating, and returns early with
// errWorkerStopping when the worker stops.
func waitForPass(ctx context.Context, stop <-chan struct{}, next time.Time, sofar ReconcileDueResult) error {
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	beat := time.NewTicker(reconcileBeat)
	defer beat.Stop()
	heartbeat(ctx, sofar)
	for {
		select {
		case <-timer.C:
			return nil
		case <-beat.C:
			heartbeat(ctx, sofar)
		case <-stop:
			return errWorkerStopping
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// reconcilePass is one pass of the reconciler over the payments due when it starts.
func (a *Activities) reconcilePass(ctx context.Context, in ReconcileDueInput) (ReconcileDueResult, error) {
	// The run takes what was due when it started: the payments it claims move past now,
	// so its walk of the due ones ends.
	now := time.Now()
	r := &reconcileRun{a: a, interval: in.Interval, page: max(in.Page, 1), parallel: max(in.Parallel, 1),
		now: now, deadline: now.Add(max(in.Budget, time.Second)), byApp: map[string]*appQueue{}}
	r.cond = sync.NewCond(&r.mu)
	// A worker waiting for an app's turn, or for anything to do, wakes at the budget's end
	// and at the activity's.
	atDeadline := time.AfterFunc(time.Until(r.deadline), r.broadcast)
	defer atDeadline.Stop()
	defer context.AfterFunc(ctx, r.broadcast)()

	var wg sync.WaitGroup
	for range r.parallel {
		wg.Go(func() { r.work(ctx) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	beat := time.NewTicker(reconcileBeat)
	defer beat.Stop()
	for working := true; working; {
		select {
		case <-done:
			working = false
		case <-beat.C:
			heartbeat(ctx, r.result())
		}
	}
	return r.end(ctx)
}

// reconcileRun is one run of the reconciler: the due payments it read and has not handed
// out yet, queued by app, and what its workers did.
type reconcileRun struct {
	a        *Activities
	interval time.Duration
	page     int
	parallel int
	now      time.Time
	deadline time.Time

	mu        sync.Mutex
	cond      *sync.Cond // on mu: a waiting worker may find something to do
	apps      []*appQueue
	byApp     map[string]*appQueue
	next      int // the app whose turn it is, round robin over apps
	queued    int // payments queued, over every app
	after     payment.Cursor
	exhausted bool // the last page is read
	reading   bool
	left      bool // payments left due for the next run
	stopped   bool
	stopErr   error
	res       ReconcileDueResult
	claims    claimTally
}

// appQueue is the payments of one app queued by a run.
type appQueue struct {
	app  string // payment.DueQuery.AlipayAppID
	due  []payment.DueQuery
	busy int // workers serving its payments
	// trying is true while a worker takes a turn of the app's limit: one at a time, so
	// that the workers do not all ask the limit at once and all but one be refused.
	trying bool
	// restUntil is when the app's limit has its next turn; one past the run's deadline
	// leaves the app's payments to the next run.
	restUntil time.Time
}

// work serves the run until it ends: the next payment of the app whose turn it is, or the
// next page when no app has a payment ready, or a wait.
func (r *reconcileRun) work(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for !r.stopped && ctx.Err() == nil && time.Now().Before(r.deadline) {
		on, q, ok := r.take()
		switch {
		case ok:
			r.serve(ctx, on, q)
		case !r.exhausted && !r.reading:
			r.read(ctx)
		case r.exhausted && r.queued == 0:
			// Nothing is left to hand out: the workers waiting for work end too (a
			// Signal wakes one, and it alone would leave the rest waiting to the deadline).
			r.cond.Broadcast()
			return
		default:
			r.cond.Wait()
		}
	}
}

// take hands out the next payment of the app whose turn it is, round robin over the apps
// with a payment ready (queued, and no turn being taken nor rest), the first that has
// fewer workers than its share; with none under its share, the ready app with the fewest.
func (r *reconcileRun) take() (*appQueue, payment.DueQuery, bool) {
	now := time.Now()
	ready := func(on *appQueue) bool { return len(on.due) > 0 && !on.trying && !now.Before(on.restUntil) }
	serving := 0
	for _, on := range r.apps {
		if on.busy > 0 || ready(on) {
			serving++
		}
	}
	share := max(1, r.parallel/max(serving, 1))
	var pick *appQueue
	for i := range r.apps {
		j := (r.next + i) % len(r.apps)
		if on := r.apps[j]; ready(on) && on.busy < share {
			pick, r.next = on, (j+1)%len(r.apps)
			break
		}
	}
	if pick == nil {
		for _, on := range r.apps {
			if ready(on) && (pick == nil || on.busy < pick.busy) {
				pick = on
			}
		}
	}
	if pick == nil {
		return nil, payment.DueQuery{}, false
	}
	q := pick.due[0]
	pick.due = pick.due[1:]
	pick.busy++
	pick.trying = true
	r.queued--
	return pick, q, true
}

// serve takes a turn of the call limit of q's app, then claims q's query and makes it on
// that turn; with no turn free, q goes back to its app's queue, which rests. It is called,
// and returns, with r.mu held.
func (r *reconcileRun) serve(ctx context.Context, on *appQueue, q payment.DueQuery) {
	r.mu.Unlock()
	query, wait, err := r.a.turn(ctx, q)
	r.mu.Lock()
	on.trying = false
	if err != nil || query == nil {
		on.busy--
		if err != nil {
			r.stop(err)
		} else {
			r.rest(ctx, on, q, wait)
		}
		return
	}
	r.cond.Signal() // the app's next payment may take its turn
	r.mu.Unlock()
	outcome, err := r.a.reconcileOne(ctx, r.interval, q, query)
	heartbeat(ctx, nil)
	r.mu.Lock()
	on.busy--
	r.cond.Signal()
	r.res.count(outcome)
	switch {
	case outcome == "unclaimable":
		r.a.log().WarnContext(ctx, "reconciler cannot claim a due payment's query; it skips the payment until the next run",
			"payment_no", q.PaymentNo, "err", err)
		r.a.Metrics.reconcilerQuery(outcome)
		if r.claims.add(err) {
			r.stop(fmt.Errorf("reconcile: %d claims in a row could not be written: %w", r.claims.failedInARow, err))
		}
	case err != nil:
		r.stop(err)
	default:
		r.claims.add(nil)
	}
}

// rest puts q back at the head of its app's queue: the app's limit has no turn for wait,
// and its payments wait that long, or, when the turn is past the run's deadline, until
// the next run.
func (r *reconcileRun) rest(ctx context.Context, on *appQueue, q payment.DueQuery, wait time.Duration) {
	on.restUntil = time.Now().Add(wait)
	if on.restUntil.Before(r.deadline) {
		on.due = slices.Insert(on.due, 0, q)
		r.queued++
		time.AfterFunc(wait, r.broadcast)
		return
	}
	r.a.log().InfoContext(ctx, "reconciler: the app has no call turn before the run's budget ends; its due payments wait for the next run",
		"app_id", on.app, "next_turn_in", wait.String(), "queued", len(on.due)+1)
	r.queued -= len(on.due)
	on.due = nil
	r.left = true
}

// read reads the next page of due payments into the apps' queues. It is called, and
// returns, with r.mu held.
func (r *reconcileRun) read(ctx context.Context) {
	r.reading = true
	after := r.after
	r.mu.Unlock()
	due, next, err := r.a.Store.DueQueries(ctx, r.now, after, r.page)
	r.mu.Lock()
	r.reading = false
	r.cond.Broadcast()
	if err != nil {
		r.stop(classify("due queries", err))
		return
	}
	for _, q := range due {
		r.add(q)
	}
	if len(due) == 0 || next.IsZero() {
		r.exhausted = true
	} else {
		r.after = next
	}
	heartbeat(ctx, r.res)
}

// add queues q on its app, or leaves it due for the next run when its app has no turn
// before the deadline, or when the run holds maxQueuedPages pages and the app one.
func (r *reconcileRun) add(q payment.DueQuery) {
	on, ok := r.byApp[q.AlipayAppID]
	if !ok {
		on = &appQueue{app: q.AlipayAppID}
		r.byApp[q.AlipayAppID] = on
		r.apps = append(r.apps, on)
	}
	if !on.restUntil.Before(r.deadline) || (r.queued >= maxQueuedPages*r.page && len(on.due) >= r.page) {
		r.left = true
		return
	}
	on.due = append(on.due, q)
	r.queued++
}

// stop ends the run with err, the first error only.
func (r *reconcileRun) stop(err error) {
	if r.stopErr == nil {
		r.stopErr = err
	}
	r.stopped = true
	r.cond.Broadcast()
}

// broadcast wakes every waiting worker: a rest, the budget or the activity has ended.
func (r *reconcileRun) broadcast() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cond.Broadcast()
}

// result is what the run has done so far.
func (r *reconcileRun) result() ReconcileDueResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.res
}

// end is the result and the error of the run once its workers are done.
func (r *reconcileRun) end(ctx context.Context) (ReconcileDueResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopErr != nil {
		return r.res, r.stopErr
	}
	if ctx.Err() != nil {
		return r.res, ctx.Err()
	}
	r.res.Behind = r.left || r.queued > 0
	if !r.res.Behind && !r.exhausted {
		// The budget ended between pages: the next says whether payments are left.
		due, _, err := r.a.Store.DueQueries(ctx, r.now, r.after, 1)
		if err != nil {
			return r.res, classify("due queries", err)
		}
		r.res.Behind = len(due) > 0
	}
	return r.res, r.claims.verdict()
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

// turn resolves the gateway of q's app and takes a turn of its call limit, without
// waiting: it returns q's query, made on that turn, or, when the limit has no turn free,
// nil and how long until the next. A gateway that cannot be resolved gives a query that
// fails, as QueryTrade's does: the payment is claimed and its schedule moves on. An
// error (a panic, the activity's end) ends the run.
func (a *Activities) turn(ctx context.Context, q payment.DueQuery) (query func(context.Context) (payment.Trade, error), wait time.Duration, err error) {
	defer func() {
		// A panic on this goroutine would take the worker down; it fails the run instead.
		if p := recover(); p != nil {
			query, wait, err = nil, 0, fmt.Errorf("reconcile %s: panic: %v", q.PaymentNo, p)
		}
	}()
	a.knowApp(q)
	gw, gwErr := a.gatewayOf(ctx, q.PaymentNo)
	if gwErr != nil {
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		return func(context.Context) (payment.Trade, error) { return payment.Trade{}, gwErr }, 0, nil
	}
	if paced, ok := gw.(payment.Paced); ok {
		turned, wait, terr := paced.Turn(ctx)
		switch {
		case terr != nil && ctx.Err() != nil:
			return nil, 0, ctx.Err()
		case terr != nil:
			a.log().WarnContext(ctx, "reconciler: the app's call limit did not answer; its payments wait a second",
				"app_id", q.AlipayAppID, "err", terr)
			return nil, time.Second, nil
		case turned == nil:
			return nil, max(wait, time.Millisecond), nil
		}
		gw = turned
	}
	return func(ctx context.Context) (payment.Trade, error) {
		t, err := gw.Query(ctx, q.PaymentNo)
		if err != nil {
			return payment.Trade{}, classify("query trade", err)
		}
		return t, nil
	}, 0, nil
}

// reconcileOne claims the query of one due payment and makes it with query: "woken" when
// Alipay says paid and its run was signalled, "paid" when the signal failed (the sweeper
// re-drives a run that is gone, and the close path at expiry finds the money), "unpaid"
// or "failed"; "taken" when another reconciler claimed it first or it is no longer
// pending, and "unclaimable" with the error when the claim could not be written (no query
// is made).
func (a *Activities) reconcileOne(ctx context.Context, interval time.Duration, q payment.DueQuery,
	query func(context.Context) (payment.Trade, error)) (outcome string, err error) {
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
	outcome = "unpaid"
	t, qerr := query(ctx)
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
	a.paymentApps.Store(q.PaymentNo, paymentApp{tenantID: q.TenantID, appID: q.AlipayAppID, channel: q.Channel.OrAlipay(), amount: q.Amount})
}
