package activities_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/gateways"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/redis"
)

// The scheduled reconciler's run queries each due pending payment once at Alipay, through
// the gateway of the app it was opened on, and moves it to its next query on its own
// step; a payment that is not due, or not pending, is not queried; a second run at once
// finds nothing due. A payment Alipay says is paid is counted paid (this worker has no
// Temporal client to wake its run with: the e2e tests see the wake).
func TestReconcileDueQueriesEachDuePaymentOnce(t *testing.T) {
	f := newFixture(t)
	step := 30 * time.Second
	var nos []string
	for i, method := range []payment.Method{payment.MethodQR, payment.MethodQR, payment.MethodPage, payment.MethodPage} {
		in := f.createInput("due-" + string(rune('a'+i)))
		in.Method, in.QueryInterval, in.ExpireAt = method, step, time.Now().Add(15*time.Minute)
		var created activities.CreatePaymentResult
		if err := f.local(t, &created, f.acts.CreatePayment, in); err != nil {
			t.Fatal(err)
		}
		if !created.QueryScheduled {
			t.Fatalf("%s created without its first query", in.PaymentNo)
		}
		if method == payment.MethodQR {
			open := activities.OpenTradeInput{PaymentNo: in.PaymentNo, Subject: in.Subject, Amount: in.Amount, ExpireAt: in.ExpireAt, Method: method}
			if err := f.local(t, nil, f.acts.OpenTrade, open); err != nil {
				t.Fatal(err)
			}
		}
		nos = append(nos, in.PaymentNo)
	}
	if _, err := f.sim.Pay(testAppID, nos[0], "buyer"); err != nil {
		t.Fatal(err)
	}
	// The first three are due; the last is not yet.
	if _, err := f.db.Exec("UPDATE payments SET next_query_at = ? WHERE payment_no IN (?, ?, ?)", time.Now().UTC().Add(-time.Second), nos[0], nos[1], nos[2]); err != nil {
		t.Fatal(err)
	}
	var res activities.ReconcileDueResult
	in := activities.ReconcileDueInput{Interval: time.Hour, Page: 2, Parallel: 4, Budget: time.Minute}
	if err := f.remote(t, &res, f.acts.ReconcileDue, in); err != nil {
		t.Fatal(err)
	}
	if res.Queried != 3 || res.Paid != 1 || res.Failed != 0 || res.Behind {
		t.Fatalf("result %+v, want 3 queried over two pages, 1 paid", res)
	}
	for i, no := range nos {
		want := map[bool]int{true: 1, false: 0}[i < 3]
		if q := f.sim.Calls(no)["alipay.trade.query"]; q != want {
			t.Errorf("%s: %d queries at Alipay, want %d", no, q, want)
		}
		var queries int
		var next *time.Time
		if err := f.db.QueryRow("SELECT queries, next_query_at FROM payments WHERE payment_no = ?", no).Scan(&queries, &next); err != nil {
			t.Fatal(err)
		}
		if queries != want {
			t.Errorf("%s: queries = %d, want %d", no, queries, want)
		}
		// The next is the payment's own second step (two steps of 30 s, ±20%), not the
		// run's one-hour fallback.
		if i < 3 && (next == nil || time.Until(*next) < 40*time.Second || time.Until(*next) > 80*time.Second) {
			t.Errorf("%s: next query at %v, want about a minute from now", no, next)
		}
	}
	res = activities.ReconcileDueResult{}
	if err := f.remote(t, &res, f.acts.ReconcileDue, in); err != nil {
		t.Fatal(err)
	}
	if res.Queried != 0 {
		t.Fatalf("second run at once: %+v, want nothing due", res)
	}
}

// failingClaims is a query schedule whose claims cannot be written (a database that reads
// but refuses writes); it counts the claims tried.
type failingClaims struct {
	payment.QuerySchedule
	tried atomic.Int64
}

func (c *failingClaims) QueryMade(context.Context, payment.DueQuery, time.Time) (bool, error) {
	c.tried.Add(1)
	return false, errors.New("mysql: --read-only")
}

