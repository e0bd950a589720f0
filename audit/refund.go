package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/paykit/paykit/payment"
)

// Finding kinds of refunds.
const (
	// KindRefundNotSucceeded is a refund Alipay carried out that is not SUCCEEDED
	// locally: FAILED, or still PENDING past the grace.
	KindRefundNotSucceeded = "refund_not_succeeded"
	// KindRefundNotAtAlipay is a refund SUCCEEDED locally that Alipay does not know.
	KindRefundNotAtAlipay = "refund_not_at_alipay"
	// KindRefundExceedsPaid is a payment whose refunds add up to more than it was paid,
	// or whose refunded_fen disagrees with the sum of its refunds that have not failed.
	KindRefundExceedsPaid = "refund_exceeds_paid"
	// KindRefundAmountMismatch is a refund Alipay carried out for another amount than
	// the refund's own.
	KindRefundAmountMismatch = "refund_amount_mismatch"
)

// RefundStore is what the refund checks read; *mysql.Store implements it. An Auditor
// whose Store does not implement it skips the refund checks.
type RefundStore interface {
	ListPaymentRefunds(ctx context.Context, tenantID, paymentNo string) ([]payment.Refund, error)
}

// RefundGateway is the Alipay call the refund checks make; payment.Gateway implements
// it. An Auditor whose Gateway does not implement it skips the refund checks.
type RefundGateway interface {
	QueryRefund(ctx context.Context, paymentNo, outRequestNo string) (payment.RefundStatusAtChannel, error)
}

// refundRemote is what the refund checks learnt about one payment's refunds.
type refundRemote struct {
	checked bool
	refunds []payment.Refund
	// atAlipay holds Alipay's answer for each refund that was asked about, by
	// out_request_no.
	atAlipay map[string]payment.RefundStatusAtChannel
	err      error
}

// checkRefunds reads a payment's refunds and asks Alipay about every one that is final,
// or pending past the grace.
func (a *Auditor) checkRefunds(ctx context.Context, pay payment.Payment, grace time.Duration, now time.Time) refundRemote {
	st, ok1 := a.Store.(RefundStore)
	if !ok1 {
		return refundRemote{}
	}
	base, err := a.gatewayOf(ctx, pay)
	if err != nil {
		return refundRemote{checked: true, err: err}
	}
	gw, ok2 := base.(RefundGateway)
	if !ok2 {
		return refundRemote{}
	}
	r := refundRemote{checked: true, atAlipay: map[string]payment.RefundStatusAtChannel{}}
	r.refunds, r.err = st.ListPaymentRefunds(ctx, pay.TenantID, pay.PaymentNo)
	if r.err != nil {
		r.err = fmt.Errorf("refunds could not be read: %w", r.err)
		return r
	}
	for _, rf := range r.refunds {
		if rf.Status == payment.RefundPending && now.Sub(rf.CreatedAt) <= grace {
			continue // its workflow is still at work
		}
		res, err := withRetries(ctx, func() (payment.RefundStatusAtChannel, error) {
			return gw.QueryRefund(ctx, pay.PaymentNo, rf.OutRequestNo)
		})
		if err != nil {
			r.err = fmt.Errorf("alipay refund query of %s failed: %w", rf.RefundNo, err)
			return r
		}
		r.atAlipay[rf.OutRequestNo] = res
	}
	return r
}

// refundFindings applies the refund checks to one payment.
func refundFindings(pay payment.Payment, r refundRemote, newFinding func(kind, detail string) Finding) []Finding {
	if !r.checked || r.err != nil {
		return nil
	}
	var reserved, atAlipay payment.Amount
	// A finding about one refund has the refund's out_request_no as its subject: two
	// refunds of a payment in the same trouble are two findings, and two anomalies.
	var notSucceeded, notAtAlipay, otherAmount []Finding
	about := func(rf payment.Refund, kind, detail string) Finding {
		f := newFinding(kind, detail)
		f.Subject = rf.OutRequestNo
		return f
	}
	for _, rf := range r.refunds {
		if rf.Status != payment.RefundFailed {
			reserved += rf.Amount
		}
		res, asked := r.atAlipay[rf.OutRequestNo]
		if !asked {
			continue
		}
		if res.Found {
			atAlipay += res.RefundAmount
		}
		if res.Found && res.RefundAmount != rf.Amount {
			otherAmount = append(otherAmount, about(rf, KindRefundAmountMismatch, fmt.Sprintf(
				"alipay refunded another amount than the refund's: %s (%s CNY at alipay, %s CNY locally)", rf.RefundNo, res.RefundAmount.Yuan(), rf.Amount.Yuan())))
		}
		if kind, detail := refundStateFinding(rf, res); kind != "" {
			if kind == KindRefundNotSucceeded {
				notSucceeded = append(notSucceeded, about(rf, kind, detail))
			} else {
				notAtAlipay = append(notAtAlipay, about(rf, kind, detail))
			}
		}
	}
	out := append(append(notSucceeded, notAtAlipay...), otherAmount...)
	return append(out, refundSumFindings(pay, reserved, atAlipay, newFinding)...)
}

// refundStateFinding compares a refund's state with Alipay's answer: refunded there but
// not SUCCEEDED here, or SUCCEEDED here and unknown there. No kind: they agree.
func refundStateFinding(rf payment.Refund, res payment.RefundStatusAtChannel) (kind, detail string) {
	switch {
	case res.Found && rf.Status != payment.RefundSucceeded:
		return KindRefundNotSucceeded, fmt.Sprintf(
			"alipay refunded but the refund is not SUCCEEDED locally: %s (%s CNY, %s locally)", rf.RefundNo, res.RefundAmount.Yuan(), rf.Status)
	case !res.Found && rf.Status == payment.RefundSucceeded:
		return KindRefundNotAtAlipay, fmt.Sprintf(
			"SUCCEEDED locally but alipay has no such refund: %s (%s CNY)", rf.RefundNo, rf.Amount.Yuan())
	}
	return "", ""
}

// refundSumFindings compares the sums: refunds not failed, refunded_fen and Alipay's
// refunds, none above the amount paid, the first two equal.
func refundSumFindings(pay payment.Payment, reserved, atAlipay payment.Amount, newFinding func(kind, detail string) Finding) []Finding {
	switch {
	case reserved > pay.Amount || pay.Refunded > pay.Amount || atAlipay > pay.Amount:
		return []Finding{newFinding(KindRefundExceedsPaid, fmt.Sprintf(
			"paid %s CNY; refunds not failed %s CNY, refunded_fen %s CNY, refunded at alipay %s CNY",
			pay.Amount.Yuan(), reserved.Yuan(), pay.Refunded.Yuan(), atAlipay.Yuan()))}
	case reserved != pay.Refunded:
		return []Finding{newFinding(KindRefundExceedsPaid, fmt.Sprintf(
			"refunded_fen %s CNY disagrees with the %s CNY of refunds not failed", pay.Refunded.Yuan(), reserved.Yuan()))}
	}
	return nil
}
