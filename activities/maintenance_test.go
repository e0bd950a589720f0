package activities_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/testsuite"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
)

// redriveRecorder stands in for the orchestrator: it records which payments the sweeper
// asked to re-drive and starts nothing.
type redriveRecorder struct {
	mu      sync.Mutex
	got     []string
	onCheck func(ctx context.Context, workflowID string)
}

// Running reports no run, or runs onCheck first (a workflow that ends its payment just
// before the sweeper looks).
func (r *redriveRecorder) Running(ctx context.Context, workflowID string) (bool, error) {
	if r.onCheck != nil {
		r.onCheck(ctx, workflowID)
	}
	return false, nil
}

func (r *redriveRecorder) Redrive(_ context.Context, p payment.Payment) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, p.PaymentNo)
	return false, nil
}

// sweep runs one SweepStalePayments activity with the default options. An hour of
// staleness leaves the fixture's fresh pending payments to their workflows.
func (f *fixture) sweep(tb testing.TB) activities.SweepResult {
	tb.Helper()
	var res activities.SweepResult
	if err := f.remote(tb, &res, f.acts.SweepStalePayments, time.Hour, 100, activities.SweepOptions{}); err != nil {
		tb.Fatalf("sweep: %v", err)
	}
	return res
}

// payment creates a payment of the fixture's tenant, pays it if paid is true, and dates
// it (created, paid and last updated) age ago, as if the workflow had stopped then.
func (f *fixture) payment(tb testing.TB, orderID string, paid bool, age time.Duration) payment.Payment {
	tb.Helper()
	ctx := context.Background()
	in := f.createInput(orderID)
	np := payment.NewPayment{PaymentNo: in.PaymentNo, TenantID: in.TenantID, OrderID: in.OrderID, Amount: in.Amount,
		Currency: in.Currency, Subject: in.Subject, ExpireAt: in.ExpireAt, WorkflowID: in.WorkflowID}
	p, _, err := f.store.CreatePendingPayment(ctx, np)
	if err != nil {
		tb.Fatalf("create %s: %v", orderID, err)
	}
	if paid {
		if _, err := f.store.MarkPaid(ctx, p.PaymentNo, "T"+randomHex(12), time.Time{}); err != nil {
			tb.Fatalf("mark %s paid: %v", orderID, err)
		}
	}
	at := time.Now().Add(-age).UTC()
	if _, err := f.db.ExecContext(ctx, `UPDATE payments SET created_at = ?, updated_at = ?,
		paid_at = IF(status = 1, ?, NULL) WHERE payment_no = ?`, at, at, at, p.PaymentNo); err != nil {
		tb.Fatalf("backdate %s: %v", orderID, err)
	}
	return p
}

// TestSweep_RepairsMissingGrants is a workflow that marked its payment PAID and then lost
// the grant (the local activity gave up, or the run was terminated in between): the
// sweeper grants it once the grace has passed, exactly once, and touches nothing else.
func TestSweep_RepairsMissingGrants(t *testing.T) {
	f := newFixture(t)
	f.acts.Redriver = &redriveRecorder{}
	tests := []struct {
		name       string
		paid       bool
		age        time.Duration
		granted    bool // the workflow's own grant went through
		wantGrants int
	}{
		{"paid without grant past the grace", true, 10 * time.Minute, false, 1},
		{"paid without grant within the grace", true, 30 * time.Second, false, 0},
		{"paid and granted by its workflow", true, 10 * time.Minute, true, 1},
		{"pending", false, 10 * time.Minute, false, 0},
	}
	payments := make([]payment.Payment, len(tests))
	for i, tc := range tests {
		payments[i] = f.payment(t, "order-grant-"+randomHex(4), tc.paid, tc.age)
		if tc.granted {
			in := activities.GrantBenefitInput{TenantID: f.tenantID, PaymentNo: payments[i].PaymentNo, OrderID: payments[i].OrderID}
			if err := f.local(t, nil, f.acts.GrantBenefit, in); err != nil {
				t.Fatal(err)
			}
		}
	}

	first := f.sweep(t)
	second := f.sweep(t)
	t.Logf("first sweep %+v; second sweep %+v", first, second)
	if first.GrantsRepaired != 1 || second.GrantsRepaired != 0 {
		t.Fatalf("grants repaired: %d then %d, want 1 then 0", first.GrantsRepaired, second.GrantsRepaired)
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := f.count(t, "SELECT COUNT(*) FROM benefit_grants WHERE tenant_id = ? AND payment_no = ? AND benefit = ?",
				f.tenantID, payments[i].PaymentNo, f.acts.Benefit)
			if n != tc.wantGrants {
				t.Fatalf("grants = %d, want %d", n, tc.wantGrants)
			}
		})
	}
}

