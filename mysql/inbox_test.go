package mysql_test

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
)

func inboxNote(notifyID, paymentNo, tradeNo string, received time.Time, bound time.Duration) payment.ChannelNotification {
	n := payment.ChannelNotification{Channel: "alipay", NotifyID: notifyID, PaymentNo: paymentNo, TradeNo: tradeNo,
		Verified: true, ReceivedAt: received, DispatchDueAt: received.Add(bound)}
	n.KeepRaw("notify_id=" + notifyID)
	return n
}

func record(tb testing.TB, st *mysql.Store, n payment.ChannelNotification) payment.ChannelNotification {
	tb.Helper()
	rec, inserted, err := st.RecordNotification(context.Background(), n)
	if err != nil || !inserted {
		tb.Fatalf("record %s: inserted=%v %v", n.NotifyID, inserted, err)
	}
	return rec
}

// A recorded notification is due at its bound, claimed by one sweep only, settled by its
// payment being PAID with its trade_no (and by nothing else), and kept until it is.
func TestInboxDueClaimAndSettle(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	createPending(t, st, "t1", "o1", "P1")
	paid := record(t, st, inboxNote("N1", "P1", "TP1", now, 30*time.Second))
	other := record(t, st, inboxNote("N2", "P1", "TOTHER", now, 30*time.Second)) // another trade of the same out_trade_no
	if paid.DispatchDueAt.IsZero() || !paid.DispatchDueAt.Equal(now.Add(30*time.Second)) {
		t.Fatalf("recorded due %v, want %v", paid.DispatchDueAt, now.Add(30*time.Second))
	}
	// The duplicate returns the stored row with its inbox state.
	dup, inserted, err := st.RecordNotification(ctx, inboxNote("N1", "P1", "TP1", now.Add(time.Second), 30*time.Second))
	if err != nil || inserted || dup.ID != paid.ID || !dup.DispatchDueAt.Equal(paid.DispatchDueAt) || !dup.SettledAt.IsZero() {
		t.Fatalf("duplicate: %+v inserted=%v %v", dup, inserted, err)
	}

	if due, err := st.DueNotifications(ctx, now.Add(29*time.Second), 10); err != nil || len(due) != 0 {
		t.Fatalf("due before the bound: %d %v", len(due), err)
	}
	due, err := st.DueNotifications(ctx, now.Add(31*time.Second), 10)
	if err != nil || len(due) != 2 || due[0].Raw != "notify_id=N1" {
		t.Fatalf("due after the bound: %+v %v", due, err)
	}
	next := now.Add(time.Minute)
	if ok, err := st.ClaimNotificationDispatch(ctx, paid.ID, 0, next); err != nil || !ok {
		t.Fatalf("first claim: %v %v", ok, err)
	}
	if ok, err := st.ClaimNotificationDispatch(ctx, paid.ID, 0, next); err != nil || ok {
		t.Fatalf("second claim of the same attempt: %v %v, want refused", ok, err)
	}
	if due, _ := st.DueNotifications(ctx, now.Add(31*time.Second), 10); len(due) != 1 || due[0].ID != other.ID {
		t.Fatalf("due after the claim: %+v, want only N2", due)
	}

	if n, err := st.SettlePaidNotifications(ctx, now); err != nil || n != 0 {
		t.Fatalf("settled %d (%v) while the payment is pending", n, err)
	}
	if _, err := st.MarkPaid(ctx, "P1", "TP1", now); err != nil {
		t.Fatal(err)
	}
	if n, err := st.SettlePaidNotifications(ctx, now); err != nil || n != 1 {
		t.Fatalf("settled %d (%v) once PAID, want 1 (N1, not the other trade's N2)", n, err)
	}
	if n, _ := st.SettlePaidNotifications(ctx, now); n != 0 {
		t.Fatalf("settled %d again", n)
	}
	if ok, _ := st.ClaimNotificationDispatch(ctx, paid.ID, 1, next); ok {
		t.Fatal("claimed a settled notification")
	}
	if n, oldest, err := st.UnsettledNotifications(ctx, now.Add(time.Second)); err != nil || n != 1 || !oldest.Equal(now) {
		t.Fatalf("unsettled: %d since %v (%v), want N2 since %v", n, oldest, err, now)
	}
	if err := st.SettleNotification(ctx, other.ID, "rejected: test"); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := st.UnsettledNotifications(ctx, now.Add(time.Second)); n != 0 {
		t.Fatalf("unsettled after settling N2: %d", n)
	}
	if got := count(t, db, "SELECT COUNT(*) FROM channel_notifications WHERE settled_at IS NOT NULL AND dispatch_due_at IS NULL"); got != 2 {
		t.Fatalf("settled rows = %d, want 2", got)
	}
}