// A reconciler that cannot write its claims makes no query at all and fails the run: the
// payments stay due for the next, and Alipay is not asked the same questions in a loop.
// With many payments due it gives up long before it has tried to claim each.
func TestReconcileDueMakesNoQueryItCannotClaim(t *testing.T) {
	tests := []struct {
		name string
		due  int
	}{
		{name: "one payment due", due: 1},
		{name: "many payments due", due: 150},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			nos := f.duePayments(t, tc.due)
			claims := &failingClaims{QuerySchedule: f.acts.Store.QuerySchedule}
			f.acts.Store.QuerySchedule = claims
			err := f.remote(t, nil, f.acts.ReconcileDue, activities.ReconcileDueInput{Interval: time.Minute, Page: 50, Parallel: 2, Budget: time.Minute})
			if err == nil || !strings.Contains(err.Error(), "read-only") {
				t.Fatalf("run with claims refused: %v, want the claim's error", err)
			}
			for _, no := range nos {
				if q := f.sim.Calls(no)["alipay.trade.query"]; q != 0 {
					t.Fatalf("%s: %d queries made without a claim", no, q)
				}
			}
			if n := claims.tried.Load(); tc.due > 1 && n >= int64(tc.due) {
				t.Fatalf("%d claims tried of %d due, want the run to give up first", n, tc.due)
			}
		})
	}
}

// duePayments creates n pending payments on a 30-second query step and makes them due,
// the first the longest: the head of every page the reconciler reads.
func (f *fixture) duePayments(tb testing.TB, n int) []string {
	tb.Helper()
	return f.duePaymentsOn(tb, "", n)
}

// duePaymentsOn is duePayments on the Alipay app appID ("" for the default app).
func (f *fixture) duePaymentsOn(tb testing.TB, appID string, n int) []string {
	tb.Helper()
	ctx := context.Background()
	var nos []string
	for i := range n {
		in := f.createInput("due-" + randomHex(4))
		np := payment.NewPayment{PaymentNo: in.PaymentNo, TenantID: in.TenantID, OrderID: in.OrderID, Amount: in.Amount,
			Currency: in.Currency, Subject: in.Subject, ExpireAt: in.ExpireAt, WorkflowID: in.WorkflowID, QueryInterval: 30 * time.Second,
			AlipayAppID: appID}
		if _, _, err := f.store.CreatePendingPayment(ctx, np); err != nil {
			tb.Fatalf("create %s: %v", in.PaymentNo, err)
		}
		due := time.Now().UTC().Add(-time.Hour + time.Duration(i)*time.Second)
		if _, err := f.db.ExecContext(ctx, "UPDATE payments SET next_query_at = ? WHERE payment_no = ?", due, in.PaymentNo); err != nil {
			tb.Fatal(err)
		}
		nos = append(nos, in.PaymentNo)
	}
	return nos
}

// refusedClaim is a query schedule that cannot write the claim of one payment (a row
// another transaction holds locked, say) and writes the others'.
type refusedClaim struct {
	payment.QuerySchedule
	paymentNo string
}

func (r refusedClaim) QueryMade(ctx context.Context, q payment.DueQuery, next time.Time) (bool, error) {
	if q.PaymentNo == r.paymentNo {
		return false, errors.New("mysql: query made: Error 1205 (HY000): Lock wait timeout exceeded")
	}
	return r.QuerySchedule.QueryMade(ctx, q, next)
}

