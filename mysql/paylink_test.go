package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/paykit/paykit/payment"
)

// A pay link is kept for a pending wap or app payment, shown only to its tenant and only
// while the payment is pending, and never attached to a payment that has left pending.
func TestPayLinkOnlyWhilePending(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	for _, m := range []payment.Method{payment.MethodWap, payment.MethodApp} {
		np := newPayment("t1", "o-"+string(m), "p"+string(m))
		np.Method = m
		if p, _, err := st.CreatePendingPayment(ctx, np); err != nil || p.Method != m {
			t.Fatalf("create %s: %+v %v", m, p, err)
		}
	}
	if link, err := st.PendingPayLink(ctx, "t1", "pwap"); err != nil || link != "" {
		t.Fatalf("before it is set: %q %v", link, err)
	}
	const wapURL = "https://openapi.alipay.com/gateway.do?method=alipay.trade.wap.pay&sign=abc%2B"
	if err := st.SetPayLink(ctx, "pwap", wapURL); err != nil {
		t.Fatal(err)
	}
	if err := st.SetPayLink(ctx, "papp", "app_id=1&method=alipay.trade.app.pay&sign=x"); err != nil {
		t.Fatal(err)
	}
	if link, err := st.PendingPayLink(ctx, "t1", "pwap"); err != nil || link != wapURL {
		t.Fatalf("wap link %q %v", link, err)
	}
	if link, err := st.PendingPayLink(ctx, "t2", "pwap"); err != nil || link != "" {
		t.Fatalf("another tenant sees %q %v", link, err)
	}
	if link, err := st.PendingPayLink(ctx, "t1", "nope"); err != nil || link != "" {
		t.Fatalf("unknown payment: %q %v", link, err)
	}

	if _, err := st.MarkPaid(ctx, "pwap", "2026T1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if link, err := st.PendingPayLink(ctx, "t1", "pwap"); err != nil || link != "" {
		t.Fatalf("paid payment still shows %q %v", link, err)
	}
	if _, err := st.ClosePayment(ctx, "papp", "expired"); err != nil {
		t.Fatal(err)
	}
	if link, err := st.PendingPayLink(ctx, "t1", "papp"); err != nil || link != "" {
		t.Fatalf("closed payment still shows %q %v", link, err)
	}
	// A late OpenTrade retry does not write a link onto a closed payment.
	np := newPayment("t1", "o-late", "plate")
	if _, _, err := st.CreatePendingPayment(ctx, np); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ClosePayment(ctx, "plate", "expired"); err != nil {
		t.Fatal(err)
	}
	if err := st.SetPayLink(ctx, "plate", "https://late"); err != nil {
		t.Fatal(err)
	}
	var stored *string
	if err := db.QueryRowContext(ctx, "SELECT pay_link FROM payments WHERE payment_no = 'plate'").Scan(&stored); err != nil || stored != nil {
		t.Fatalf("closed payment got a pay link %v (%v)", stored, err)
	}
}
