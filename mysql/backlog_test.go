package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
)

// TestBacklog plants each thing the backlog counts next to a look-alike it must not
// count: a payment past expiry and one inside the grace, a paid one past expiry; a live
// undelivered event, a dead one that is older, a delivered one older still.
func TestBacklog(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	now := time.Now().UTC()
	cutoff := now.Add(-5 * time.Minute)

	empty, err := st.Backlog(ctx, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	if empty != (payment.Backlog{}) {
		t.Fatalf("empty database: %+v, want nothing", empty)
	}

	pending := func(no string, expireAt time.Time) {
		t.Helper()
		np := newPayment("t1", "o-"+no, no)
		np.ExpireAt = expireAt
		if _, existed, err := st.CreatePendingPayment(ctx, np); err != nil || existed {
			t.Fatalf("create %s: existed=%v %v", no, existed, err)
		}
	}
	// paidEvent pays a payment and backdates its payment.paid event.
	paidEvent := func(no string, written time.Time) string {
		t.Helper()
		pending(no, now.Add(-time.Hour))
		if _, err := st.MarkPaid(ctx, no, "T"+no, time.Time{}); err != nil {
			t.Fatal(err)
		}
		id := mysql.EventID(no, payment.EventPaymentPaid)
		if _, err := db.ExecContext(ctx, "UPDATE payment_events SET created_at = ? WHERE event_id = ?", written, id); err != nil {
			t.Fatal(err)
		}
		return id
	}

	pending("P_EXPIRED", now.Add(-10*time.Minute))
	pending("P_IN_GRACE", now.Add(-time.Minute))
	pending("P_OPEN", now.Add(15*time.Minute))
	live := now.Add(-30 * time.Minute).Truncate(time.Microsecond)
	paidEvent("P_LIVE", live)
	dead := paidEvent("P_DEAD", now.Add(-2*time.Hour))
	if _, died, err := st.MarkEventAttempt(ctx, dead, "HTTP 500", now, payment.EventRetry{MaxAttempts: 1}); err != nil || !died {
		t.Fatalf("make %s dead: died=%v %v", dead, died, err)
	}
	delivered := paidEvent("P_DELIVERED", now.Add(-3*time.Hour))
	if err := st.MarkEventDelivered(ctx, delivered); err != nil {
		t.Fatal(err)
	}

	// The inbox: an unsettled notification received 2 min ago, an older settled one.
	received := now.Add(-2 * time.Minute).Truncate(time.Microsecond)
	record(t, st, inboxNote("N-UNSETTLED", "P_LIVE", "T1", received, 30*time.Second))
	settled := record(t, st, inboxNote("N-SETTLED", "P_LIVE", "T2", now.Add(-time.Hour), 30*time.Second))
	if err := st.SettleNotification(ctx, settled.ID, "ignored"); err != nil {
		t.Fatal(err)
	}

	got, err := st.Backlog(ctx, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	want := payment.Backlog{OldestUndeliveredAt: live, DeadEvents: 1, PendingExpired: 1, OldestUnsettledNotificationAt: received}
	if !got.OldestUndeliveredAt.Equal(want.OldestUndeliveredAt) || got.DeadEvents != want.DeadEvents || got.PendingExpired != want.PendingExpired ||
		!got.OldestUnsettledNotificationAt.Equal(received) {
		t.Fatalf("backlog = %+v, want %+v", got, want)
	}

	// The dead event delivered after all is no longer dead; the live one delivered leaves
	// no undelivered event.
	for _, id := range []string{dead, mysql.EventID("P_LIVE", payment.EventPaymentPaid)} {
		if err := st.MarkEventDelivered(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	got, err = st.Backlog(ctx, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	if !got.OldestUndeliveredAt.IsZero() || got.DeadEvents != 0 || got.PendingExpired != 1 {
		t.Fatalf("after delivering: %+v, want only the expired payment", got)
	}

	// Each query reads an index, not the table.
	for _, c := range []struct{ query, table, index string }{
		{"SELECT MIN(created_at) FROM payment_events WHERE delivered = 0 AND dead = 0", "payment_events", "idx_payment_events_due"},
		{"SELECT COUNT(*) FROM payment_events WHERE delivered = 0 AND dead = 1", "payment_events", "idx_payment_events_due"},
		{"SELECT COUNT(*) FROM payments WHERE status = 0 AND expire_at < NOW()", "payments", "idx_payments_status_expire"},
		{mysql.QOldestUnsettled, "channel_notifications", "idx_channel_notifications_due"},
	} {
		query, index := c.query, c.index
		if key := explainKeys(t, db, query)[c.table]; key != index {
			t.Errorf("%s uses index %q, want %s", query, key, index)
		}
	}
}
