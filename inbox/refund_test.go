package inbox_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/inbox"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/payment/paymenttest"
	"github.com/paykit/paykit/runs"
)

// An acknowledged refund notification whose first hand-over was lost (the API died right
// after answering success) is acted on by the sweep, on the real store: Alipay carried out
// a refund that is FAILED locally, so it records refund_succeeded_after_fail and settles
// on it. The payment being PAID with the notification's trade_no settles nothing: before,
// the sweep settled it on that and the refund's money was never seen again.
func TestARefundNotificationWhoseHandOverWasLostRecordsItsAnomaly(t *testing.T) {
	db, _ := testenv.MySQL(t)
	st := mysql.NewStore(db)
	ctx := context.Background()
	now := time.Now().UTC()
	r := paidPaymentWithRefund(ctx, t, st, "PR1", now)
	if _, err := st.FailRefund(ctx, "t1", "r1", "alipay refused"); err != nil {
		t.Fatal(err)
	}
	recordRefundNotification(ctx, t, st, "nr1", r, now, now.Add(30*time.Second))

	ib := inbox.New(inbox.Config{}, inbox.Stores{Payments: st, Refunds: st, Notifications: st, Inbox: st, Tenants: st, Anomalies: st},
		payment.SingleGateway{Gateway: fakeGateway{}}, fakeOrch{}, nil, nil)
	t.Cleanup(ib.Close)
	ib.Sweep(ctx, now.Add(31*time.Second))
	waitFor(t, "the refund notification settled", func() bool {
		rec, err := st.NotificationByNotifyID(ctx, "alipay", "nr1")
		return err == nil && !rec.SettledAt.IsZero()
	})
	rec, _ := st.NotificationByNotifyID(ctx, "alipay", "nr1")
	var anomalies int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM payment_anomalies WHERE kind = 'refund_succeeded_after_fail' AND payment_no = 'PR1'").Scan(&anomalies); err != nil {
		t.Fatal(err)
	}
	if anomalies != 1 || rec.Outcome != "anomaly_recorded" {
		t.Fatalf("refund_succeeded_after_fail anomalies = %d, notification outcome %q; want 1 and settled on it", anomalies, rec.Outcome)
	}
}

// A refund notification whose refund Alipay is still confirming is handed over again at
// most every two SettleBounds while its refund's run works (each hand-over finds the run
// and joins it), never at the payment notifications' doubling backoff, and it is no
// notification_unsettled anomaly: so the hand-over after its refund becomes final, which
// settles it, comes within two bounds. Before, the eighth hand-over came more than three
// minutes after the seventh with the e2e's 3 s bound (about an hour in production), the
// refund long final, and recorded an anomaly on the way.
func TestARefundNotificationSettlesSoonAfterItsRefundIsFinal(t *testing.T) {
	db, _ := testenv.MySQL(t)
	st := mysql.NewStore(db)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	r := paidPaymentWithRefund(ctx, t, st, "PS1", now)
	const bound = 3 * time.Second
	recordRefundNotification(ctx, t, st, "ns1", r, now, now.Add(bound))
	ib := inbox.New(inbox.Config{SettleBound: bound}, inbox.Stores{Payments: st, Refunds: st, Notifications: st, Inbox: st, Tenants: st, Anomalies: st},
		payment.SingleGateway{Gateway: fakeGateway{}}, fakeOrch{}, nil, nil)
	t.Cleanup(ib.Close)

	at := now.Add(bound)
	for attempt := 1; attempt <= 10; attempt++ {
		if handed := ib.Sweep(ctx, at); handed != 1 {
			t.Fatalf("hand-over %d at %s: %d handed", attempt, at.Sub(now), handed)
		}
		ib.Wait(ctx)
		rec, err := st.NotificationByNotifyID(ctx, "alipay", "ns1")
		if err != nil {
			t.Fatal(err)
		}
		if rec.Outcome != "refund_workflow_started" || !rec.SettledAt.IsZero() {
			t.Fatalf("hand-over %d: outcome %q, settled %v; want the refund's run joined, unsettled", attempt, rec.Outcome, rec.SettledAt)
		}
		if gap := rec.DispatchDueAt.Sub(at); attempt > 1 && gap > 2*bound {
			t.Fatalf("hand-over %d: the next is due %s later, want at most %s while the refund's run works", attempt, gap, 2*bound)
		}
		at = rec.DispatchDueAt
	}
	var anomalies int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM payment_anomalies WHERE payment_no = 'PS1'").Scan(&anomalies); err != nil {
		t.Fatal(err)
	}
	if anomalies != 0 {
		t.Fatalf("%d anomalies while the refund's run worked, want none", anomalies)
	}
	// An hour after it arrived, a refund still pending is no longer waited for so: the
	// notification is an anomaly and goes back to the doubling backoff (a hand-over that
	// fails keeps the last outcome, so only the age tells a stuck one from a waiting one).
	at = now.Add(time.Hour + time.Minute)
	if handed := ib.Sweep(ctx, at); handed != 1 {
		t.Fatalf("hand-over an hour on: %d handed", handed)
	}
	ib.Wait(ctx)
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM payment_anomalies WHERE payment_no = 'PS1' AND kind = 'notification_unsettled' AND subject = 'ns1'").Scan(&anomalies); err != nil {
		t.Fatal(err)
	}
	rec, err := st.NotificationByNotifyID(ctx, "alipay", "ns1")
	if err != nil {
		t.Fatal(err)
	}
	if anomalies != 1 || rec.DispatchDueAt.Sub(at) != 15*time.Minute {
		t.Fatalf("an hour on: %d notification_unsettled anomalies, next hand-over %s later; want 1 and 15m", anomalies, rec.DispatchDueAt.Sub(at))
	}
	at = rec.DispatchDueAt
	if _, err := st.MarkRefundSucceeded(ctx, "t1", "r1", "T1", now); err != nil {
		t.Fatal(err)
	}
	ib.Sweep(ctx, at)
	waitFor(t, "the refund notification settled", func() bool {
		rec, err := st.NotificationByNotifyID(ctx, "alipay", "ns1")
		return err == nil && !rec.SettledAt.IsZero() && rec.Outcome == "refund_already_final"
	})
}

