package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/paykit/paykit/payment"
)

// A refund's reservation leaves payments.updated_at alone despite the ON UPDATE stamp of
// migration 0025, so the sweeper's grant repair still sees a PAID payment without a
// grant that was marked paid an hour ago.
func TestRefundReservationLeavesThePaymentsUpdatedAt(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	createPending(t, st, "t1", "o1", "P1")
	if _, err := st.MarkPaid(ctx, "P1", "T1", time.Time{}); err != nil {
		t.Fatal(err)
	}
	marked := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	if _, err := db.ExecContext(ctx, "UPDATE payments SET updated_at = ? WHERE payment_no = 'P1'", marked); err != nil {
		t.Fatal(err)
	}
	if ps, _ := st.PaidWithoutGrant(ctx, time.Now().Add(-24*time.Hour), time.Now().Add(-10*time.Minute), 10); len(ps) != 1 {
		t.Fatalf("before the refund: %d payments without grant, want 1", len(ps))
	}
	if _, _, err := st.CreateRefund(ctx, payment.NewRefund{RefundNo: "R1", TenantID: "t1", PaymentNo: "P1", Amount: 100}); err != nil {
		t.Fatal(err)
	}
	p, _ := st.GetPayment(ctx, "P1")
	ps, _ := st.PaidWithoutGrant(ctx, time.Now().Add(-24*time.Hour), time.Now().Add(-10*time.Minute), 10)
	if !p.UpdatedAt.Equal(marked) || len(ps) != 1 {
		t.Fatalf("after a refund reservation: updated_at %s (was %s), %d payments without grant; want updated_at unchanged and 1", p.UpdatedAt, marked, len(ps))
	}
}
