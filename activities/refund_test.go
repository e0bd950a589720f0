package activities_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/payment/paymenttest"
)

// refundGateway answers every refund with err.
type refundGateway struct {
	paymenttest.Gateway
	err error
}

func (g refundGateway) Refund(_ context.Context, req payment.RefundRequest) (payment.RefundResult, error) {
	if g.err != nil {
		return payment.RefundResult{}, g.err
	}
	return payment.RefundResult{FundChange: true, RefundAmount: req.Amount}, nil
}

func TestRefundAtChannelClassifiesAlipaysAnswers(t *testing.T) {
	refused := func(sub string) error {
		return &payment.ChannelError{Op: "alipay.trade.refund", Code: "40004", SubCode: sub, Message: "Business Failed"}
	}
	cases := []struct {
		name          string
		err           error
		wantType      string // "" for a success
		wantRetryable bool
	}{
		{"success", nil, "", false},
		{"system error is unknown: retried", &payment.ChannelError{Op: "alipay.trade.refund", SubCode: "ACQ.SYSTEM_ERROR", Retryable: true}, "", true},
		{"timeout is unknown: retried", &payment.ChannelError{Op: "alipay.trade.refund", Message: "timeout", Retryable: true}, "", true},
		{"balance shortfall", refused(activities.SubCodeSellerBalanceNotEnough), activities.ErrTypeBalanceShortfall, false},
		{"not allowed", refused("ACQ.TRADE_NOT_ALLOW_REFUND"), activities.ErrTypeChannelRefused, false},
		{"amount above total", refused("ACQ.REFUND_AMT_NOT_EQUAL_TOTAL"), activities.ErrTypeChannelRefused, false},
		{"prefixed balance shortfall", refused("aop." + activities.SubCodeSellerBalanceNotEnough), activities.ErrTypeBalanceShortfall, false},
		{"answer that fails its signature is unknown: retried", &payment.ChannelError{Op: "alipay.trade.refund", Message: "bad signature"}, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			acts := &activities.Activities{Gateway: refundGateway{err: tc.err}}
			_, err := acts.RefundAtChannel(context.Background(), activities.RefundChannelInput{PaymentNo: "P1", OutRequestNo: "R1", Amount: 100})
			if tc.err == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var appErr *temporal.ApplicationError
			isApp := errors.As(err, &appErr)
			if tc.wantRetryable {
				if isApp && appErr.NonRetryable() {
					t.Fatalf("err = %v, want retryable", err)
				}
				return
			}
			if !isApp || !appErr.NonRetryable() || appErr.Type() != tc.wantType {
				t.Fatalf("err = %v, want non-retryable %s", err, tc.wantType)
			}
		})
	}
}

// refundRedriveRecorder records which refunds the sweeper asked to re-drive.
type refundRedriveRecorder struct{ got []string }

func (r *refundRedriveRecorder) RedriveRefund(_ context.Context, rf payment.Refund) (bool, error) {
	r.got = append(r.got, rf.RefundNo)
	return true, nil
}