// TestSweep_RenamedBenefitGrantsNothingAgain: payments granted under one benefit name,
// then PAYKIT_BENEFIT renamed before the next sweep: the sweep grants none of them again.
// Before, the repair joined on the current name and granted every recent paid payment a
// second time.
func TestSweep_RenamedBenefitGrantsNothingAgain(t *testing.T) {
	f := newFixture(t)
	f.acts.Redriver = &redriveRecorder{}
	f.acts.Benefit = "order_fulfilment"
	var nos []string
	for range 3 {
		p := f.payment(t, "order-rename-"+randomHex(4), true, 10*time.Minute)
		in := activities.GrantBenefitInput{TenantID: f.tenantID, PaymentNo: p.PaymentNo, OrderID: p.OrderID}
		if err := f.local(t, nil, f.acts.GrantBenefit, in); err != nil {
			t.Fatal(err)
		}
		nos = append(nos, p.PaymentNo)
	}
	f.acts.Benefit = "vip_30d"
	if res := f.sweep(t); res.GrantsRepaired != 0 {
		t.Fatalf("after the rename the sweep repaired %d grants, want 0", res.GrantsRepaired)
	}
	for _, no := range nos {
		if n := f.count(t, "SELECT COUNT(*) FROM benefit_grants WHERE tenant_id = ? AND payment_no = ?", f.tenantID, no); n != 1 {
			t.Fatalf("payment %s has %d grants, want 1", no, n)
		}
	}
}

// endpoint is a merchant webhook endpoint that counts deliveries per event id. With
// hang set it never answers in time: it holds each request until the client gives up.
type endpoint struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

func newEndpoint(tb testing.TB, delay time.Duration, hang bool) *endpoint {
	tb.Helper()
	e := &endpoint{hits: map[string]int{}}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		e.mu.Lock()
		e.hits[r.Header.Get(activities.EventIDHeader)]++
		e.mu.Unlock()
		wait := delay
		if hang {
			wait = time.Minute
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(wait):
		}
		w.WriteHeader(http.StatusOK)
	}))
	tb.Cleanup(e.srv.Close)
	return e
}

// deliveries returns how many requests each event id received.
func (e *endpoint) deliveries() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.hits)
}

// tenant registers another tenant whose webhooks go to e.
func (f *fixture) tenant(tb testing.TB, e *endpoint) string {
	tb.Helper()
	id := "t_" + randomHex(4)
	if err := f.store.UpsertTenant(context.Background(), payment.Tenant{
		ID: id, Name: "sweep test", APIKeyHash: randomHex(32), NotifyURL: e.srv.URL + "/webhooks",
		WebhookSecret: testSecret, AlipayAppID: testAppID, AlipaySeller: testSellerID, CreatedAt: time.Now(),
	}); err != nil {
		tb.Fatal(err)
	}
	return id
}