// A payment at the head of the due ones whose claim cannot be written does not stall the
// reconciler: the run queries every other due payment, over every page, and succeeds.
// The counter of a payment queried 32,767 times (payments.queries is a SMALLINT) stays
// there rather than overflow and refuse every claim of it.
func TestReconcileDueSkipsAPaymentItCannotClaim(t *testing.T) {
	tests := []struct {
		name        string
		setup       func(t *testing.T, f *fixture, head string)
		wantQueried int
		wantHead    int // queries at Alipay about the head
		unclaimable int
	}{
		{
			name: "its query counter is at its limit",
			setup: func(t *testing.T, f *fixture, head string) {
				if _, err := f.db.Exec("UPDATE payments SET queries = 32767 WHERE payment_no = ?", head); err != nil {
					t.Fatal(err)
				}
			},
			wantQueried: 5, wantHead: 1,
		},
		{
			name: "its claim is refused",
			setup: func(t *testing.T, f *fixture, head string) {
				f.acts.Store.QuerySchedule = refusedClaim{QuerySchedule: f.acts.Store.QuerySchedule, paymentNo: head}
			},
			wantQueried: 4, wantHead: 0, unclaimable: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			reg := prometheus.NewRegistry()
			f.acts.Metrics = activities.NewMetrics(reg)
			nos := f.duePayments(t, 5)
			tc.setup(t, f, nos[0])
			var res activities.ReconcileDueResult
			in := activities.ReconcileDueInput{Interval: time.Minute, Page: 2, Parallel: 1, Budget: time.Minute}
			if err := f.remote(t, &res, f.acts.ReconcileDue, in); err != nil {
				t.Fatalf("run: %v, want the others queried", err)
			}
			if res.Queried != tc.wantQueried || res.Unclaimable != tc.unclaimable || res.Behind {
				t.Fatalf("result %+v, want %d queried and %d unclaimable", res, tc.wantQueried, tc.unclaimable)
			}
			if n := reconcilerOutcome(t, reg, "unclaimable"); n != float64(tc.unclaimable) {
				t.Errorf("paykit_reconciler_queries_total{outcome=\"unclaimable\"} = %v, want %d", n, tc.unclaimable)
			}
			for i, no := range nos {
				want := map[bool]int{true: tc.wantHead, false: 1}[i == 0]
				if q := f.sim.Calls(no)["alipay.trade.query"]; q != want {
					t.Errorf("%s: %d queries at Alipay, want %d", no, q, want)
				}
			}
			if n := f.count(t, "SELECT queries FROM payments WHERE payment_no = ?", nos[0]); n != 32767 && n != 0 {
				t.Errorf("head's query counter = %d", n)
			}
		})
	}
}

// slowClaims is a query schedule whose claims each take a while.
type slowClaims struct {
	payment.QuerySchedule
	wait time.Duration
}

func (s slowClaims) QueryMade(ctx context.Context, q payment.DueQuery, next time.Time) (bool, error) {
	time.Sleep(s.wait)
	return s.QuerySchedule.QueryMade(ctx, q, next)
}

// A run that its budget stops with payments still due says it is behind, whether the
// budget ran out within the last page or between pages; a run that reads pages larger
// than the store hands out still goes through every due payment.
func TestReconcileDueIsBehindWhenItLeavesPaymentsDue(t *testing.T) {
	tests := []struct {
		name       string
		due        int
		in         activities.ReconcileDueInput
		claimWait  time.Duration
		wantBehind bool
	}{
		{name: "budget ends within the only page", due: 5, claimWait: 400 * time.Millisecond,
			in: activities.ReconcileDueInput{Page: 10, Parallel: 1, Budget: time.Second}, wantBehind: true},
		{name: "budget ends between pages", due: 5, claimWait: 400 * time.Millisecond,
			in: activities.ReconcileDueInput{Page: 1, Parallel: 1, Budget: time.Second}, wantBehind: true},
		{name: "a page larger than the store reads", due: 101,
			in: activities.ReconcileDueInput{Page: 5000, Parallel: 16, Budget: time.Minute}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.duePayments(t, tc.due)
			if tc.claimWait > 0 {
				f.acts.Store.QuerySchedule = slowClaims{QuerySchedule: f.acts.Store.QuerySchedule, wait: tc.claimWait}
			}
			tc.in.Interval = time.Minute
			var res activities.ReconcileDueResult
			if err := f.remote(t, &res, f.acts.ReconcileDue, tc.in); err != nil {
				t.Fatal(err)
			}
			left := f.count(t, "SELECT COUNT(*) FROM payments WHERE status = 0 AND next_query_at <= UTC_TIMESTAMP(3)")
			t.Logf("result %+v, %d left due", res, left)
			if res.Behind != tc.wantBehind || (left > 0) != tc.wantBehind {
				t.Fatalf("behind = %v with %d payments left due; want it behind exactly when some are left (%v)", res.Behind, left, tc.wantBehind)
			}
		})
	}
}