// paidPaymentWithRefund makes paymentNo, 9.90 yuan, PAID with trade T1 at now, and its
// pending refund r1 of 6.00 yuan.
func paidPaymentWithRefund(ctx context.Context, t *testing.T, st *mysql.Store, paymentNo string, now time.Time) payment.Refund {
	t.Helper()
	if _, _, err := st.CreatePendingPayment(ctx, payment.NewPayment{PaymentNo: paymentNo, TenantID: "t1", OrderID: "o1", Amount: 990,
		Currency: "CNY", Subject: "refund test", ExpireAt: now.Add(15 * time.Minute), WorkflowID: payment.WorkflowID("t1", "o1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.MarkPaid(ctx, paymentNo, "T1", now); err != nil {
		t.Fatal(err)
	}
	r, _, err := st.CreateRefund(ctx, payment.NewRefund{RefundNo: "r1", TenantID: "t1", PaymentNo: paymentNo, Amount: 600})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// recordRefundNotification records Alipay's verified notification notifyID of refund r,
// received at receivedAt and due for its hand-over at due (fakeGateway verifies it).
func recordRefundNotification(ctx context.Context, t *testing.T, st *mysql.Store, notifyID string, r payment.Refund, receivedAt, due time.Time) {
	t.Helper()
	form := url.Values{"notify_id": {notifyID}, "out_trade_no": {r.PaymentNo}, "total_amount": {"9.90"},
		"out_biz_no": {r.OutRequestNo}, "refund_fee": {"6.00"}, "sign": {"good"}}
	n := payment.ChannelNotification{Channel: "alipay", NotifyID: notifyID, PaymentNo: r.PaymentNo, TradeNo: "T1", Verified: true,
		Refund: true, Outcome: "received", ReceivedAt: receivedAt, DispatchDueAt: due}
	n.KeepRaw(form.Encode())
	if _, _, err := st.RecordNotification(ctx, n); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// fakeGateway verifies a notification signed "good" and reads it from its form.
type fakeGateway struct{ paymenttest.Gateway }

func (fakeGateway) DecodeNotification(_ context.Context, raw payment.RawNotification) (payment.Notification, error) {
	form, _ := url.ParseQuery(string(raw.Body))
	if form.Get("sign") != "good" {
		return payment.Notification{}, &payment.Error{Code: payment.EBADSIGNATURE, Message: "bad signature"}
	}
	amt, _ := payment.ParseYuan(form.Get("total_amount"))
	refunded, _ := payment.ParseYuan(form.Get("refund_fee"))
	return payment.Notification{NotifyID: form.Get("notify_id"), PaymentNo: form.Get("out_trade_no"), TradeNo: "T1",
		TradeStatus: "TRADE_SUCCESS", State: payment.TradePaid, TotalAmount: amt, AppID: "app", SellerID: "seller",
		OutBizNo: form.Get("out_biz_no"), RefundFee: refunded}, nil
}

// fakeOrch accepts every signal and refund start.
type fakeOrch struct{}

func (fakeOrch) Notify(context.Context, payment.Payment, runs.NotificationPayload) (bool, error) {
	return true, nil
}

func (fakeOrch) NotifyOrRedrive(context.Context, payment.Payment, runs.NotificationPayload) error {
	return nil
}

func (fakeOrch) StartRefund(context.Context, payment.Refund) error { return nil }

// A verified refund notification for an out_biz_no paykit did not make (a partial refund
// made in Alipay's console) or one that is another payment's refund records a
// refund_unknown anomaly about that out_biz_no, with the payment and the refund_fee Alipay
// reports, and settles on it. Alipay delivering it again, or the hand-over running again
// (its settle write lost), records no second one; a forged one records none. Before,
// such a notification was settled as refund_unknown and nothing showed it.
func TestARefundNotificationPaykitDidNotMakeRecordsAnAnomaly(t *testing.T) {
	db, _ := testenv.MySQL(t)
	st := mysql.NewStore(db)
	ctx := context.Background()
	now := time.Now().UTC()
	r := paidPaymentWithRefund(ctx, t, st, "PU1", now)
	if _, _, err := st.CreatePendingPayment(ctx, payment.NewPayment{PaymentNo: "PU2", TenantID: "t1", OrderID: "o2", Amount: 990,
		Currency: "CNY", Subject: "refund test", ExpireAt: now.Add(15 * time.Minute), WorkflowID: payment.WorkflowID("t1", "o2")}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.MarkPaid(ctx, "PU2", "T2", now); err != nil {
		t.Fatal(err)
	}
	ib := inbox.New(inbox.Config{}, inbox.Stores{Payments: st, Refunds: st, Notifications: st, Inbox: st, Tenants: st, Anomalies: st},
		payment.SingleGateway{Gateway: fakeGateway{}}, fakeOrch{}, nil, nil)
	t.Cleanup(ib.Close)
	body := func(notifyID, paymentNo, outBizNo, sign string) []byte {
		return []byte(url.Values{"notify_id": {notifyID}, "out_trade_no": {paymentNo}, "total_amount": {"9.90"},
			"out_biz_no": {outBizNo}, "refund_fee": {"1.50"}, "gmt_refund": {"2026-12-01 10:00:00"}, "sign": {sign}}.Encode())
	}
	anomaliesOf := func(paymentNo, subject string) []payment.Anomaly {
		t.Helper()
		all, err := st.ListAnomalies(ctx, time.Time{}, 100)
		if err != nil {
			t.Fatal(err)
		}
		var out []payment.Anomaly
		for _, a := range all {
			if a.PaymentNo == paymentNo && a.Subject == subject {
				out = append(out, a)
			}
		}
		return out
	}
	for _, c := range []struct {
		name, notifyID, paymentNo, outBizNo string
	}{
		{"made_in_alipays_console", "nu1", "PU1", "console-1"},
		{"another_payments_refund", "nu2", "PU2", r.OutRequestNo},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !ib.Receive(ctx, body(c.notifyID, c.paymentNo, c.outBizNo, "good"), "req-"+c.notifyID) {
				t.Fatal("a verified refund notification was answered failure")
			}
			ib.Wait(ctx)
			rec, err := st.NotificationByNotifyID(ctx, "alipay", c.notifyID)
			if err != nil || rec.SettledAt.IsZero() || rec.Outcome != "refund_unknown" {
				t.Fatalf("notification %+v, %v; want it settled as refund_unknown", rec, err)
			}
			got := anomaliesOf(c.paymentNo, c.outBizNo)
			if len(got) != 1 || got[0].Kind != inbox.AnomalyRefundUnknown || got[0].TenantID != "t1" || got[0].Amount != 150 ||
				got[0].TradeNo != "T1" || !strings.Contains(got[0].Detail, c.notifyID) {
				t.Fatalf("anomalies of %s about %s = %+v; want one refund_unknown of 1.50 naming %s", c.paymentNo, c.outBizNo, got, c.notifyID)
			}
			// Alipay delivers it again: it is paykit's already.
			if !ib.Receive(ctx, body(c.notifyID, c.paymentNo, c.outBizNo, "good"), "req-again") {
				t.Fatal("a redelivery was answered failure")
			}
			// The anomaly was recorded but the settle write was lost: the sweep hands it
			// over again.
			due := time.Now().UTC()
			if _, err := db.ExecContext(ctx, "UPDATE channel_notifications SET settled_at = NULL, dispatch_due_at = ? WHERE id = ?", due, rec.ID); err != nil {
				t.Fatal(err)
			}
			if handed := ib.Sweep(ctx, due.Add(time.Second)); handed != 1 {
				t.Fatalf("the sweep handed %d over, want the notification", handed)
			}
			ib.Wait(ctx)
			if got := anomaliesOf(c.paymentNo, c.outBizNo); len(got) != 1 {
				t.Fatalf("after a redelivery and a second hand-over: %d anomalies, want 1: %+v", len(got), got)
			}
		})
	}
	t.Run("forged", func(t *testing.T) {
		if ib.Receive(ctx, body("nu3", "PU1", "console-3", "forged"), "req-forged") {
			t.Fatal("a forged notification was answered success")
		}
		ib.Wait(ctx)
		if got := anomaliesOf("PU1", "console-3"); len(got) != 0 {
			t.Fatalf("a forged notification recorded %+v", got)
		}
	})
}