// paidEvents pays n new payments of tenantID and returns their outbox event ids, oldest
// first. Their workflows are taken to have given up on delivering them.
func (f *fixture) paidEvents(tb testing.TB, tenantID string, n int) []string {
	tb.Helper()
	ctx := context.Background()
	ids := make([]string, n)
	for i := range ids {
		in := f.createInput("order-" + randomHex(6))
		np := payment.NewPayment{PaymentNo: in.PaymentNo, TenantID: tenantID, OrderID: in.OrderID, Amount: in.Amount,
			Currency: in.Currency, Subject: in.Subject, ExpireAt: in.ExpireAt, WorkflowID: payment.WorkflowID(tenantID, in.OrderID)}
		if _, _, err := f.store.CreatePendingPayment(ctx, np); err != nil {
			tb.Fatal(err)
		}
		tr, err := f.store.MarkPaid(ctx, in.PaymentNo, "T"+randomHex(12), time.Time{})
		if err != nil {
			tb.Fatal(err)
		}
		ids[i] = tr.EventID
	}
	return ids
}

// sweepEvents runs one sweep that takes every event created so far as stale.
func (f *fixture) sweepEvents(ctx context.Context, tb testing.TB) activities.SweepResult {
	tb.Helper()
	res, err := f.acts.SweepStalePayments(ctx, 0, 500, activities.SweepOptions{})
	if err != nil {
		tb.Errorf("sweep: %v", err)
	}
	return res
}

// TestSweep_OneHangingMerchantDoesNotStarveOthers: tenant A's endpoint hangs on each of
// its 40 due events, tenant B's answers at once. One sweep must deliver all of B's
// events, and must not spend a timeout on each of A's.
func TestSweep_OneHangingMerchantDoesNotStarveOthers(t *testing.T) {
	f := newFixture(t)
	f.acts.Redriver = &redriveRecorder{}
	const timeout = 300 * time.Millisecond
	f.acts.HTTP = &http.Client{Timeout: timeout}
	slow, fast := newEndpoint(t, 0, true), newEndpoint(t, 0, false)
	a, b := f.tenant(t, slow), f.tenant(t, fast)
	aEvents := f.paidEvents(t, a, 40) // older, so first in line
	bEvents := f.paidEvents(t, b, 3)

	start := time.Now()
	res := f.sweepEvents(context.Background(), t)
	elapsed := time.Since(start)
	got := fast.deliveries()
	t.Logf("sweep took %v (40 × timeout would be %v): %+v; A's endpoint saw %d requests, B's %d",
		elapsed.Round(time.Millisecond), 40*timeout, res, len(slow.deliveries()), len(got))
	for _, id := range bEvents {
		ev, err := f.store.GetEvent(context.Background(), id)
		if err != nil || !ev.Delivered || got[id] != 1 {
			t.Errorf("tenant B event %s: delivered=%v, received %d times (%v); want delivered once", id, ev.Delivered, got[id], err)
		}
	}
	if limit := 40 * timeout / 4; elapsed > limit {
		t.Errorf("sweep took %v, want under %v: tenant A's hanging endpoint held the sweep", elapsed, limit)
	}
	for _, id := range aEvents {
		if ev, _ := f.store.GetEvent(context.Background(), id); ev.Delivered {
			t.Errorf("tenant A event %s delivered by an endpoint that never answered", id)
		}
	}
}

// TestSweep_ConcurrentSweepsDeliverEachEventOnce runs two sweeps over the same due events
// at the same moment (two workers, or a sweep overlapping its retry): each event reaches
// the merchant exactly once.
func TestSweep_ConcurrentSweepsDeliverEachEventOnce(t *testing.T) {
	f := newFixture(t)
	f.acts.Redriver = &redriveRecorder{}
	e := newEndpoint(t, 20*time.Millisecond, false)
	var ids []string
	for range 2 {
		ids = append(ids, f.paidEvents(t, f.tenant(t, e), 10)...)
	}
	results := make([]activities.SweepResult, 2)
	testenv.Parallel(len(results), func(i int) { results[i] = f.sweepEvents(context.Background(), t) })

	got := e.deliveries()
	t.Logf("two concurrent sweeps: %+v and %+v; %d events, %d received", results[0], results[1], len(ids), len(got))
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("event %s received %d times, want exactly once", id, got[id])
		}
		if ev, err := f.store.GetEvent(context.Background(), id); err != nil || !ev.Delivered {
			t.Errorf("event %s not marked delivered: %+v %v", id, ev, err)
		}
	}
	if n := results[0].EventsRedelivered + results[1].EventsRedelivered; n != len(ids) {
		t.Errorf("sweeps report %d redelivered, want %d", n, len(ids))
	}
}

