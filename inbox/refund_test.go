package inbox_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/paykit/paykit/inbox"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/payment/paymenttest"
	"github.com/paykit/paykit/workflows"
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
	if _, _, err := st.CreatePendingPayment(ctx, payment.NewPayment{PaymentNo: "PR1", TenantID: "t1", OrderID: "o1", Amount: 990,
		Currency: "CNY", Subject: "refund test", ExpireAt: now.Add(15 * time.Minute), WorkflowID: payment.WorkflowID("t1", "o1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.MarkPaid(ctx, "PR1", "T1", now); err != nil {
		t.Fatal(err)
	}
	r, _, err := st.CreateRefund(ctx, payment.NewRefund{RefundNo: "r1", TenantID: "t1", PaymentNo: "PR1", Amount: 600})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.FailRefund(ctx, "t1", "r1", "alipay refused"); err != nil {
		t.Fatal(err)
	}
	form := url.Values{"notify_id": {"nr1"}, "out_trade_no": {"PR1"}, "total_amount": {"9.90"},
		"out_biz_no": {r.OutRequestNo}, "refund_fee": {"6.00"}, "sign": {"good"}}
	n := payment.ChannelNotification{Channel: "alipay", NotifyID: "nr1", PaymentNo: "PR1", TradeNo: "T1", Verified: true,
		Refund: true, Outcome: "received", ReceivedAt: now, DispatchDueAt: now.Add(30 * time.Second)}
	n.KeepRaw(form.Encode())
	if _, _, err := st.RecordNotification(ctx, n); err != nil {
		t.Fatal(err)
	}

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

func (fakeGateway) DecodeNotification(_ context.Context, form url.Values) (payment.Notification, error) {
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

func (fakeOrch) Notify(context.Context, payment.Payment, workflows.NotificationPayload) (bool, error) {
	return true, nil
}

func (fakeOrch) NotifyOrRedrive(context.Context, payment.Payment, workflows.NotificationPayload) error {
	return nil
}

func (fakeOrch) StartRefund(context.Context, payment.Refund) error { return nil }
