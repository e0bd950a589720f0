package mysql_test

import (
	"context"
	"testing"
	"time"
)

// A tenant's payment depends on its Alipay app while it is pending or was paid within
// the refund window; a closed one or an old paid one does not.
func TestTenantOpenPayment(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	since := time.Now().Add(-24 * time.Hour)
	none := func(tenant string) {
		t.Helper()
		if no, err := st.TenantOpenPayment(ctx, tenant, since); err != nil || no != "" {
			t.Fatalf("TenantOpenPayment(%s) = %q, %v; want none", tenant, no, err)
		}
	}
	none("t1")
	createPending(t, st, "t1", "o1", "P1")
	if no, err := st.TenantOpenPayment(ctx, "t1", since); err != nil || no != "P1" {
		t.Fatalf("pending: %q, %v", no, err)
	}
	none("t2")
	if _, err := st.MarkPaid(ctx, "P1", "T1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if no, _ := st.TenantOpenPayment(ctx, "t1", since); no != "P1" {
		t.Fatalf("recently paid: %q", no)
	}
	if _, err := db.ExecContext(ctx, `UPDATE payments SET paid_at = ? WHERE payment_no = 'P1'`, time.Now().Add(-48*time.Hour).UTC()); err != nil {
		t.Fatal(err)
	}
	none("t1")
}