// The retention purge deletes old notifications that need nothing more (settled,
// unverified, recorded before the inbox) and keeps every unsettled one whatever its age.
func TestPurgeKeepsEveryUnsettledNotification(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	old := time.Now().UTC().Add(-40 * 24 * time.Hour)
	settled := record(t, st, inboxNote("OLD-SETTLED", "P1", "T1", old, 30*time.Second))
	if err := st.SettleNotification(ctx, settled.ID, "ignored"); err != nil {
		t.Fatal(err)
	}
	unsettled := record(t, st, inboxNote("OLD-UNSETTLED", "P1", "T1", old, 30*time.Second))
	legacy := inboxNote("OLD-LEGACY", "P1", "T1", old, 0)
	legacy.DispatchDueAt = time.Time{}
	record(t, st, legacy)
	forged := payment.ChannelNotification{Channel: "alipay", NotifyID: "X", Verified: false, ReceivedAt: old, DispatchDueAt: old}
	forged.KeepRaw("forged")
	record(t, st, forged)
	record(t, st, inboxNote("NEW", "P1", "T1", time.Now().UTC(), 30*time.Second))

	cutoff := time.Now().Add(-30 * 24 * time.Hour)
	if n, err := st.PurgeNotifications(ctx, cutoff, 2); err != nil || n != 2 {
		t.Fatalf("first batch purged %d (%v), want 2", n, err)
	}
	if n, err := st.PurgeNotifications(ctx, cutoff, 2); err != nil || n != 1 {
		t.Fatalf("second batch purged %d (%v), want 1", n, err)
	}
	var left []string
	rows, err := db.QueryContext(ctx, "SELECT claimed_notify_id FROM channel_notifications ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		left = append(left, id)
	}
	_ = rows.Close()
	if len(left) != 2 || left[0] != "OLD-UNSETTLED" || left[1] != "NEW" {
		t.Fatalf("left %v, want the unsettled old one and the new one", left)
	}
	// A notification recorded before the inbox is put in it once, by its redelivery.
	legacy2 := inboxNote("LEGACY2", "P1", "T1", old, 0)
	legacy2.DispatchDueAt = time.Time{}
	l := record(t, st, legacy2)
	due := time.Now().UTC().Truncate(time.Microsecond)
	if err := st.ArmNotification(ctx, l.ID, due); err != nil {
		t.Fatal(err)
	}
	if err := st.ArmNotification(ctx, unsettled.ID, due.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, _, _ := st.RecordNotification(ctx, legacy2)
	if !got.DispatchDueAt.Equal(due) {
		t.Fatalf("armed due %v, want %v", got.DispatchDueAt, due)
	}
	got, _, _ = st.RecordNotification(ctx, inboxNote("OLD-UNSETTLED", "P1", "T1", old, 0))
	if !got.DispatchDueAt.Equal(old.Truncate(time.Microsecond).Add(30 * time.Second)) {
		t.Fatalf("arming moved a due notification to %v", got.DispatchDueAt)
	}
}

// The sweep's statements read the inbox's indexes, not the table: their cost follows
// the unsettled and the expired rows, not all of them.
func TestInboxStatementsUseTheirIndexes(t *testing.T) {
	_, db := newStore(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	if keys := explainKeys(t, db, mysql.QSettlePaidNotifications, now, now, payment.StatusPaid); keys["n"] != "idx_channel_notifications_due" || keys["p"] == "" {
		t.Errorf("settling reads notifications by %q and payments by %q", keys["n"], keys["p"])
	}
	if key := explainKeys(t, db, mysql.QPurgeNotifications, now, 1000)["channel_notifications"]; key != "idx_channel_notifications_received" {
		t.Errorf("the purge reads %q, want idx_channel_notifications_received", key)
	}
}

// A refund notification carries its payment's trade_no; its payment being PAID with that
// trade_no is not its effect, so the sweep's settle leaves it due for its hand-over.
func TestARefundNotificationIsNotSettledByItsPaymentBeingPaid(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	createPending(t, st, "t1", "o1", "P1")
	if _, err := st.MarkPaid(ctx, "P1", "TP1", now); err != nil {
		t.Fatal(err)
	}
	refund := inboxNote("NR1", "P1", "TP1", now, 30*time.Second)
	refund.Refund = true
	rec := record(t, st, refund)
	if !rec.Refund {
		t.Fatalf("recorded %+v, want it marked as a refund notification", rec)
	}
	paid := record(t, st, inboxNote("NP1", "P1", "TP1", now, 30*time.Second))
	if n, err := st.SettlePaidNotifications(ctx, now); err != nil || n != 1 {
		t.Fatalf("settled %d (%v), want 1: the payment notification only", n, err)
	}
	due, err := st.DueNotifications(ctx, now.Add(time.Minute), 10)
	if err != nil || len(due) != 1 || due[0].ID != rec.ID || !due[0].Refund {
		t.Fatalf("due after the settle: %+v %v, want the refund notification %d still due", due, err, rec.ID)
	}
	if got, err := st.NotificationByNotifyID(ctx, "alipay", "NP1"); err != nil || got.SettledAt.IsZero() || got.ID != paid.ID {
		t.Fatalf("payment notification: %+v %v, want settled", got, err)
	}
}

// A hand-over's outcome written after its notification was settled (a slow hand-over
// that signalled while another settled it already_paid, or the sweep saw its payment
// PAID) leaves the settled outcome as it is; an unsettled one's is written. Before, the
// late write replaced a settled notification's outcome.
func TestALateOutcomeLeavesASettledNotification(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	now := time.Now().UTC()
	settled := record(t, st, inboxNote("NS1", "P1", "T1", now, 30*time.Second))
	open := record(t, st, inboxNote("NS2", "P2", "T2", now, 30*time.Second))
	if err := st.SettleNotification(ctx, settled.ID, "already_paid"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []payment.ChannelNotification{settled, open} {
		if err := st.SetNotificationOutcome(ctx, n.ID, "signalled"); err != nil {
			t.Fatalf("%s: %v", n.NotifyID, err)
		}
	}
	for notifyID, want := range map[string]string{"NS1": "already_paid", "NS2": "signalled"} {
		got, err := st.NotificationByNotifyID(ctx, "alipay", notifyID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Outcome != want {
			t.Errorf("%s: outcome %q, want %q", notifyID, got.Outcome, want)
		}
	}
}

// A notification is settled once: a second settle (a dispatch that retried after its
// first settle committed, or one that raced the paid sweep) leaves the first outcome and
// its time. Before, the second settle replaced both.
func TestASettledNotificationKeepsItsFirstOutcome(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	n := record(t, st, inboxNote("NF1", "P1", "T1", time.Now().UTC(), 30*time.Second))
	if err := st.SettleNotification(ctx, n.ID, "rejected: amount"); err != nil {
		t.Fatal(err)
	}
	first, err := st.NotificationByNotifyID(ctx, "alipay", "NF1")
	if err != nil || first.SettledAt.IsZero() {
		t.Fatalf("after the first settle: %+v %v", first, err)
	}
	time.Sleep(2 * time.Millisecond) // the second settle's clock reads later
	if err := st.SettleNotification(ctx, n.ID, "ignored"); err != nil {
		t.Fatalf("second settle: %v, want a no-op", err)
	}
	got, err := st.NotificationByNotifyID(ctx, "alipay", "NF1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Outcome != "rejected: amount" || !got.SettledAt.Equal(first.SettledAt) {
		t.Fatalf("after a second settle: outcome %q settled %v, want %q settled %v",
			got.Outcome, got.SettledAt, "rejected: amount", first.SettledAt)
	}
}

// TestNotificationHeadersAreKept: the signed headers of a notification (WeChat Pay's) are
// kept with its raw body and read back, by notify_id and among the due ones; a body
// signed alone keeps none; headers too long for their column are refused, never cut.
func TestNotificationHeadersAreKept(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	h := http.Header{"Wechatpay-Timestamp": {"1700000000"}, "Wechatpay-Nonce": {"abc"}, "Wechatpay-Signature": {"c2ln"}, "Wechatpay-Serial": {"PUB_KEY_ID_1"}}
	n := payment.ChannelNotification{Channel: "wechatpay", NotifyID: "EV-1", PaymentNo: "P1", TradeNo: "42", Verified: true,
		ReceivedAt: now, DispatchDueAt: now, RawHeader: h}
	n.KeepRaw(`{"id":"EV-1"}`)
	record(t, st, n)
	got, err := st.NotificationByNotifyID(ctx, "wechatpay", "EV-1")
	if err != nil || !reflect.DeepEqual(got.RawHeader, h) || got.Raw != `{"id":"EV-1"}` {
		t.Fatalf("read back headers %v raw %q (%v), want %v", got.RawHeader, got.Raw, err, h)
	}
	due, err := st.DueNotifications(ctx, now.Add(time.Second), 10)
	if err != nil || len(due) != 1 || !reflect.DeepEqual(due[0].RawHeader, h) {
		t.Fatalf("due %+v (%v), want EV-1 with its headers", due, err)
	}
	record(t, st, inboxNote("N-alipay", "P2", "T2", now, time.Minute))
	if got, err := st.NotificationByNotifyID(ctx, "alipay", "N-alipay"); err != nil || got.RawHeader != nil {
		t.Fatalf("a notification without headers read back %v (%v), want none", got.RawHeader, err)
	}
	long := n
	long.NotifyID, long.RawHeader = "EV-2", http.Header{"Wechatpay-Signature": {strings.Repeat("x", 3000)}}
	if _, _, err := st.RecordNotification(ctx, long); payment.ErrorCode(err) != payment.EINVALID {
		t.Fatalf("headers over the column: %v, want EINVALID", err)
	}
}
