package audit_test

import (
	"context"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/paykit/paykit/audit"
	"github.com/paykit/paykit/payment"
)

// refund reserves a refund of a payment, and carries it out at Alipay if atAlipay.
func (e *env) refund(tb testing.TB, paymentNo, refundNo string, amount payment.Amount, atAlipay bool) payment.Refund {
	tb.Helper()
	ctx := context.Background()
	r, _, err := e.st.CreateRefund(ctx, payment.NewRefund{RefundNo: refundNo, TenantID: tenantID, PaymentNo: paymentNo, Amount: amount})
	if err != nil {
		tb.Fatal(err)
	}
	if atAlipay {
		if _, err := e.gw.Refund(ctx, payment.RefundRequest{PaymentNo: paymentNo, OutRequestNo: r.OutRequestNo, Amount: amount}); err != nil {
			tb.Fatal(err)
		}
	}
	// Old enough not to be in its workflow's hands any more.
	e.exec(tb, "UPDATE refunds SET created_at = ? WHERE refund_no = ?", time.Now().Add(-time.Hour).UTC(), refundNo)
	return r
}

func (e *env) succeed(tb testing.TB, refundNo string) {
	tb.Helper()
	if _, err := e.st.MarkRefundSucceeded(context.Background(), tenantID, refundNo, "", time.Time{}); err != nil {
		tb.Fatal(err)
	}
}

// TestAudit_Refunds plants one case of each refund finding next to refunds that are fine:
// partial and full refunds, a refund still in its workflow's hands, a refused one.
func TestAudit_Refunds(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// Fine: refunded in part twice and then in full (Alipay closes the trade, the payment
	// stays PAID); refunded in part with one refund still pending; a failed refund.
	e.paid(t, "o_full", "PFULL", false)
	for _, c := range []struct {
		no  string
		fen payment.Amount
	}{{"full_a", 300}, {"full_b", 200}, {"full_c", 490}} {
		e.refund(t, "PFULL", c.no, c.fen, true)
		e.succeed(t, c.no)
	}
	e.paid(t, "o_part", "PPART", false)
	e.refund(t, "PPART", "part_a", 100, true)
	e.succeed(t, "part_a")
	if _, _, err := e.st.CreateRefund(ctx, payment.NewRefund{RefundNo: "part_fresh", TenantID: tenantID, PaymentNo: "PPART", Amount: 50}); err != nil {
		t.Fatal(err)
	}
	e.refund(t, "PPART", "part_refused", 70, false)
	if _, err := e.st.FailRefund(ctx, tenantID, "part_refused", "ACQ.TRADE_NOT_ALLOW_REFUND"); err != nil {
		t.Fatal(err)
	}
	if rep := e.run(t); len(rep.Findings) != 0 {
		t.Fatalf("refunds that are fine: findings %+v", rep.Findings)
	}

	// Two refunds of one payment refunded at Alipay, both FAILED locally: a finding each,
	// about its out_request_no; and one PENDING for an hour that Alipay did.
	e.paid(t, "o_lost", "PLOST", false)
	var lost []string
	for _, no := range []string{"lost_a", "lost_b"} {
		lost = append(lost, e.refund(t, "PLOST", no, 100, true).OutRequestNo)
		if _, err := e.st.FailRefund(ctx, tenantID, no, "gave up"); err != nil {
			t.Fatal(err)
		}
	}
	e.paid(t, "o_stuck", "PSTUCK", false)
	e.refund(t, "PSTUCK", "stuck_a", 100, true)
	// SUCCEEDED locally, never at Alipay.
	e.paid(t, "o_ghost", "PGHOST", false)
	e.refund(t, "PGHOST", "ghost_a", 100, false)
	e.succeed(t, "ghost_a")
	// refunded_fen tampered with past the amount.
	e.paid(t, "o_over", "POVER", false)
	e.refund(t, "POVER", "over_a", 100, true)
	e.succeed(t, "over_a")
	e.exec(t, "UPDATE payments SET refunded_fen = 1000 WHERE payment_no = 'POVER'")
	// Alipay carried out another amount than the refund's own, under its out_request_no;
	// the books agree with themselves.
	e.paid(t, "o_other", "POTHER", false)
	other := e.refund(t, "POTHER", "other_a", 100, false)
	if _, err := e.gw.Refund(ctx, payment.RefundRequest{PaymentNo: "POTHER", OutRequestNo: other.OutRequestNo, Amount: 120}); err != nil {
		t.Fatal(err)
	}
	e.succeed(t, "other_a")

	rep := e.run(t)
	got := byKind(rep)
	want := map[string][]string{
		audit.KindRefundNotSucceeded:   {"PLOST", "PLOST", "PSTUCK"},
		audit.KindRefundNotAtAlipay:    {"PGHOST"},
		audit.KindRefundExceedsPaid:    {"POVER"},
		audit.KindRefundAmountMismatch: {"POTHER"},
	}
	if len(rep.Findings) != 6 {
		t.Fatalf("findings %+v, want %v", rep.Findings, want)
	}
	for kind, nos := range want {
		if len(got[kind]) != len(nos) {
			t.Fatalf("%s: %v, want %v (all: %+v)", kind, got[kind], nos, rep.Findings)
		}
		for i := range nos {
			if got[kind][i] != nos[i] {
				t.Fatalf("%s: %v, want %v", kind, got[kind], nos)
			}
		}
	}
	t.Log(finding(t, rep, audit.KindRefundExceedsPaid, "POVER").Detail)
	var subjects []string
	for _, f := range rep.Findings {
		switch {
		case f.PaymentNo == "PLOST":
			subjects = append(subjects, f.Anomaly().Subject)
		case f.Kind == audit.KindRefundExceedsPaid && f.Subject != "":
			t.Fatalf("%s is about the payment as a whole, not %q", f.Kind, f.Subject)
		}
	}
	sort.Strings(subjects)
	sort.Strings(lost)
	if !slices.Equal(subjects, lost) {
		t.Fatalf("PLOST's findings are about %q, want one per refund %q", subjects, lost)
	}
}

