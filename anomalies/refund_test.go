package anomalies_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/paykit/paykit/anomalies"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
)

// startRecorder records the refunds whose workflow the command started.
type startRecorder struct {
	mu  sync.Mutex
	got []payment.Refund
}

func (s *startRecorder) StartRefund(_ context.Context, r payment.Refund) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, r)
	return nil
}

func TestRefundAnomalyRefundsOnceHoweverOftenItRuns(t *testing.T) {
	db, _ := testenv.MySQL(t)
	st := mysql.NewStore(db)
	t.Cleanup(func() { _ = st.Close() })
	ctx := context.Background()
	p, _, err := st.CreatePendingPayment(ctx, payment.NewPayment{PaymentNo: "PCLOSED", TenantID: "t1", OrderID: "o1", Amount: 990,
		Currency: "CNY", Subject: "s", ExpireAt: time.Now().Add(time.Minute), WorkflowID: "payment:t1:o1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ClosePayment(ctx, p.PaymentNo, "expired"); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordAnomaly(ctx, payment.Anomaly{Kind: "paid_after_close", TenantID: "t1", PaymentNo: p.PaymentNo,
		TradeNo: "T1", Amount: 990}); err != nil {
		t.Fatal(err)
	}
	rec := &startRecorder{}
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range errs {
		wg.Go(func() { errs[i] = anomalies.RefundPaidAfterClose(ctx, &bytes.Buffer{}, st, rec, p.PaymentNo) })
	}
	wg.Wait()
	var out bytes.Buffer
	if err := anomalies.RefundPaidAfterClose(ctx, &out, st, rec, p.PaymentNo); err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	var rows int
	if err := db.QueryRow("SELECT COUNT(*) FROM refunds WHERE payment_no = ?", p.PaymentNo).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	got, _ := st.GetPayment(ctx, p.PaymentNo)
	if rows != 1 || got.Refunded != 990 || got.Status != payment.StatusClosed || len(rec.got) != 6 {
		t.Fatalf("refunds = %d, refunded = %d, status = %s, starts = %d; want 1, 990, CLOSED, 6", rows, got.Refunded, got.Status, len(rec.got))
	}
	for _, r := range rec.got {
		if r.RefundNo != payment.AnomalyRefundNo(p.PaymentNo) || r.Amount != 990 {
			t.Fatalf("started %+v", r)
		}
	}
	t.Log(out.String())

	// No anomaly, no refund; and a PAID payment is not refunded this way.
	if err := anomalies.RefundPaidAfterClose(ctx, &out, st, rec, "PNONE"); err == nil {
		t.Fatal("refund without an anomaly went through")
	}
	paid, _, _ := st.CreatePendingPayment(ctx, payment.NewPayment{PaymentNo: "PPAID", TenantID: "t1", OrderID: "o2", Amount: 500,
		Currency: "CNY", Subject: "s", ExpireAt: time.Now().Add(time.Minute), WorkflowID: "payment:t1:o2"})
	if _, err := st.MarkPaid(ctx, paid.PaymentNo, "T2", time.Time{}); err != nil {
		t.Fatal(err)
	}
	_ = st.RecordAnomaly(ctx, payment.Anomaly{Kind: "paid_after_close", TenantID: "t1", PaymentNo: paid.PaymentNo, Amount: 500})
	if err := anomalies.RefundPaidAfterClose(ctx, &out, st, rec, paid.PaymentNo); payment.ErrorCode(err) != payment.ECONFLICT {
		t.Fatalf("PAID payment: %v, want conflict", err)
	}
}
