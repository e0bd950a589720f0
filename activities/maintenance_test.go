package activities_test

import (
	"context"
	"sync"
	"testing"
	"time"

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