// TestSweep_BacksOffAndGivesUp follows one event whose merchant keeps failing through
// sweeps at known times: the sweeper tries it only once it is due again, and after its
// last allowed attempt it is dead, counted, and never tried again.
func TestSweep_BacksOffAndGivesUp(t *testing.T) {
	f := newFixture(t)
	f.acts.Redriver = &redriveRecorder{}
	reg := prometheus.NewRegistry()
	f.acts.Metrics = activities.NewMetrics(reg)
	f.acts.EventRetry = payment.EventRetry{Base: time.Minute, Max: time.Hour, MaxAttempts: 3}
	f.merchant.answer(http.StatusServiceUnavailable)
	id := f.paidEvents(t, f.tenantID, 1)[0]
	t0 := time.Now()
	tests := []struct {
		name      string
		at        time.Duration // sweep time after t0
		wantTried bool
		wantDead  bool
	}{
		{"first sweep tries it", 0, true, false},
		{"not due 59s later", 59 * time.Second, false, false},
		{"due a minute after the failure", 61 * time.Second, true, false},
		{"backed off two minutes now", 2 * time.Minute, false, false},
		{"third attempt is the last", 4 * time.Minute, true, true},
		{"dead events are not tried", 48 * time.Hour, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f.acts.Now = func() time.Time { return t0.Add(tc.at) }
			before := len(f.merchant.deliveries())
			res := f.sweepEvents(context.Background(), t)
			tried := len(f.merchant.deliveries()) - before
			ev, err := f.store.GetEvent(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("sweep at t0+%v: %+v; event attempts=%d next=t0+%v dead=%v", tc.at, res, ev.Attempts,
				ev.NextAttemptAt.Sub(t0).Round(time.Second), ev.Dead)
			if (tried == 1) != tc.wantTried || tried > 1 || ev.Dead != tc.wantDead || ev.Delivered {
				t.Fatalf("merchant got %d requests, dead=%v delivered=%v; want tried=%v dead=%v", tried, ev.Dead, ev.Delivered, tc.wantTried, tc.wantDead)
			}
			if wantDied := tc.wantTried && tc.wantDead; (res.EventsDead == 1) != wantDied {
				t.Fatalf("EventsDead = %d, want the sweep that used the last attempt to count it", res.EventsDead)
			}
		})
	}
	if n := counter(t, reg, "paykit_webhook_events_dead_total"); n != 1 {
		t.Fatalf("paykit_webhook_events_dead_total = %v, want 1", n)
	}
}

// counter returns the value of a counter without labels registered on reg.
func counter(tb testing.TB, reg *prometheus.Registry, name string) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	tb.Fatalf("no metric %s", name)
	return 0
}