// refundingGateway refunds a payment in full, through the store and at Alipay, just
// before Alipay is asked about its trade: a refund made while the audit runs.
type refundingGateway struct {
	payment.Gateway
	e         *env
	tb        testing.TB
	paymentNo string
}

func (g refundingGateway) Query(ctx context.Context, paymentNo string) (payment.Trade, error) {
	if paymentNo == g.paymentNo {
		g.e.refund(g.tb, paymentNo, "race_a", 990, true)
		g.e.succeed(g.tb, "race_a")
	}
	return g.Gateway.Query(ctx, paymentNo)
}

// TestAudit_ARefundMadeWhileTheAuditRunsIsNotAFinding: the payment was read unrefunded,
// then refunded in full before Alipay was asked, so Alipay reports the trade closed. Read
// again before recording, the payment has changed: nothing is reported from the half
// old facts, and the refund's own window audits it.
func TestAudit_ARefundMadeWhileTheAuditRunsIsNotAFinding(t *testing.T) {
	e := newEnv(t)
	e.paid(t, "o_race", "PRACE", false)
	e.paid(t, "o_calm", "PCALM", false)
	e.aud.Gateway = refundingGateway{Gateway: e.gw, e: e, tb: t, paymentNo: "PRACE"}
	rep := e.run(t)
	if len(rep.Findings) != 0 || rep.ChangedWhileAudited != 1 {
		t.Fatalf("findings %+v, %d changed while audited; want none and 1", rep.Findings, rep.ChangedWhileAudited)
	}
	// Audited again now, the refund is consistent.
	e.aud.Gateway = e.gw
	if rep := e.run(t); len(rep.Findings) != 0 || rep.ChangedWhileAudited != 0 {
		t.Fatalf("audited again: findings %+v", rep.Findings)
	}
}
