package mysql_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
)

// paidPayment inserts a payment of 990 fen and marks it paid.
func paidPayment(tb testing.TB, st *mysql.Store, tenantID, orderID, paymentNo string) payment.Payment {
	tb.Helper()
	createPending(tb, st, tenantID, orderID, paymentNo)
	tr, err := st.MarkPaid(context.Background(), paymentNo, "T"+paymentNo, time.Now())
	if err != nil || !tr.Changed {
		tb.Fatalf("mark paid %s: %+v, %v", paymentNo, tr, err)
	}
	return tr.Payment
}

func newRefund(tenantID, paymentNo, refundNo string, fen int64) payment.NewRefund {
	return payment.NewRefund{RefundNo: refundNo, TenantID: tenantID, PaymentNo: paymentNo, Amount: payment.Amount(fen), Reason: "test"}
}

func TestCreateRefund_ConcurrentPartialRefundsNeverExceedTheAmount(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	p := paidPayment(t, st, "t1", "o1", "pay_refund_many")

	// 20 refunds of 100 fen against 990 fen: at most 9 fit.
	const n = 20
	errs := make([]error, n)
	testenv.Parallel(n, func(i int) {
		_, _, errs[i] = st.CreateRefund(ctx, newRefund("t1", p.PaymentNo, fmt.Sprintf("rf_%02d", i), 100))
	})
	ok, exceeded := 0, 0
	for i, err := range errs {
		switch payment.ErrorCode(err) {
		case "":
			ok++
		case payment.EREFUNDEXCEEDS:
			exceeded++
		default:
			t.Fatalf("refund %d: %v", i, err)
		}
	}
	got, err := st.GetPayment(ctx, p.PaymentNo)
	if err != nil {
		t.Fatal(err)
	}
	rows := count(t, db, "SELECT COUNT(*) FROM refunds WHERE payment_no = ?", p.PaymentNo)
	var sum int64
	if err := db.QueryRowContext(ctx, "SELECT COALESCE(SUM(amount_fen), 0) FROM refunds WHERE payment_no = ? AND status <> 2",
		p.PaymentNo).Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if ok != 9 || exceeded != 11 || rows != 9 || sum != 900 || got.Refunded != 900 || got.RefundState != payment.RefundStatePartial {
		t.Fatalf("ok=%d exceeded=%d rows=%d sum=%d refunded=%d state=%s; want 9, 11, 9, 900, 900, partial",
			ok, exceeded, rows, sum, got.Refunded, got.RefundState)
	}
	if got.Status != payment.StatusPaid {
		t.Fatalf("payment status = %s, want PAID", got.Status)
	}
}

func TestCreateRefund_DuplicateRefundNoReturnsTheExistingRefund(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	p := paidPayment(t, st, "t1", "o1", "pay_refund_dup")

	const n = 20
	refunds := make([]payment.Refund, n)
	existed := make([]bool, n)
	errs := make([]error, n)
	testenv.Parallel(n, func(i int) {
		refunds[i], existed[i], errs[i] = st.CreateRefund(ctx, newRefund("t1", p.PaymentNo, "rf_same", 500))
	})
	created := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if !existed[i] {
			created++
		}
		if refunds[i].OutRequestNo != refunds[0].OutRequestNo || refunds[i].RefundNo != "rf_same" {
			t.Fatalf("caller %d got %+v, caller 0 %+v", i, refunds[i], refunds[0])
		}
	}
	got, _ := st.GetPayment(ctx, p.PaymentNo)
	if rows := count(t, db, "SELECT COUNT(*) FROM refunds WHERE payment_no = ?", p.PaymentNo); created != 1 || rows != 1 || got.Refunded != 500 {
		t.Fatalf("created=%d rows=%d refunded=%d; want 1, 1, 500", created, rows, got.Refunded)
	}
	if refunds[0].OutRequestNo != payment.OutRequestNo("t1", "rf_same") || refunds[0].WorkflowID != "refund:t1:rf_same" {
		t.Fatalf("refund = %+v", refunds[0])
	}
	// The same refund_no for another amount is a conflict, not a second refund.
	if _, _, err := st.CreateRefund(ctx, newRefund("t1", p.PaymentNo, "rf_same", 400)); payment.ErrorCode(err) != payment.ECONFLICT {
		t.Fatalf("same refund_no, other amount: %v, want conflict", err)
	}
	// Another tenant may use the same refund_no, but not on this tenant's payment.
	if _, _, err := st.CreateRefund(ctx, newRefund("t2", p.PaymentNo, "rf_same", 500)); payment.ErrorCode(err) != payment.ENOTFOUND {
		t.Fatalf("other tenant's payment: %v, want not_found", err)
	}
}