// TestDeliverWebhook_FailuresScheduleTheSweeper: the workflow's own attempts count
// toward the event's backoff and its cap. The one that uses up the attempts is not
// retried, and a delivery that succeeds later (an operator's) still goes through.
func TestDeliverWebhook_FailuresScheduleTheSweeper(t *testing.T) {
	f := newFixture(t)
	f.acts.EventRetry = payment.EventRetry{Base: time.Minute, Max: time.Hour, MaxAttempts: 3}
	t0 := time.Now().UTC().Truncate(time.Microsecond)
	f.acts.Now = func() time.Time { return t0 }
	f.merchant.answer(http.StatusBadGateway)
	id := f.paidEvents(t, f.tenantID, 1)[0]
	tests := []struct {
		name      string
		wantNext  time.Duration
		wantDead  bool
		wantFinal bool // the error is non-retryable
	}{
		{"first failure", time.Minute, false, false},
		{"second", 2 * time.Minute, false, false},
		{"third uses up the attempts", 4 * time.Minute, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := f.remote(t, nil, f.acts.DeliverWebhook, id)
			if tc.wantFinal {
				applicationError(t, err, activities.ErrTypeEventDead, true)
			} else if err == nil {
				t.Fatal("a 502 was taken as delivered")
			}
			ev, gerr := f.store.GetEvent(context.Background(), id)
			if gerr != nil || ev.NextAttemptAt.Sub(t0) != tc.wantNext || ev.Dead != tc.wantDead {
				t.Fatalf("event after the failure: next=t0+%v dead=%v (%v); want t0+%v dead=%v",
					ev.NextAttemptAt.Sub(t0), ev.Dead, gerr, tc.wantNext, tc.wantDead)
			}
		})
	}
	f.merchant.answer(http.StatusOK)
	if err := f.remote(t, nil, f.acts.DeliverWebhook, id); err != nil {
		t.Fatalf("manual redelivery of a dead event: %v", err)
	}
	if ev, _ := f.store.GetEvent(context.Background(), id); !ev.Delivered || ev.Dead {
		t.Fatalf("dead event delivered later: %+v, want delivered and not dead", ev)
	}
}

// TestSweep_StartsNoDeliveryItCannotFinish gives the sweep less time than one request
// and its bookkeeping need: it starts none, and claims nothing another sweep would then
// have to wait out.
func TestSweep_StartsNoDeliveryItCannotFinish(t *testing.T) {
	f := newFixture(t)
	f.acts.Redriver = &redriveRecorder{}
	f.acts.HTTP = &http.Client{Timeout: time.Second}
	ids := f.paidEvents(t, f.tenantID, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	res := f.sweepEvents(ctx, t)
	t.Logf("sweep with 2s left: %+v", res)
	if res.EventsRedelivered+res.EventsFailed != 0 || res.EventsDeferred != len(ids) || len(f.merchant.deliveries()) != 0 {
		t.Fatalf("sweep near its deadline: %+v, merchant got %d; want all %d deferred", res, len(f.merchant.deliveries()), len(ids))
	}
	for _, id := range ids {
		if ev, _ := f.store.GetEvent(context.Background(), id); !ev.NextAttemptAt.IsZero() {
			t.Fatalf("event %s claimed by a sweep that did not deliver it: %+v", id, ev)
		}
	}
}

// A payment listed as pending whose run closes it and ends just before the sweeper checks
// the run is not re-driven: the sweeper re-reads the payment after seeing no run.
func TestSweep_DoesNotRedriveAPaymentItsRunEndedDuringTheSweep(t *testing.T) {
	f := newFixture(t)
	closing := f.payment(t, "sweep-race-closed", false, 2*time.Hour)
	gone := f.payment(t, "sweep-race-gone", false, 2*time.Hour)
	rec := &redriveRecorder{onCheck: func(ctx context.Context, workflowID string) {
		if workflowID == closing.WorkflowID {
			if _, err := f.store.ClosePayment(ctx, closing.PaymentNo, "expired"); err != nil {
				t.Error(err)
			}
		}
	}}
	f.acts.Redriver = rec
	var res activities.SweepResult
	if err := f.remote(t, &res, f.acts.SweepStalePayments, time.Hour, 100, activities.SweepOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.got) != 1 || rec.got[0] != gone.PaymentNo {
		t.Fatalf("re-drove %v, want only %s (the payment whose run closed it must be left alone)", rec.got, gone.PaymentNo)
	}
}

// A notify_url that answers with a redirect is a failed attempt: the signed event is never
// sent on to where the redirect points (a 307 would re-post body and signature, to a host
// inside paykit's network if the merchant says so).
func TestDeliverWebhook_NeverFollowsARedirect(t *testing.T) {
	f := newFixture(t)
	var inside atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(target.Close)
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound} {
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/_sim/trades/P_other/pay", code)
		}))
		t.Cleanup(redirector.Close)
		id := "t_" + randomHex(4)
		if err := f.store.UpsertTenant(context.Background(), payment.Tenant{
			ID: id, Name: "redirect test", APIKeyHash: randomHex(32), NotifyURL: redirector.URL + "/webhooks",
			WebhookSecret: testSecret, AlipayAppID: testAppID, AlipaySeller: testSellerID, CreatedAt: time.Now(),
		}); err != nil {
			t.Fatal(err)
		}
		ev := f.paidEvents(t, id, 1)[0]
		if err := f.remote(t, nil, f.acts.DeliverWebhook, ev); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("HTTP %d", code)) {
			t.Fatalf("notify_url answering %d: %v, want a failed attempt naming HTTP %d", code, err, code)
		}
		if got, _ := f.store.GetEvent(context.Background(), ev); got.Delivered {
			t.Fatalf("event delivered through a %d redirect", code)
		}
	}
	if n := inside.Load(); n != 0 {
		t.Fatalf("the redirect target received %d requests, want none", n)
	}
}

