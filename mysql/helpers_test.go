package mysql_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
)

// newStore returns a store on a fresh, migrated database of its own.
func newStore(tb testing.TB) (*mysql.Store, *sql.DB) {
	tb.Helper()
	db, _ := testenv.MySQL(tb)
	st := mysql.NewStore(db)
	tb.Cleanup(func() {
		if err := st.Close(); err != nil {
			tb.Errorf("close store: %v", err)
		}
	})
	return st, db
}

// newPayment returns a valid pending payment for (tenant, order).
func newPayment(tenantID, orderID, paymentNo string) payment.NewPayment {
	return payment.NewPayment{
		PaymentNo:  paymentNo,
		TenantID:   tenantID,
		OrderID:    orderID,
		Amount:     990,
		Currency:   "CNY",
		Subject:    "test order " + orderID,
		ExpireAt:   time.Now().Add(15 * time.Minute),
		WorkflowID: payment.WorkflowID(tenantID, orderID),
	}
}

// createPending inserts a pending payment and fails the test if it existed.
func createPending(tb testing.TB, st *mysql.Store, tenantID, orderID, paymentNo string) payment.Payment {
	tb.Helper()
	p, existed, err := st.CreatePendingPayment(context.Background(), newPayment(tenantID, orderID, paymentNo))
	if err != nil {
		tb.Fatalf("create %s: %v", paymentNo, err)
	}
	if existed {
		tb.Fatalf("create %s: existed=true, want a new payment", paymentNo)
	}
	return p
}

// count runs a COUNT(*) query.
func count(tb testing.TB, db *sql.DB, query string, args ...any) int {
	tb.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
	return n
}

// orderStatus returns orders.status of (tenant, order).
func orderStatus(tb testing.TB, db *sql.DB, tenantID, orderID string) int {
	tb.Helper()
	var s int
	if err := db.QueryRowContext(context.Background(),
		"SELECT status FROM orders WHERE tenant_id = ? AND order_id = ?", tenantID, orderID).Scan(&s); err != nil {
		tb.Fatalf("order status %s/%s: %v", tenantID, orderID, err)
	}
	return s
}

// Order statuses as stored.
const (
	orderUnpaid    = 0
	orderPaid      = 1
	orderCancelled = 2
)
