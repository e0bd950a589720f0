package activities_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/payment"
)

// redriveRecorder stands in for the orchestrator: it records which payments the sweeper
// asked to re-drive and starts nothing.
type redriveRecorder struct {
	mu  sync.Mutex
	got []string
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