// TestSweep_RedrivesStalePendingRefunds is a refund whose workflow never started (the
// API's start failed and no retry came): the sweeper starts it once it is stale, and
// leaves fresh and final refunds alone.
func TestSweep_RedrivesStalePendingRefunds(t *testing.T) {
	f := newFixture(t)
	f.acts.Redriver = &redriveRecorder{}
	rec := &refundRedriveRecorder{}
	f.acts.RefundRedriver = rec
	ctx := context.Background()
	p := f.payment(t, "o-refund-sweep", true, 0)
	for _, no := range []string{"rf_stale", "rf_fresh", "rf_done"} {
		if _, _, err := f.store.CreateRefund(ctx, payment.NewRefund{RefundNo: no, TenantID: f.tenantID, PaymentNo: p.PaymentNo, Amount: 100}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.store.MarkRefundSucceeded(ctx, f.tenantID, "rf_done", "T", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.ExecContext(ctx, "UPDATE refunds SET created_at = ? WHERE refund_no IN ('rf_stale', 'rf_done')",
		time.Now().Add(-2*time.Hour).UTC()); err != nil {
		t.Fatal(err)
	}
	res := f.sweep(t)
	if res.RefundsRedriven != 1 || len(rec.got) != 1 || rec.got[0] != "rf_stale" {
		t.Fatalf("re-driven %d: %v; want only rf_stale", res.RefundsRedriven, rec.got)
	}
}

// TestRecordAnomaly_AutoRefundsPaidAfterClose: a tenant that opted in has the money of a
// paid_after_close anomaly refunded when it is recorded, once however often it is.
func TestRecordAnomaly_AutoRefundsPaidAfterClose(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tn, err := f.store.GetTenant(ctx, f.tenantID)
	if err != nil {
		t.Fatal(err)
	}
	tn.AutoRefundPaidAfterClose = true
	if err := f.store.UpsertTenant(ctx, tn); err != nil {
		t.Fatal(err)
	}
	rec := &refundRedriveRecorder{}
	f.acts.RefundRedriver = rec
	p := f.payment(t, "o-auto-refund", false, 0)
	if _, err := f.store.ClosePayment(ctx, p.PaymentNo, "expired"); err != nil {
		t.Fatal(err)
	}
	in := activities.AnomalyInput{Kind: payment.AnomalyPaidAfterClose, TenantID: f.tenantID, PaymentNo: p.PaymentNo,
		TradeNo: "T1", Amount: p.Amount, Detail: "test"}
	for range 3 {
		if err := f.acts.RecordAnomaly(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	refunds, err := f.store.ListPaymentRefunds(ctx, f.tenantID, p.PaymentNo)
	if err != nil || len(refunds) != 1 || refunds[0].RefundNo != payment.AnomalyRefundNo(p.PaymentNo) || refunds[0].Amount != p.Amount {
		t.Fatalf("refunds = %+v, %v; want one of the whole amount", refunds, err)
	}
	got, _ := f.store.GetPayment(ctx, p.PaymentNo)
	if got.Refunded != p.Amount || got.Status != payment.StatusClosed || len(rec.got) != 3 {
		t.Fatalf("refunded %d, %s, re-drives %v", got.Refunded, got.Status, rec.got)
	}
	// Another kind, or a tenant that did not opt in, refunds nothing.
	q := f.payment(t, "o-no-auto", false, 0)
	_, _ = f.store.ClosePayment(ctx, q.PaymentNo, "expired")
	if err := f.acts.RecordAnomaly(ctx, activities.AnomalyInput{Kind: "amount_mismatch", TenantID: f.tenantID, PaymentNo: q.PaymentNo, Amount: 5}); err != nil {
		t.Fatal(err)
	}
	if rs, _ := f.store.ListPaymentRefunds(ctx, f.tenantID, q.PaymentNo); len(rs) != 0 {
		t.Fatalf("amount_mismatch refunded: %+v", rs)
	}
}

// TestRefundSucceededAfterFail_OneAnomalyPerRefund: two refunds of one payment that both
// FAILED locally (their reservations released) and that Alipay both carried out are two
// refund_succeeded_after_fail anomalies, one per out_request_no, as the refund workflow
// records them on Alipay's word (query, mark succeeded, anomaly). Before, the second
// record of the kind on the payment was dropped: Alipay had refunded 600 fen, refunded_fen
// was 0, and the one anomaly named the first refund only.
func TestRefundSucceededAfterFail_OneAnomalyPerRefund(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	in := f.createInput("o-two-refunds")
	if err := f.local(t, nil, f.acts.CreatePayment, in); err != nil {
		t.Fatal(err)
	}
	if err := f.remote(t, nil, f.acts.OpenTrade, activities.OpenTradeInput{PaymentNo: in.PaymentNo, Subject: in.Subject,
		Amount: in.Amount, ExpireAt: in.ExpireAt, Method: payment.MethodQR}); err != nil {
		t.Fatal(err)
	}
	trade, err := f.sim.Pay(testAppID, in.PaymentNo, "2088102100000001")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.MarkPaid(ctx, in.PaymentNo, trade.TradeNo, time.Time{}); err != nil {
		t.Fatal(err)
	}

	var refunds []payment.Refund
	for _, no := range []string{"r1", "r2"} {
		r, _, err := f.store.CreateRefund(ctx, payment.NewRefund{RefundNo: no, TenantID: f.tenantID, PaymentNo: in.PaymentNo, Amount: 300})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.remote(t, nil, f.acts.RefundAtChannel, activities.RefundChannelInput{
			PaymentNo: r.PaymentNo, OutRequestNo: r.OutRequestNo, Amount: r.Amount}); err != nil {
			t.Fatalf("refund %s at alipay: %v", no, err)
		}
		// Its run lost Alipay's answer and gave up: FAILED locally, reservation released.
		if err := f.local(t, nil, f.acts.FailRefund, activities.FailRefundInput{TenantID: f.tenantID, RefundNo: no, Reason: "gave up"}); err != nil {
			t.Fatal(err)
		}
		refunds = append(refunds, r)
	}

	// Each refund's run asks Alipay again, which confirms it, and records the anomaly as
	// the workflow does: about the refund's out_request_no.
	for _, r := range refunds {
		var st payment.RefundStatusAtChannel
		if err := f.remote(t, &st, f.acts.QueryRefundAtChannel, activities.RefundQueryInput{PaymentNo: r.PaymentNo, OutRequestNo: r.OutRequestNo}); err != nil {
			t.Fatal(err)
		}
		if !st.Found || st.RefundAmount != r.Amount {
			t.Fatalf("alipay's answer for %s: %+v, want found, %d fen", r.RefundNo, st, r.Amount)
		}
		var tr payment.RefundTransition
		if err := f.local(t, &tr, f.acts.MarkRefundSucceeded, activities.MarkRefundSucceededInput{
			TenantID: f.tenantID, RefundNo: r.RefundNo, TradeNo: st.TradeNo, RefundedAt: st.RefundedAt}); err != nil {
			t.Fatal(err)
		}
		if tr.Changed || tr.Refund.Status != payment.RefundFailed {
			t.Fatalf("mark %s succeeded: %+v, want it left FAILED", r.RefundNo, tr)
		}
		for range 2 { // a retried local activity records it again
			if err := f.local(t, nil, f.acts.RecordAnomaly, activities.AnomalyInput{
				Kind: "refund_succeeded_after_fail", TenantID: f.tenantID, PaymentNo: r.PaymentNo, Subject: r.OutRequestNo,
				TradeNo: st.TradeNo, Amount: r.Amount, Detail: "alipay confirms refund " + r.RefundNo + " that is FAILED locally",
			}); err != nil {
				t.Fatal(err)
			}
		}
	}

	var atAlipay int64
	for _, r := range f.sim.Refunds() {
		if r.OutTradeNo == in.PaymentNo {
			atAlipay += r.RefundFen
		}
	}
	p, err := f.store.GetPayment(ctx, in.PaymentNo)
	if err != nil || atAlipay != 600 || p.Refunded != 0 {
		t.Fatalf("alipay refunded %d fen, refunded_fen %d (%v); want 600 and 0", atAlipay, p.Refunded, err)
	}
	rows, err := f.db.QueryContext(ctx, `SELECT subject, amount_fen FROM payment_anomalies
		WHERE kind = 'refund_succeeded_after_fail' AND payment_no = ? ORDER BY subject`, in.PaymentNo)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var subject string
		var fen int64
		if err := rows.Scan(&subject, &fen); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s:%d", subject, fen))
	}
	want := []string{refunds[0].OutRequestNo + ":300", refunds[1].OutRequestNo + ":300"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("refund_succeeded_after_fail anomalies %v, want one per out_request_no %v", got, want)
	}
}
