package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/paykit/paykit/audit"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
)

// TestAuditPage plants payments with every fact the audit reads and pages through them
// two at a time.
func TestAuditPage(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	exec := func(query string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, query, args...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
	paid := func(orderID, paymentNo string, repurchase bool) {
		t.Helper()
		np := newPayment("t1", orderID, paymentNo)
		np.Repurchase = repurchase
		if _, existed, err := st.CreatePendingPayment(ctx, np); err != nil || existed {
			t.Fatalf("create %s: existed=%v err=%v", paymentNo, existed, err)
		}
		if _, err := st.MarkPaid(ctx, paymentNo, "T"+paymentNo, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}

	createPending(t, st, "t1", "old", "P_OLD") // moved out of the window below
	paid("a", "P_A1", false)
	paid("a", "P_A2", true)
	// A second PAID payment that lost its opt-in, as a bug writing it would leave it.
	exec("UPDATE payments SET repurchase = 0 WHERE payment_no = 'P_A2'")
	paid("b", "P_B1", false)
	paid("b", "P_B2", true)
	paid("c", "P_C", false)
	createPending(t, st, "t1", "d", "P_D")
	exec("UPDATE payments SET created_at = ? WHERE payment_no = 'P_OLD'", time.Now().Add(-72*time.Hour).UTC())

	if _, err := st.GrantBenefit(ctx, payment.BenefitGrant{TenantID: "t1", PaymentNo: "P_A1", OrderID: "a", Benefit: "vip"}); err != nil {
		t.Fatal(err)
	}
	for _, no := range []string{"P_A1", "P_B1", "P_B2"} {
		if err := st.MarkEventDelivered(ctx, mysql.EventID(no, payment.EventPaymentPaid)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := st.MarkEventAttempt(ctx, mysql.EventID("P_A2", payment.EventPaymentPaid), "merchant answered HTTP 503", time.Now(), payment.EventRetry{}); err != nil {
		t.Fatal(err)
	}
	exec("DELETE FROM payment_events WHERE payment_no = 'P_C'")

	since, until := time.Now().Add(-24*time.Hour), time.Now().Add(time.Minute)
	var got []audit.Record
	var afterID int64
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		recs, err := st.AuditPage(ctx, "", since, until, afterID, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) > 2 {
			t.Fatalf("page of %d records, limit 2", len(recs))
		}
		if len(recs) == 0 {
			break
		}
		got = append(got, recs...)
		afterID = recs[len(recs)-1].Payment.ID
	}

	type want struct {
		no          string
		status      payment.Status
		granted     bool
		event       audit.EventState
		attempts    int
		lastError   string
		earlierPaid string
	}
	wants := []want{
		{no: "P_A1", status: payment.StatusPaid, granted: true, event: audit.EventSettled, attempts: 1},
		{no: "P_A2", status: payment.StatusPaid, event: audit.EventOwed, attempts: 1, lastError: "merchant answered HTTP 503", earlierPaid: "P_A1"},
		{no: "P_B1", status: payment.StatusPaid, event: audit.EventSettled, attempts: 1},
		{no: "P_B2", status: payment.StatusPaid, event: audit.EventSettled, attempts: 1},
		{no: "P_C", status: payment.StatusPaid, event: audit.EventMissing},
		{no: "P_D", status: payment.StatusPending, event: audit.EventMissing},
	}
	if len(got) != len(wants) {
		t.Fatalf("got %d records, want %d (P_OLD is outside the window)", len(got), len(wants))
	}
	for i, w := range wants {
		r := got[i]
		g := want{no: r.Payment.PaymentNo, status: r.Payment.Status, granted: r.Granted, event: r.Event,
			attempts: r.EventAttempts, lastError: r.EventLastError, earlierPaid: r.EarlierPaid}
		if g != w {
			t.Errorf("record %d: %+v, want %+v", i, g, w)
		}
		if i > 0 && r.Payment.ID <= got[i-1].Payment.ID {
			t.Errorf("record %d: id %d not after %d", i, r.Payment.ID, got[i-1].Payment.ID)
		}
	}
	if got[1].Payment.OrderID != "a" || !got[3].Payment.Repurchase || got[1].Payment.Repurchase {
		t.Errorf("payment columns not scanned: %+v / %+v", got[1].Payment, got[3].Payment)
	}

	recs, err := st.AuditPage(ctx, "", time.Now().Add(-96*time.Hour), time.Now().Add(-48*time.Hour), 0, 100)
	if err != nil || len(recs) != 1 || recs[0].Payment.PaymentNo != "P_OLD" {
		t.Fatalf("window of three days ago: %+v, %v; want P_OLD alone", recs, err)
	}
	// One tenant's payments only: another tenant's in the same window are not read.
	createPending(t, st, "t2", "x", "P_T2")
	if recs, err := st.AuditPage(ctx, "t2", since, until, 0, 100); err != nil || len(recs) != 1 || recs[0].Payment.PaymentNo != "P_T2" {
		t.Fatalf("tenant t2's page: %+v, %v; want P_T2 alone", recs, err)
	}
	if recs, err := st.AuditPage(ctx, "t1", since, until, 0, 100); err != nil || len(recs) != len(wants) {
		t.Fatalf("tenant t1's page: %d records, %v; want %d", len(recs), err, len(wants))
	}
}

func TestAnomalyKinds(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	for _, a := range []payment.Anomaly{
		{Kind: "paid_after_close", PaymentNo: "P1"},
		{Kind: "audit_lost", PaymentNo: "P1"},
		{Kind: "amount_mismatch", PaymentNo: "P2"},
	} {
		if err := st.RecordAnomaly(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	kinds, err := st.AnomalyKinds(ctx, "P1")
	if err != nil || len(kinds) != 2 || kinds[0] != "audit_lost" || kinds[1] != "paid_after_close" {
		t.Fatalf("kinds of P1: %v, %v", kinds, err)
	}
	if kinds, err := st.AnomalyKinds(ctx, "P3"); err != nil || len(kinds) != 0 {
		t.Fatalf("kinds of P3: %v, %v; want none", kinds, err)
	}
}
