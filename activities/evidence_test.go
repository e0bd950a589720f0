package activities_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/alipaysim/simtest"
	"github.com/paykit/paykit/payment"
)

// TestMarkPaid_ANotificationSignalIsActedOnOnlyWithItsVerifiedRecord sends MarkPaid what
// a signal straight to Temporal can claim: a payment paid, with any trade_no and notify_id.
// Only a notify_id whose recorded notification verifies with the payment's app, for this
// payment, its amount and a paid state, marks it paid, and then with the trade_no Alipay
// signed, never the signal's. Every other claim records unverified_signal and changes
// nothing.
func TestMarkPaid_ANotificationSignalIsActedOnOnlyWithItsVerifiedRecord(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	in := f.createInput("order-evidence")
	if err := f.local(t, nil, f.acts.CreatePayment, in); err != nil {
		t.Fatal(err)
	}
	record := func(form url.Values) {
		t.Helper()
		_, inserted, err := f.store.RecordNotification(ctx, payment.ChannelNotification{
			Channel: "alipay", NotifyID: form.Get("notify_id"), PaymentNo: form.Get("out_trade_no"), TradeNo: form.Get("trade_no"),
			Raw: form.Encode(), Verified: true, Outcome: "received", ReceivedAt: time.Now(),
		})
		if err != nil || !inserted {
			t.Fatalf("record %s: inserted=%v %v", form.Get("notify_id"), inserted, err)
		}
	}
	resign := func(form url.Values) url.Values {
		t.Helper()
		if err := alipaysim.SignNotification(simtest.Keys(t).AlipayPrivateKeyPEM, form); err != nil {
			t.Fatal(err)
		}
		return form
	}
	tampered := simtest.PaidNotification(t, "n-tampered", in.PaymentNo, "2026TTAMPER", "12.34")
	tampered.Set("trade_no", "2026TOTHER")
	record(tampered)
	record(simtest.PaidNotification(t, "n-other", "P"+randomHex(10), "2026TOTHERPAY", "12.34"))
	record(simtest.PaidNotification(t, "n-amount", in.PaymentNo, "2026TAMOUNT", "0.01"))
	waiting := simtest.PaidNotification(t, "n-waiting", in.PaymentNo, "2026TWAIT", "12.34")
	waiting.Set("trade_status", "WAIT_BUYER_PAY")
	record(resign(waiting))
	otherApp := simtest.PaidNotification(t, "n-app", in.PaymentNo, "2026TAPP", "12.34")
	otherApp.Set("app_id", "2021999999999999")
	record(resign(otherApp))

	claim := func(notifyID string) activities.MarkPaidInput {
		return activities.MarkPaidInput{PaymentNo: in.PaymentNo, TenantID: f.tenantID, OrderID: in.OrderID,
			TradeNo: "FORGED", PaidAt: time.Now(), Evidence: activities.EvidenceNotification, NotifyID: notifyID}
	}
	for _, tc := range []struct{ name, notifyID, why string }{
		{"no notify_id", "", "names no notify_id"},
		{"nothing recorded under it", "n-nowhere", "no verified notification"},
		{"a record whose signature fails", "n-tampered", "does not verify"},
		{"another payment's notification", "n-other", "does not match payment"},
		{"another amount", "n-amount", "total_amount"},
		{"not paid", "n-waiting", "not paid"},
		{"another app's notification", "n-app", "does not verify"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr payment.Transition
			if err := f.local(t, &tr, f.acts.MarkPaid, claim(tc.notifyID)); err != nil {
				t.Fatalf("MarkPaid: %v (an unverified claim is an answer, not an error to retry)", err)
			}
			if tr.Changed || !strings.Contains(tr.Unverified, tc.why) {
				t.Fatalf("MarkPaid on %s: %+v, want unchanged and Unverified naming %q", tc.name, tr, tc.why)
			}
			p, err := f.store.GetPayment(ctx, in.PaymentNo)
			if err != nil || p.Status != payment.StatusPending || p.TradeNo != "" {
				t.Fatalf("payment after %s: %+v %v, want pending with no trade_no", tc.name, p, err)
			}
		})
	}
	// One anomaly per notification claimed (its notify_id the subject; the claim that
	// names none is about ''), however often one is claimed again.
	if err := f.local(t, nil, f.acts.MarkPaid, claim("n-tampered")); err != nil {
		t.Fatal(err)
	}
	if n := f.count(t, "SELECT COUNT(*) FROM payment_anomalies WHERE kind = ? AND payment_no = ?", payment.AnomalyUnverifiedSignal, in.PaymentNo); n != 7 {
		t.Fatalf("unverified_signal anomalies = %d, want 7, one per notification claimed", n)
	}
	if n := f.count(t, "SELECT COUNT(*) FROM payment_anomalies WHERE kind = ? AND payment_no = ? AND subject IN ('', 'n-nowhere', 'n-tampered', 'n-other', 'n-amount', 'n-waiting', 'n-app')",
		payment.AnomalyUnverifiedSignal, in.PaymentNo); n != 7 {
		t.Fatalf("unverified_signal anomalies about the notify_ids claimed = %d, want 7", n)
	}
	if n := f.count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ?", in.PaymentNo); n != 0 {
		t.Fatalf("events = %d after unverified claims, want 0", n)
	}

	record(simtest.PaidNotification(t, "n-genuine", in.PaymentNo, "2026TGENUINE", "12.34"))
	var tr payment.Transition
	if err := f.local(t, &tr, f.acts.MarkPaid, claim("n-genuine")); err != nil {
		t.Fatal(err)
	}
	if !tr.Changed || tr.Unverified != "" || tr.Payment.Status != payment.StatusPaid || tr.Payment.TradeNo != "2026TGENUINE" {
		t.Fatalf("MarkPaid on the genuine notification: %+v, want PAID with Alipay's trade_no 2026TGENUINE", tr)
	}
}

