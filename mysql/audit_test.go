package mysql_test

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/audit"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
)

// TestAuditPage plants payments with every fact the audit reads and pages through them
// two at a time.
func TestAuditPage(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	exec := func(query string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, query, args...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
	paid := func(orderID, paymentNo string, repurchase bool) {
		t.Helper()
		np := newPayment("t1", orderID, paymentNo)
		np.Repurchase = repurchase
		if _, existed, err := st.CreatePendingPayment(ctx, np); err != nil || existed {
			t.Fatalf("create %s: existed=%v err=%v", paymentNo, existed, err)
		}
		if _, err := st.MarkPaid(ctx, paymentNo, "T"+paymentNo, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}

	createPending(t, st, "t1", "old", "P_OLD") // moved out of the window below
	paid("a", "P_A1", false)
	paid("a", "P_A2", true)
	// A second PAID payment that lost its opt-in, as a bug writing it would leave it.
	exec("UPDATE payments SET repurchase = 0 WHERE payment_no = 'P_A2'")
	paid("b", "P_B1", false)
	paid("b", "P_B2", true)
	paid("c", "P_C", false)
	createPending(t, st, "t1", "d", "P_D")
	old := time.Now().Add(-72 * time.Hour).UTC()
	exec("UPDATE payments SET created_at = ?, updated_at = ? WHERE payment_no = 'P_OLD'", old, old)

	if _, err := st.GrantBenefit(ctx, payment.BenefitGrant{TenantID: "t1", PaymentNo: "P_A1", OrderID: "a", Benefit: "vip"}); err != nil {
		t.Fatal(err)
	}
	for _, no := range []string{"P_A1", "P_B1", "P_B2"} {
		if err := st.MarkEventDelivered(ctx, mysql.EventID(no, payment.EventPaymentPaid)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := st.MarkEventAttempt(ctx, mysql.EventID("P_A2", payment.EventPaymentPaid), "merchant answered HTTP 503", time.Now(), payment.EventRetry{}); err != nil {
		t.Fatal(err)
	}
	exec("DELETE FROM payment_events WHERE payment_no = 'P_C'")

	since, until := time.Now().Add(-24*time.Hour), time.Now().Add(time.Minute)
	got := readChanges(t, st, "", since, until, 2)
	slices.SortFunc(got, func(x, y audit.Record) int { return cmp.Compare(x.Payment.ID, y.Payment.ID) })

	type want struct {
		no          string
		status      payment.Status
		granted     bool
		event       audit.EventState
		attempts    int
		lastError   string
		earlierPaid string
	}
	wants := []want{
		{no: "P_A1", status: payment.StatusPaid, granted: true, event: audit.EventSettled, attempts: 1},
		{no: "P_A2", status: payment.StatusPaid, event: audit.EventOwed, attempts: 1, lastError: "merchant answered HTTP 503", earlierPaid: "P_A1"},
		{no: "P_B1", status: payment.StatusPaid, event: audit.EventSettled, attempts: 1},
		{no: "P_B2", status: payment.StatusPaid, event: audit.EventSettled, attempts: 1},
		{no: "P_C", status: payment.StatusPaid, event: audit.EventMissing},
		{no: "P_D", status: payment.StatusPending, event: audit.EventMissing},
	}
	if len(got) != len(wants) {
		t.Fatalf("got %d records, want %d (P_OLD is outside the window)", len(got), len(wants))
	}
	for i, w := range wants {
		r := got[i]
		g := want{no: r.Payment.PaymentNo, status: r.Payment.Status, granted: r.Granted, event: r.Event,
			attempts: r.EventAttempts, lastError: r.EventLastError, earlierPaid: r.EarlierPaid}
		if g != w {
			t.Errorf("record %d: %+v, want %+v", i, g, w)
		}
		if i > 0 && r.Payment.ID <= got[i-1].Payment.ID {
			t.Errorf("record %d: id %d not after %d", i, r.Payment.ID, got[i-1].Payment.ID)
		}
	}
	if got[1].Payment.OrderID != "a" || !got[3].Payment.Repurchase || got[1].Payment.Repurchase {
		t.Errorf("payment columns not scanned: %+v / %+v", got[1].Payment, got[3].Payment)
	}

	if recs := readChanges(t, st, "", time.Now().Add(-96*time.Hour), time.Now().Add(-48*time.Hour), 100); len(recs) != 1 || recs[0].Payment.PaymentNo != "P_OLD" {
		t.Fatalf("window of three days ago: %+v; want P_OLD alone", recs)
	}
	// One tenant's payments only: another tenant's in the same window are not read.
	createPending(t, st, "t2", "x", "P_T2")
	if recs := readChanges(t, st, "t2", since, until, 100); len(recs) != 1 || recs[0].Payment.PaymentNo != "P_T2" {
		t.Fatalf("tenant t2's changes: %+v; want P_T2 alone", recs)
	}
	if recs := readChanges(t, st, "t1", since, until, 100); len(recs) != len(wants) {
		t.Fatalf("tenant t1's changes: %d records; want %d", len(recs), len(wants))
	}
}

// readChanges reads every source of the window limit rows at a time, as a run does, and
// returns each payment once.
func readChanges(tb testing.TB, st *mysql.Store, tenantID string, since, until time.Time, limit int) []audit.Record {
	tb.Helper()
	var out []audit.Record
	seen := map[string]bool{}
	cur := audit.Cursor{}
	for pages := 0; cur.Source < audit.SourceEnd; pages++ {
		if pages > 100 {
			tb.Fatalf("paging does not end: at %+v", cur)
		}
		recs, next, err := st.ChangedPage(context.Background(), tenantID, since, until, cur, limit)
		if err != nil {
			tb.Fatal(err)
		}
		if len(recs) > limit {
			tb.Fatalf("page of %d records, limit %d", len(recs), limit)
		}
		if next.Source == cur.Source && !(next.At.After(cur.At) || (next.At.Equal(cur.At) && next.ID > cur.ID)) {
			tb.Fatalf("cursor %+v does not move past %+v", next, cur)
		}
		for _, r := range recs {
			if !seen[r.Payment.PaymentNo] {
				seen[r.Payment.PaymentNo] = true
				out = append(out, r)
			}
		}
		cur = next
	}
	return out
}

// TestChangedPage_FindsWhatChangedByHand: payments created long before the window are
// read when their row, a refund or an outbox event of theirs changes in it, even by a
// statement that does not set updated_at, and ties on the change time are paged by id.
func TestChangedPage_FindsWhatChangedByHand(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	exec := func(query string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, query, args...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
	old := time.Now().Add(-72 * time.Hour).UTC()
	for _, no := range []string{"P_ROW", "P_REFUND", "P_EVENT", "P_QUIET"} {
		createPending(t, st, "t1", "o"+no, no)
	}
	for _, no := range []string{"P_REFUND", "P_EVENT"} {
		if _, err := st.MarkPaid(ctx, no, "T"+no, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	exec("UPDATE payments SET created_at = ?, updated_at = ?", old, old)
	exec("UPDATE payment_events SET changed_at = NULL")
	since, until := time.Now().Add(-time.Hour), time.Now().Add(time.Minute)
	if recs := readChanges(t, st, "", since, until, 1); len(recs) != 0 {
		t.Fatalf("before any change: %d payments, want none", len(recs))
	}

	// Statements by hand that leave updated_at to the database.
	exec("UPDATE payments SET status = 1, trade_no = 'TP_ROW' WHERE payment_no = 'P_ROW'")
	exec(`INSERT INTO refunds (refund_no, tenant_id, payment_no, out_request_no, amount_fen, status, created_at, updated_at)
		VALUES ('R1', 't1', 'P_REFUND', 'P_REFUND-R1', 5000, 1, ?, ?)`, time.Now().UTC(), time.Now().UTC())
	exec("UPDATE payment_events SET dead = 1 WHERE payment_no = 'P_EVENT'")

	got := map[string]audit.Record{}
	for _, r := range readChanges(t, st, "", since, until, 1) {
		got[r.Payment.PaymentNo] = r
	}
	if len(got) != 3 || got["P_QUIET"].Payment.PaymentNo != "" {
		t.Fatalf("changed payments %v, want P_ROW, P_REFUND and P_EVENT", slices.Sorted(maps.Keys(got)))
	}
	if r := got["P_ROW"]; r.Payment.Status != payment.StatusPaid || !r.Payment.UpdatedAt.After(since) {
		t.Errorf("P_ROW: %+v, want PAID with updated_at stamped by the database", r.Payment)
	}
	if r := got["P_EVENT"]; r.Event != audit.EventDead || !r.Changed.After(since) {
		t.Errorf("P_EVENT: event %v changed %s, want dead and changed now", r.Event, r.Changed)
	}
	if r := got["P_REFUND"]; !r.Changed.After(since) || r.Payment.UpdatedAt.After(since) {
		t.Errorf("P_REFUND: changed %s, updated_at %s; want the refund's change and the old row", r.Changed, r.Payment.UpdatedAt)
	}

	// Two payments changed at the same instant are both read, a page of one apiece.
	tie := time.Now().Add(-30 * time.Minute).UTC().Truncate(time.Microsecond)
	exec("UPDATE payments SET updated_at = ? WHERE payment_no IN ('P_ROW', 'P_QUIET')", tie)
	recs, next, err := st.ChangedPage(ctx, "", since, until, audit.Cursor{}, 1)
	if err != nil || len(recs) != 1 {
		t.Fatalf("first page: %d records, %v", len(recs), err)
	}
	recs2, _, err := st.ChangedPage(ctx, "", since, until, next, 1)
	if err != nil || len(recs2) != 1 || recs2[0].Payment.PaymentNo == recs[0].Payment.PaymentNo || !next.At.Equal(tie) {
		t.Fatalf("pages at a tie: %v then %v (cursor %+v), want both payments", recs, recs2, next)
	}
}

// TestChangedPage_ReadsRangesOfItsIndexes: each source is a range of its change index.
func TestChangedPage_ReadsRangesOfItsIndexes(t *testing.T) {
	_, db := newStore(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	since, until := now.Add(-time.Hour), now
	if key := explainKeys(t, db, mysql.QChangedPayments, since, until, since, since, 0, "", "", 200)["payments"]; key != "idx_payments_updated" {
		t.Errorf("payments are read by %q, want idx_payments_updated", key)
	}
	for q, want := range map[string][2]string{
		mysql.QChangedRefunds: {"r", "idx_refunds_updated"},
		mysql.QChangedEvents:  {"e", "idx_payment_events_changed"},
	} {
		keys := explainKeys(t, db, q, since, until, since, since, 0, "", "", since, until, 200)
		if keys[want[0]] != want[1] || keys["p"] != "uk_payments_payment_no" {
			t.Errorf("%s is read by %q and its payments by %q, want %s and uk_payments_payment_no", want[0], keys[want[0]], keys["p"], want[1])
		}
	}
}

// TestAuditWatermark: created once, moved only from where it stands, a retried move
// counted as done.
func TestAuditWatermark(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	t1 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	t2, t3 := t1.Add(24*time.Hour), t1.Add(48*time.Hour)
	if at, err := st.AuditWatermark(ctx, "s"); err != nil || !at.IsZero() {
		t.Fatalf("no watermark yet: %s, %v", at, err)
	}
	steps := []struct {
		from, to time.Time
		want     bool
		at       time.Time
	}{
		{time.Time{}, t1, true, t1}, // created
		{time.Time{}, t1, true, t1}, // created again: a retried creation
		{time.Time{}, t2, false, t1},
		{t1, t2, true, t2},
		{t1, t2, true, t2}, // a retried move
		{t1, t3, false, t2},
		{t2, t3, true, t3},
	}
	for i, s := range steps {
		moved, err := st.AdvanceAuditWatermark(ctx, "s", s.from, s.to)
		if err != nil || moved != s.want {
			t.Fatalf("step %d (%s to %s): moved %v, %v; want %v", i, s.from, s.to, moved, err, s.want)
		}
		if at, err := st.AuditWatermark(ctx, "s"); err != nil || !at.Equal(s.at) {
			t.Fatalf("step %d: watermark %s, %v; want %s", i, at, err, s.at)
		}
	}
	if at, _ := st.AuditWatermark(ctx, "other"); !at.IsZero() {
		t.Fatalf("another scope's watermark: %s, want none", at)
	}
}

func TestAnomalyKinds(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	for _, a := range []payment.Anomaly{
		{Kind: "paid_after_close", PaymentNo: "P1"},
		{Kind: "audit_lost", PaymentNo: "P1"},
		{Kind: "amount_mismatch", PaymentNo: "P2"},
	} {
		if err := st.RecordAnomaly(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	kinds, err := st.AnomalyKinds(ctx, "P1")
	if err != nil || len(kinds) != 2 || kinds[0] != "audit_lost" || kinds[1] != "paid_after_close" {
		t.Fatalf("kinds of P1: %v, %v", kinds, err)
	}
	if kinds, err := st.AnomalyKinds(ctx, "P3"); err != nil || len(kinds) != 0 {
		t.Fatalf("kinds of P3: %v, %v; want none", kinds, err)
	}
}

// The purge of delivered events keeps what is still owed and what is recent, and records
// its horizon first and each event it deletes, so the audit reads a payment.paid event
// that was delivered and then purged as settled, while one that was never written is
// still missing, whether paid after the horizon (P_NEVER) or before it (P_GONE).
func TestPurgeDeliveredEventsAndTheAuditsView(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	exec := func(query string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, query, args...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
	paid := func(no string, delivered bool) {
		t.Helper()
		createPending(t, st, "t1", "o"+no, no)
		if _, err := st.MarkPaid(ctx, no, "T"+no, time.Time{}); err != nil {
			t.Fatal(err)
		}
		if delivered {
			if err := st.MarkEventDelivered(ctx, mysql.EventID(no, payment.EventPaymentPaid)); err != nil {
				t.Fatal(err)
			}
		}
	}
	old := time.Now().Add(-100 * 24 * time.Hour).UTC()
	for _, no := range []string{"P_OLD1", "P_OLD2", "P_OLD3"} {
		paid(no, true)
	}
	paid("P_OWED", false) // old and never delivered: kept whatever its age
	paid("P_DEAD", false) // old and given up on: kept for an operator to hand back
	exec("UPDATE payment_events SET dead = 1 WHERE payment_no = 'P_DEAD'")
	exec("UPDATE payments SET paid_at = ? WHERE payment_no IN ('P_OLD1', 'P_OLD2', 'P_OLD3', 'P_OWED', 'P_DEAD')", old)
	exec("UPDATE payment_events SET created_at = ? WHERE payment_no IN ('P_OLD1', 'P_OLD2', 'P_OLD3', 'P_OWED', 'P_DEAD')", old)
	paid("P_NEW", true)    // delivered but recent: kept
	paid("P_NEVER", false) // paid now, its event never written (a bug): still reported
	exec("DELETE FROM payment_events WHERE payment_no = 'P_NEVER'")
	// Before any purge, an event missing from an old payment is missing.
	paid("P_GONE", false)
	exec("DELETE FROM payment_events WHERE payment_no = 'P_GONE'")
	exec("UPDATE payments SET paid_at = ? WHERE payment_no = 'P_GONE'", old)
	recs, err := st.AuditRecords(ctx, []string{"P_GONE"})
	if err != nil || len(recs) != 1 || recs[0].Event != audit.EventMissing {
		t.Fatalf("before any purge, an old payment without its event: %+v, %v; want EventMissing", recs, err)
	}

	before := time.Now().Add(-90 * 24 * time.Hour)
	var total int64
	for {
		n, err := st.PurgeDeliveredEvents(ctx, before, 2)
		if err != nil {
			t.Fatal(err)
		}
		total += n
		if n < 2 {
			break
		}
	}
	if total != 3 {
		t.Fatalf("purged %d events, want the 3 old delivered ones", total)
	}
	for no, want := range map[string]int{"P_OLD1": 0, "P_OLD2": 0, "P_OLD3": 0, "P_OWED": 1, "P_DEAD": 1, "P_NEW": 1} {
		if got := count(t, db, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ?", no); got != want {
			t.Errorf("%s: %d events left, want %d", no, got, want)
		}
	}
	// A purge with an older horizon never moves it back.
	if _, err := st.PurgeDeliveredEvents(ctx, before.Add(-time.Hour), 10); err != nil {
		t.Fatal(err)
	}
	var horizon time.Time
	if err := db.QueryRowContext(ctx, "SELECT horizon FROM purge_horizons WHERE name = 'payment_events'").Scan(&horizon); err != nil {
		t.Fatal(err)
	}
	if d := horizon.Sub(before); d < -time.Millisecond || d > time.Millisecond {
		t.Fatalf("horizon %v, want %v: it moved back", horizon, before)
	}

	// A worker whose clock runs 100 days ahead purges nothing recent and cannot move the
	// horizon past a week before the database's clock.
	if n, err := st.PurgeDeliveredEvents(ctx, time.Now().Add(100*24*time.Hour), 10); err != nil || n != 0 {
		t.Fatalf("a purge from a clock 100 days ahead: %d, %v; want nothing purged (P_NEW is recent)", n, err)
	}
	if err := db.QueryRowContext(ctx, "SELECT horizon FROM purge_horizons WHERE name = 'payment_events'").Scan(&horizon); err != nil {
		t.Fatal(err)
	}
	if horizon.After(time.Now().Add(-mysql.MinEventRetention + time.Minute)) {
		t.Fatalf("horizon %v after a fast clock's purge: later than a week ago", horizon)
	}
	recs, err = st.AuditRecords(ctx, []string{"P_OLD1", "P_OWED", "P_DEAD", "P_NEW", "P_NEVER", "P_GONE"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]audit.EventState{}
	for _, r := range recs {
		got[r.Payment.PaymentNo] = r.Event
	}
	want := map[string]audit.EventState{
		"P_OLD1": audit.EventSettled, "P_GONE": audit.EventMissing, "P_NEW": audit.EventSettled,
		"P_OWED": audit.EventOwed, "P_DEAD": audit.EventDead, "P_NEVER": audit.EventMissing,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("the audit's events after the purge: %v, want %v", got, want)
	}
}

// The purge reads a range of idx_payment_events_undelivered, not the whole table.
func TestPurgeDeliveredEventsReadsItsIndex(t *testing.T) {
	_, db := newStore(t)
	if key := explainKeys(t, db, mysql.QPurgeDeliveredEvents, time.Now(), 1000)["payment_events"]; key != "idx_payment_events_undelivered" {
		t.Fatalf("the purge of delivered events reads %q, want idx_payment_events_undelivered", key)
	}
}

// paidAtAlipay answers every query with the trade paid as the payment asks (9.90 CNY).
type paidAtAlipay struct{}

func (paidAtAlipay) Query(_ context.Context, paymentNo string) (payment.Trade, error) {
	return payment.Trade{State: payment.TradePaid, PaymentNo: paymentNo, TradeNo: "T" + paymentNo, Amount: 990, RawStatus: "TRADE_SUCCESS"}, nil
}

// noneRunning is a WorkflowChecker for which no workflow runs.
type noneRunning struct{}

func (noneRunning) Running(context.Context, string) (bool, error) { return false, nil }

// Two PAID payments paid long before the purge's horizon: the payment.paid event of one
// was delivered and purged, that of the other was never written. The purge's record of
// what it deleted tells them apart, not the payments' age: the first is settled, the
// second is a missing event, which the audit reports as undelivered_event.
func TestAuditTellsAPurgedEventFromOneNeverWritten(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	exec := func(query string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, query, args...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
	old := time.Now().Add(-100 * 24 * time.Hour).UTC()
	for _, no := range []string{"P_PURGED", "P_NEVER"} {
		createPending(t, st, "t1", "o"+no, no)
		if _, err := st.MarkPaid(ctx, no, "T"+no, old); err != nil {
			t.Fatal(err)
		}
		if _, err := st.GrantBenefit(ctx, payment.BenefitGrant{TenantID: "t1", PaymentNo: no, OrderID: "o" + no, Benefit: "vip"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.MarkEventDelivered(ctx, mysql.EventID("P_PURGED", payment.EventPaymentPaid)); err != nil {
		t.Fatal(err)
	}
	exec("UPDATE payment_events SET created_at = ? WHERE payment_no = 'P_PURGED'", old)
	exec("DELETE FROM payment_events WHERE payment_no = 'P_NEVER'") // as if it had never been written
	// Their rows changed two hours ago (a refund, say): the audit's window reads them, and
	// they are past the webhook SLA.
	changed := time.Now().Add(-2 * time.Hour).UTC()
	exec("UPDATE payments SET updated_at = ? WHERE payment_no IN ('P_PURGED', 'P_NEVER')", changed)
	for {
		n, err := st.PurgeDeliveredEvents(ctx, time.Now().Add(-90*24*time.Hour), 10)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if n := count(t, db, "SELECT COUNT(*) FROM payment_events WHERE payment_no IN ('P_PURGED', 'P_NEVER')"); n != 0 {
		t.Fatalf("%d events left, want P_PURGED's purged", n)
	}

	recs, err := st.AuditRecords(ctx, []string{"P_PURGED", "P_NEVER"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]audit.EventState{}
	for _, r := range recs {
		got[r.Payment.PaymentNo] = r.Event
	}
	if want := map[string]audit.EventState{"P_PURGED": audit.EventSettled, "P_NEVER": audit.EventMissing}; !maps.Equal(got, want) {
		t.Fatalf("the audit's events: %v, want %v (%d settled, %d missing)", got, want, audit.EventSettled, audit.EventMissing)
	}

	aud := &audit.Auditor{Store: st, Gateway: paidAtAlipay{}, Workflows: noneRunning{}}
	rep, err := aud.Run(ctx, audit.Params{Since: changed.Add(-time.Minute), Until: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	undelivered := map[string]string{}
	for _, f := range rep.Findings {
		if f.Kind == audit.KindUndeliveredEvent {
			undelivered[f.PaymentNo] = f.Detail
		}
	}
	if len(undelivered) != 1 || !strings.Contains(undelivered["P_NEVER"], "no payment.paid event row") {
		t.Fatalf("undelivered_event findings %v, want P_NEVER's alone, as having no event row (report: %+v)", undelivered, rep)
	}
}

// The purges that ran before purged_events (migration 0054) left only their horizon: a
// payment.paid event missing from a payment paid before it is still counted as purged,
// before and after the first purge that records what it deletes; one paid after it and
// not recorded was never written.
func TestAuditCountsEventsPurgedBeforeTheRecordsAsPurged(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	exec := func(query string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, query, args...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
	unrecorded := time.Now().Add(-200 * 24 * time.Hour).UTC()
	for no, paidAt := range map[string]time.Time{"P_EARLY": unrecorded.Add(-24 * time.Hour), "P_LATER": unrecorded.Add(24 * time.Hour)} {
		createPending(t, st, "t1", "o"+no, no)
		if _, err := st.MarkPaid(ctx, no, "T"+no, paidAt); err != nil {
			t.Fatal(err)
		}
	}
	exec("DELETE FROM payment_events WHERE payment_no IN ('P_EARLY', 'P_LATER')")
	// What a purge of an earlier release left: its horizon, and no record of the events.
	exec("INSERT INTO purge_horizons (name, horizon, updated_at) VALUES ('payment_events', ?, ?)", unrecorded, unrecorded)
	want := map[string]audit.EventState{"P_EARLY": audit.EventSettled, "P_LATER": audit.EventMissing}
	for _, when := range []string{"before", "after"} {
		if when == "after" {
			if _, err := st.PurgeDeliveredEvents(ctx, time.Now().Add(-90*24*time.Hour), 10); err != nil {
				t.Fatal(err)
			}
		}
		recs, err := st.AuditRecords(ctx, []string{"P_EARLY", "P_LATER"})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]audit.EventState{}
		for _, r := range recs {
			got[r.Payment.PaymentNo] = r.Event
		}
		if !maps.Equal(got, want) {
			t.Fatalf("%s the first recording purge: %v, want %v", when, got, want)
		}
	}
}