// appGateways is the Alipay channel (gateways.Channel) with one gateway for each app a payment records.
type appGateways map[string]payment.Gateway

func (g appGateways) For(context.Context, string) (payment.App, error) {
	return payment.App{}, errors.New("appGateways opens no payment")
}

func (g appGateways) ForPayment(_ context.Context, _, appID string) (payment.App, error) {
	gw, ok := g[appID]
	if !ok {
		return payment.App{}, payment.ErrNotFound
	}
	return payment.App{ID: appID, AppID: appID, Gateway: gw}, nil
}

func (g appGateways) ForApp(_ context.Context, appID string) (payment.Gateway, error) {
	gw, ok := g[appID]
	if !ok {
		return nil, payment.ErrNotFound
	}
	return gw, nil
}

// triedLimiter is a call limit that counts the turns tried of it.
type triedLimiter struct {
	*redis.CallLimiter
	tried atomic.Int64
}

func (l *triedLimiter) TryTake(ctx context.Context, appID string) (time.Duration, error) {
	l.tried.Add(1)
	return l.CallLimiter.TryTake(ctx, appID)
}

// An app over its call rate, or one Alipay throttled, holds back its own payments and no
// other app's: with 30 of a busy app's payments due first, the 3 of another app are all
// queried within the run, at once rather than behind the busy app's queue, even when they
// are pages behind it; the busy app still gets its rate, and what it leaves is due on the
// next run. No payment is claimed before its app has a turn for its query: every claim is
// a query made, and a hold that outlasts the run claims nothing of its app. The workers
// try an app's turns one at a time, not all at once.
func TestReconcileDueServesEveryApp(t *testing.T) {
	const busy = "2021000000000busy"
	tests := []struct {
		name             string
		rate             float64
		burst            int
		hold             time.Duration // Alipay throttled the busy app just before the run
		page             int
		budget           time.Duration
		busyMin, busyMax int // of the busy app's payments queried in the run
	}{
		{name: "the busy app is over its call rate", rate: 2, burst: 3, page: 100, budget: 3 * time.Second, busyMin: 6, busyMax: 10},
		{name: "the other app is pages behind the busy one", rate: 2, burst: 3, page: 10, budget: 3 * time.Second, busyMin: 6, busyMax: 10},
		{name: "alipay throttled the busy app", rate: 100, burst: 10, hold: 6 * time.Second, page: 100, budget: 2 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			rdb, prefix := testenv.Redis(t)
			l := &triedLimiter{CallLimiter: &redis.CallLimiter{Client: redis.New(rdb, prefix), Rate: tc.rate, Burst: tc.burst, Hold: tc.hold}}
			f.acts.Gateways = gateways.Channels{payment.ChannelAlipay: appGateways{
				busy:      gateways.Limited(f.acts.Gateway, busy, l),
				testAppID: gateways.Limited(f.acts.Gateway, testAppID, l),
			}}
			busyNos := f.duePaymentsOn(t, busy, 30)
			otherNos := f.duePaymentsOn(t, testAppID, 3)
			// The other app's payments come after every one of the busy app's.
			if _, err := f.db.Exec("UPDATE payments SET next_query_at = ? WHERE payment_no IN (?, ?, ?)",
				time.Now().UTC().Add(-time.Second), otherNos[0], otherNos[1], otherNos[2]); err != nil {
				t.Fatal(err)
			}
			if tc.hold > 0 {
				l.Throttled(context.Background(), busy)
			}

			// served gets how long into the run the other app's payments had all been
			// queried, seen every 20 ms and once more after the run.
			start := time.Now()
			served := make(chan time.Duration, 1)
			done := make(chan struct{})
			watched := make(chan struct{})
			go func() {
				defer close(watched)
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for ended := false; ; {
					asked := 0
					for _, no := range otherNos {
						asked += min(f.sim.Calls(no)["alipay.trade.query"], 1)
					}
					if asked == len(otherNos) {
						served <- time.Since(start)
						return
					}
					if ended {
						return
					}
					select {
					case <-done:
						ended = true
					case <-tick.C:
					}
				}
			}()
			var res activities.ReconcileDueResult
			in := activities.ReconcileDueInput{Interval: time.Minute, Page: tc.page, Parallel: 4, Budget: tc.budget}
			err := f.remote(t, &res, f.acts.ReconcileDue, in)
			took := time.Since(start)
			close(done)
			<-watched
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("result %+v in %s", res, took.Round(time.Millisecond))

			select {
			case d := <-served:
				if d > 2*time.Second {
					t.Errorf("the other app's 3 payments were all queried %s into the run, want within 2 s", d.Round(time.Millisecond))
				}
			default:
				n := 0
				for _, no := range otherNos {
					n += f.sim.Calls(no)["alipay.trade.query"]
				}
				t.Errorf("the other app got %d of its 3 due queries in the run, want all", n)
			}
			if !res.Behind {
				t.Errorf("the run left the busy app's payments due but is not behind")
			}
			busyQueried, total := 0, 0
			for _, no := range append(append([]string(nil), busyNos...), otherNos...) {
				asked := f.sim.Calls(no)["alipay.trade.query"]
				claimed := f.count(t, "SELECT queries FROM payments WHERE payment_no = ?", no)
				if asked > 1 || claimed != asked {
					t.Errorf("%s: %d claims and %d queries at Alipay, want one query for each claim, at most one", no, claimed, asked)
				}
				total += asked
				if slices.Contains(busyNos, no) {
					busyQueried += asked
				}
			}
			if res.Queried != total {
				t.Errorf("result counts %d queries, Alipay saw %d", res.Queried, total)
			}
			if busyQueried < tc.busyMin || busyQueried > tc.busyMax {
				t.Errorf("%d of the busy app's payments queried, want %d to %d", busyQueried, tc.busyMin, tc.busyMax)
			}
			tried := l.tried.Load()
			t.Logf("%d turns tried for %d queries", tried, total)
			if tried > int64(2*total+10) {
				t.Errorf("%d turns tried for %d queries: the workers crowd the limit", tried, total)
			}
		})
	}
}