// A run marking a payment that is not its own (NotOwned) writes nothing, even on Alipay's
// genuine word: a pending payment is left to its own run, which alone marks it paid with
// its grant and webhook.
func TestMarkPaid_APaymentOfAnotherRunIsNeverWritten(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	in := f.createInput("order-not-owned")
	if err := f.local(t, nil, f.acts.CreatePayment, in); err != nil {
		t.Fatal(err)
	}
	form := simtest.PaidNotification(t, "n-newer", in.PaymentNo, "2026TNEWER", "12.34")
	if _, _, err := f.store.RecordNotification(ctx, payment.ChannelNotification{Channel: "alipay", NotifyID: "n-newer",
		PaymentNo: in.PaymentNo, TradeNo: "2026TNEWER", Raw: form.Encode(), Verified: true, ReceivedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	var tr payment.Transition
	err := f.local(t, &tr, f.acts.MarkPaid, activities.MarkPaidInput{PaymentNo: in.PaymentNo, TenantID: f.tenantID, OrderID: in.OrderID,
		TradeNo: "2026TNEWER", Evidence: activities.EvidenceNotification, NotifyID: "n-newer", NotOwned: true})
	if err != nil || tr.Changed || tr.Payment.Status != payment.StatusPending {
		t.Fatalf("MarkPaid of another run's pending payment: %+v %v, want it returned pending and unchanged", tr, err)
	}
	if n := f.count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ?", in.PaymentNo); n != 0 {
		t.Fatalf("events = %d, want none", n)
	}
}

// A payment the scheduled reconciler has read among its due rows is known to the process
// by that row; a notification signal for it afterwards is confirmed among the
// notifications of the payment's channel, as for any other. The due row once left the
// channel out, and every later signal of the payment was refused as unverified (the e2e
// test of a notification recorded by an API that died found it: closed at expiry instead
// of PAID).
func TestMarkPaid_APaymentTheReconcilerQueriedIsConfirmedOnItsChannel(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	no := f.duePayments(t, 1)[0]
	in := activities.ReconcileDueInput{Interval: time.Hour, Page: 10, Parallel: 1, Budget: time.Minute}
	if err := f.remote(t, nil, f.acts.ReconcileDue, in); err != nil {
		t.Fatal(err)
	}
	p, err := f.store.GetPayment(ctx, no)
	if err != nil {
		t.Fatal(err)
	}
	form := simtest.PaidNotification(t, "n-after-query", no, "2026TAFTERQUERY", p.Amount.Yuan())
	if _, _, err := f.store.RecordNotification(ctx, payment.ChannelNotification{Channel: "alipay", NotifyID: "n-after-query",
		PaymentNo: no, TradeNo: "2026TAFTERQUERY", Raw: form.Encode(), Verified: true, ReceivedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	var tr payment.Transition
	err = f.local(t, &tr, f.acts.MarkPaid, activities.MarkPaidInput{PaymentNo: no, TenantID: p.TenantID, OrderID: p.OrderID,
		TradeNo: "FORGED", PaidAt: time.Now(), Evidence: activities.EvidenceNotification, NotifyID: "n-after-query"})
	if err != nil || !tr.Changed || tr.Unverified != "" || tr.Payment.TradeNo != "2026TAFTERQUERY" {
		t.Fatalf("MarkPaid after the reconciler's query: %+v %v, want PAID on the recorded notification", tr, err)
	}
}