func TestCreateRefund_Refusals(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	paid := paidPayment(t, st, "t1", "o1", "pay_refusals")
	pending := createPending(t, st, "t1", "o2", "pay_refusals_pending")
	cases := []struct {
		name string
		in   payment.NewRefund
		want string
	}{
		{"pending payment", newRefund("t1", pending.PaymentNo, "rf_a", 100), payment.ENOTPAID},
		{"zero amount", newRefund("t1", paid.PaymentNo, "rf_b", 0), payment.EINVALID},
		{"negative amount", newRefund("t1", paid.PaymentNo, "rf_c", -5), payment.EINVALID},
		{"above the amount", newRefund("t1", paid.PaymentNo, "rf_d", 991), payment.EREFUNDEXCEEDS},
		{"unknown payment", newRefund("t1", "pay_nope", "rf_e", 100), payment.ENOTFOUND},
		{"bad refund_no", newRefund("t1", paid.PaymentNo, "rf e", 100), payment.EINVALID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := st.CreateRefund(ctx, tc.in); payment.ErrorCode(err) != tc.want {
				t.Fatalf("err = %v, want %s", err, tc.want)
			}
		})
	}
}

// A refund of a payment at a channel whose refunds paykit does not make (WeChat Pay's,
// until they land) is refused as unprocessable before anything is reserved or inserted:
// the merchant is told at once, instead of a refund that fails at the channel.
func TestCreateRefund_RefusedForAChannelWithoutRefunds(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	np := newPayment("t1", "o-wx", "pay_wx_refund")
	np.Method, np.AlipayAppID = payment.MethodWechatNative, "1230000109"
	if _, _, err := st.CreatePendingPayment(ctx, np); err != nil {
		t.Fatal(err)
	}
	if tr, err := st.MarkPaid(ctx, np.PaymentNo, "4200000001", time.Now()); err != nil || !tr.Changed {
		t.Fatalf("mark paid: %+v, %v", tr, err)
	}
	_, _, err := st.CreateRefund(ctx, newRefund("t1", np.PaymentNo, "rf_wx", 100))
	if payment.ErrorCode(err) != payment.EUNPROCESSABLE || !strings.Contains(err.Error(), "WeChat Pay") {
		t.Fatalf("refund of a WeChat Pay payment: %v, want unprocessable naming WeChat Pay", err)
	}
	got, _ := st.GetPayment(ctx, np.PaymentNo)
	if got.Refunded != 0 || count(t, db, "SELECT COUNT(*) FROM refunds WHERE payment_no = ?", np.PaymentNo) != 0 {
		t.Fatalf("refunded %d fen, refunds rows written; want nothing reserved or inserted", got.Refunded)
	}
	// An Alipay payment's refund is made as ever.
	paid := paidPayment(t, st, "t1", "o-ali", "pay_ali_refund")
	if _, _, err := st.CreateRefund(ctx, newRefund("t1", paid.PaymentNo, "rf_ali", 100)); err != nil {
		t.Fatalf("refund of an Alipay payment: %v", err)
	}
}