// reconcilerOutcome returns paykit_reconciler_queries_total of one outcome.
func reconcilerOutcome(tb testing.TB, reg *prometheus.Registry, outcome string) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "paykit_reconciler_queries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	tb.Fatalf("no paykit_reconciler_queries_total{outcome=%q}", outcome)
	return 0
}

// A run ends as soon as every due payment is served, whatever the number of its workers:
// the ones left waiting for work are woken when there is none left, not at the budget's
// end (a run that outlived its schedule's period held back the next runs, whose
// queries then came late: a payment paid with its notifications lost was closed at
// expiry instead of paid on the reconciler's wake).
func TestReconcileDueEndsWhenNothingIsLeft(t *testing.T) {
	f := newFixture(t)
	// The app's limit in Redis, as every worker has it: a turn takes a round trip, and
	// the other workers wait for work meanwhile.
	rdb, prefix := testenv.Redis(t)
	l := &redis.CallLimiter{Client: redis.New(rdb, prefix), Rate: 100, Burst: 50, Hold: time.Second}
	f.acts.Gateways = gateways.Channels{payment.ChannelAlipay: appGateways{testAppID: gateways.Limited(f.acts.Gateway, testAppID, l)}}
	f.duePaymentsOn(t, testAppID, 3)
	in := activities.ReconcileDueInput{Interval: time.Hour, Page: 100, Parallel: 32, Budget: time.Minute}
	start := time.Now()
	var res activities.ReconcileDueResult
	if err := f.remote(t, &res, f.acts.ReconcileDue, in); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("took %s: %+v", took, res)
	if took > 10*time.Second || res.Queried != 3 {
		t.Fatalf("a run of 32 workers over 3 due payments: %+v in %s, want 3 queried well within its one-minute budget", res, took.Round(time.Millisecond))
	}
}