// The scheduled purge deletes the delivered events older than EventRetention and keeps the
// recent ones and every one still owed to its merchant.
func TestPurgeDeliveredEvents(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.acts.EventRetention = 30 * 24 * time.Hour
	old := f.paidEvents(t, f.tenantID, 3)
	recent := f.paidEvents(t, f.tenantID, 1)
	for _, id := range append(old[:2:2], recent...) {
		if err := f.store.MarkEventDelivered(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	// old[2] is old and never delivered.
	if _, err := f.db.ExecContext(ctx, "UPDATE payment_events SET created_at = ? WHERE event_id IN (?, ?, ?)",
		time.Now().Add(-31*24*time.Hour).UTC(), old[0], old[1], old[2]); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := f.remote(t, &n, f.acts.PurgeDeliveredEvents); err != nil {
		t.Fatal(err)
	}
	left := f.count(t, "SELECT COUNT(*) FROM payment_events WHERE tenant_id = ?", f.tenantID)
	if n != 2 || left != 2 || f.count(t, "SELECT COUNT(*) FROM payment_events WHERE event_id IN (?, ?)", old[2], recent[0]) != 2 {
		t.Fatalf("purged %d, %d left; want the 2 old delivered ones purged, the old undelivered and the recent one kept", n, left)
	}
}

// TestSweep_WalksPastAFullPageOfStuckPayments: more stuck pending payments than one sweep
// reads, and a newer one whose run is gone. Each scheduled sweep is handed the result of
// the last, as the schedule does: the second reaches the newer payment, and the third
// starts from the oldest again.
func TestSweep_WalksPastAFullPageOfStuckPayments(t *testing.T) {
	f := newFixture(t)
	rec := &redriveRecorder{}
	f.acts.Redriver = rec
	var old []string
	for i := range 3 {
		p := f.payment(t, "order-stuck-"+randomHex(4), false, 3*time.Hour-time.Duration(i)*time.Minute)
		old = append(old, p.PaymentNo)
	}
	newer := f.payment(t, "order-newer-"+randomHex(4), false, 2*time.Hour).PaymentNo
	var last *activities.SweepResult
	for i, want := range [][]string{old, {newer}, old} {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		env.RegisterActivity(f.acts)
		workflows.Register(env)
		if last != nil {
			env.SetLastCompletionResult(*last)
		}
		rec.got = nil
		env.ExecuteWorkflow(workflows.SweeperWorkflowName, workflows.SweepInput{StaleAfter: time.Hour, Limit: 3})
		var res activities.SweepResult
		if err := env.GetWorkflowError(); err != nil {
			t.Fatalf("sweep %d: %v", i+1, err)
		}
		if err := env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(rec.got, want) {
			t.Fatalf("sweep %d re-drove %v, want %v", i+1, rec.got, want)
		}
		last = &res
	}
}