func TestRefundTransitions_FailReleasesAndEventsCommitWithTheChange(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	p := paidPayment(t, st, "t1", "o1", "pay_refund_tr")

	a, _, err := st.CreateRefund(ctx, newRefund("t1", p.PaymentNo, "rf_a", 600))
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := st.CreateRefund(ctx, newRefund("t1", p.PaymentNo, "rf_b", 390))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.CreateRefund(ctx, newRefund("t1", p.PaymentNo, "rf_c", 1)); payment.ErrorCode(err) != payment.EREFUNDEXCEEDS {
		t.Fatalf("fully reserved: %v", err)
	}

	// Concurrent failures of one refund release its reservation once.
	const n = 10
	trs := make([]payment.RefundTransition, n)
	errs := make([]error, n)
	testenv.Parallel(n, func(i int) { trs[i], errs[i] = st.FailRefund(ctx, "t1", a.RefundNo, "ACQ.TRADE_NOT_ALLOW_REFUND") })
	changed := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("fail %d: %v", i, errs[i])
		}
		if trs[i].Changed {
			changed++
			if trs[i].EventID != mysql.RefundEventID(a.OutRequestNo, payment.EventRefundFailed) {
				t.Fatalf("event id = %s", trs[i].EventID)
			}
		}
	}
	got, _ := st.GetPayment(ctx, p.PaymentNo)
	if changed != 1 || got.Refunded != 390 {
		t.Fatalf("changed=%d refunded=%d; want 1, 390", changed, got.Refunded)
	}
	// A failed refund stays failed: it cannot succeed afterwards.
	if tr, err := st.MarkRefundSucceeded(ctx, "t1", a.RefundNo, "T", time.Time{}); err != nil || tr.Changed || tr.Refund.Status != payment.RefundFailed {
		t.Fatalf("succeed after fail: %+v, %v", tr, err)
	}

	tr, err := st.MarkRefundSucceeded(ctx, "t1", b.RefundNo, "T1", time.Time{})
	if err != nil || !tr.Changed || tr.Refund.Status != payment.RefundSucceeded {
		t.Fatalf("succeed: %+v, %v", tr, err)
	}
	again, err := st.MarkRefundSucceeded(ctx, "t1", b.RefundNo, "T1", time.Time{})
	if err != nil || again.Changed {
		t.Fatalf("succeed again: %+v, %v", again, err)
	}
	if tr, err := st.FailRefund(ctx, "t1", b.RefundNo, "late"); err != nil || tr.Changed {
		t.Fatalf("fail after success: %+v, %v", tr, err)
	}
	ev, err := st.GetEvent(ctx, tr.EventID)
	if err != nil || ev.Type != payment.EventRefundSucceeded || ev.PaymentNo != p.PaymentNo || ev.TenantID != "t1" {
		t.Fatalf("event = %+v, %v", ev, err)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM payment_events WHERE type LIKE 'refund.%' AND payment_no = ?", p.PaymentNo); n != 2 {
		t.Fatalf("refund events = %d, want 2", n)
	}
	got, _ = st.GetPayment(ctx, p.PaymentNo)
	if got.Refunded != 390 || got.RefundState != payment.RefundStatePartial || got.Status != payment.StatusPaid {
		t.Fatalf("payment = %+v", got)
	}
	list, err := st.ListPaymentRefunds(ctx, "t1", p.PaymentNo)
	if err != nil || len(list) != 2 || list[0].RefundNo != "rf_a" || list[1].Status != payment.RefundSucceeded {
		t.Fatalf("list = %+v, %v", list, err)
	}
	if other, err := st.ListPaymentRefunds(ctx, "t2", p.PaymentNo); err != nil || len(other) != 0 {
		t.Fatalf("other tenant's list = %+v, %v", other, err)
	}
	// The released 600 fen can be refunded again.
	if _, _, err := st.CreateRefund(ctx, newRefund("t1", p.PaymentNo, "rf_d", 600)); err != nil {
		t.Fatal(err)
	}
	got, _ = st.GetPayment(ctx, p.PaymentNo)
	if got.RefundState != payment.RefundStateFull {
		t.Fatalf("refund state = %s, want full", got.RefundState)
	}
	pend, err := st.PendingRefundsBefore(ctx, time.Now().Add(time.Minute), 10)
	if err != nil || len(pend) != 1 || pend[0].RefundNo != "rf_d" {
		t.Fatalf("pending = %+v, %v", pend, err)
	}
}