// A reconciler run is a loop: one activity makes a pass every Every until its Until, so
// the schedule that starts it runs a few times an hour instead of every Every (the
// workflow runs, history events and visibility records of an idle task queue, divided
// by the passes a run makes). A payment that comes due while the run is going is queried
// at its next pass, not at the next run; the run ends at its Until.
func TestReconcileDueLoopsUntilItsEnd(t *testing.T) {
	f := newFixture(t)
	first := f.duePaymentsOn(t, testAppID, 1)
	later := f.createInput("due-later")
	np := payment.NewPayment{PaymentNo: later.PaymentNo, TenantID: later.TenantID, OrderID: later.OrderID, Amount: later.Amount,
		Currency: later.Currency, Subject: later.Subject, ExpireAt: later.ExpireAt, WorkflowID: later.WorkflowID,
		QueryInterval: 30 * time.Second, AlipayAppID: testAppID}
	if _, _, err := f.store.CreatePendingPayment(context.Background(), np); err != nil {
		t.Fatal(err)
	}
	// It comes due a second into the run.
	time.AfterFunc(time.Second, func() {
		if _, err := f.db.Exec("UPDATE payments SET next_query_at = ? WHERE payment_no = ?", time.Now().UTC().Add(-time.Millisecond), later.PaymentNo); err != nil {
			t.Error(err)
		}
	})
	start := time.Now()
	in := activities.ReconcileDueInput{Interval: time.Hour, Page: 10, Parallel: 4, Budget: time.Minute,
		Every: 250 * time.Millisecond, Until: start.Add(3 * time.Second)}
	var res activities.ReconcileDueResult
	if err := f.remote(t, &res, f.acts.ReconcileDue, in); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if res.Queried != 2 || res.Passes < 8 || res.Passes > 13 {
		t.Fatalf("result %+v, want both payments queried over about 12 passes", res)
	}
	if took < 2500*time.Millisecond || took > 4*time.Second {
		t.Fatalf("the run took %s, want it to end at its Until (3 s)", took.Round(time.Millisecond))
	}
	for _, no := range append(first, later.PaymentNo) {
		if q := f.sim.Calls(no)["alipay.trade.query"]; q != 1 {
			t.Errorf("%s: %d queries at Alipay, want 1", no, q)
		}
	}
}

// A worker that stops ends its reconciler loop at once with an error, so that the
// run's retry carries on at another worker until the same Until, rather than holding the
// worker's shutdown for the rest of the loop or leaving the schedule's next run to come.
func TestReconcileDueLoopEndsWhenItsWorkerStops(t *testing.T) {
	f := newFixture(t)
	stop := make(chan struct{})
	f.env.SetWorkerStopChannel(stop)
	time.AfterFunc(500*time.Millisecond, func() { close(stop) })
	start := time.Now()
	in := activities.ReconcileDueInput{Interval: time.Hour, Page: 10, Parallel: 4, Budget: time.Minute,
		Every: 100 * time.Millisecond, Until: start.Add(time.Minute)}
	err := f.remote(t, nil, f.acts.ReconcileDue, in)
	if err == nil || !strings.Contains(err.Error(), "worker stopping") {
		t.Fatalf("error %v, want the loop to end because its worker stops", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the loop ended %s after its worker began stopping, want at once", took.Round(time.Millisecond))
	}
}

func (g appGateways) ForNotification(context.Context, payment.RawNotification) (payment.Gateway, error) {
	return nil, errors.New("appGateways verifies no notification")
}
