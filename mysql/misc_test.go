package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
)

func TestRecordNotification(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	n := func(notifyID string, verified bool) payment.ChannelNotification {
		return payment.ChannelNotification{
			Channel: "alipay", NotifyID: notifyID, PaymentNo: "p1", TradeNo: "T1",
			Raw: "notify_id=" + notifyID + "&trade_status=TRADE_SUCCESS", Verified: verified,
		}
	}
	// A forged notification arrives first with a real notify_id: it must not claim it.
	forged, inserted, err := st.RecordNotification(ctx, n("N1", false))
	if err != nil || !inserted {
		t.Fatalf("forged: inserted=%v err=%v", inserted, err)
	}
	first, inserted, err := st.RecordNotification(ctx, n("N1", true))
	if err != nil || !inserted || first.ID == forged.ID {
		t.Fatalf("genuine after forged: inserted=%v err=%v", inserted, err)
	}
	again, inserted, err := st.RecordNotification(ctx, n("N1", true))
	if err != nil || inserted || again.ID != first.ID || again.Raw != first.Raw || !again.Verified {
		t.Fatalf("genuine retry: %+v inserted=%v err=%v; want the first row", again, inserted, err)
	}
	if _, inserted, _ := st.RecordNotification(ctx, n("N1", false)); !inserted {
		t.Fatal("a second forged copy must still be stored")
	}

	const c = 50
	var ins, dup atomic.Int32
	testenv.Parallel(c, func(i int) {
		_, inserted, err := st.RecordNotification(ctx, n("N2", true))
		switch {
		case err != nil:
			t.Errorf("caller %d: %v", i, err)
		case inserted:
			ins.Add(1)
		default:
			dup.Add(1)
		}
	})
	claimed := count(t, db, "SELECT COUNT(*) FROM channel_notifications WHERE notify_id IS NOT NULL")
	unclaimed := count(t, db, "SELECT COUNT(*) FROM channel_notifications WHERE notify_id IS NULL AND claimed_notify_id = 'N1'")
	t.Logf("%d concurrent verified copies: inserted=%d duplicates=%d; rows claiming an id=%d, forged rows=%d",
		c, ins.Load(), dup.Load(), claimed, unclaimed)
	if ins.Load() != 1 || dup.Load() != c-1 || claimed != 2 || unclaimed != 2 {
		t.Fatal("want one row per verified notify_id and every forged copy kept unclaimed")
	}

	if err := st.SetNotificationOutcome(ctx, first.ID, "signalled"); err != nil {
		t.Fatal(err)
	}
	if err := st.SetNotificationOutcome(ctx, first.ID, "signalled"); err != nil {
		t.Fatalf("repeat: %v", err)
	}
	if got, _, _ := st.RecordNotification(ctx, n("N1", true)); got.Outcome != "signalled" {
		t.Fatalf("outcome = %q", got.Outcome)
	}
	if err := st.SetNotificationOutcome(ctx, 1<<40, "x"); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("missing id: %v", err)
	}
}

// raceGrants runs grant from n goroutines at once and counts the calls that created the
// grant and those that found it.
func raceGrants(t *testing.T, n int, grant func() (bool, error)) (created, existed int32) {
	var c, e atomic.Int32
	testenv.Parallel(n, func(i int) {
		ok, err := grant()
		switch {
		case err != nil:
			t.Errorf("caller %d: %v", i, err)
		case ok:
			c.Add(1)
		default:
			e.Add(1)
		}
	})
	return c.Load(), e.Load()
}

func TestGrantBenefit_Concurrent(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	g := payment.BenefitGrant{TenantID: "t1", PaymentNo: "p1", OrderID: "o1", Benefit: "vip_30d"}
	const n = 100
	created, existed := raceGrants(t, n, func() (bool, error) { return st.GrantBenefit(ctx, g) })
	rows := count(t, db, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = 'p1'")
	t.Logf("%d concurrent grants: created=%d existed=%d rows=%d", n, created, existed, rows)
	if created != 1 || existed != n-1 || rows != 1 {
		t.Fatal("want exactly one grant")
	}
	// A payment is granted once: another benefit name finds the grant there.
	other := g
	other.Benefit = "coupon"
	if ok, err := st.GrantBenefit(ctx, other); err != nil || ok {
		t.Fatalf("another benefit for the same payment: created=%v %v, want the existing grant", ok, err)
	}
	gs, err := st.ListGrants(ctx, "t1", "p1")
	if err != nil || len(gs) != 1 || gs[0].Benefit != "vip_30d" {
		t.Fatalf("ListGrants = %+v, %v", gs, err)
	}
}

// GrantPaid reads the payment in the statement that inserts the grant: a pending
// payment, another tenant's payment and an unknown one are refused with nothing
// written; a paid one is granted once, however many callers race.
func TestGrantPaid_OnlyAPaidPaymentOfTheTenant(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	createPending(t, st, "t1", "o1", "PG1")
	g := payment.BenefitGrant{TenantID: "t1", PaymentNo: "PG1", OrderID: "o1", Benefit: "vip_30d"}
	if ok, err := st.GrantPaid(ctx, g); ok || payment.ErrorCode(err) != payment.EILLEGALSTATE {
		t.Fatalf("pending payment: created=%v %v, want %s", ok, err, payment.EILLEGALSTATE)
	}
	if _, err := st.MarkPaid(ctx, "PG1", "TPG1", time.Time{}); err != nil {
		t.Fatal(err)
	}
	other := g
	other.TenantID = "t2"
	if ok, err := st.GrantPaid(ctx, other); ok || !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("another tenant's payment: created=%v %v, want not found", ok, err)
	}
	unknown := g
	unknown.PaymentNo = "PG_NONE"
	if ok, err := st.GrantPaid(ctx, unknown); ok || !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("unknown payment: created=%v %v, want not found", ok, err)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no IN ('PG1', 'PG_NONE')"); n != 0 {
		t.Fatalf("%d grants written by refused calls", n)
	}
	const n = 50
	created, existed := raceGrants(t, n, func() (bool, error) { return st.GrantPaid(ctx, g) })
	gs, err := st.ListGrants(ctx, "t1", "PG1")
	if created != 1 || existed != n-1 || err != nil || len(gs) != 1 || gs[0].OrderID != "o1" || gs[0].Benefit != "vip_30d" {
		t.Fatalf("created=%d existed=%d grants=%+v %v, want one grant of order o1", created, existed, gs, err)
	}
}

func TestOutbox(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	createPending(t, st, "t1", "o1", "p1")
	createPending(t, st, "t1", "o2", "p2")
	paid, err := st.MarkPaid(ctx, "p1", "T1", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	closed, err := st.ClosePayment(ctx, "p2", "expired")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	later := now.Add(time.Second)

	evs, err := st.DueEvents(ctx, now, later, 10, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].EventID != paid.EventID || evs[1].EventID != closed.EventID {
		t.Fatalf("due = %+v", evs)
	}
	if evs[1].Type != payment.EventPaymentClosed || evs[1].TenantID != "t1" || evs[1].PaymentNo != "p2" ||
		evs[1].Dead || !evs[1].NextAttemptAt.IsZero() {
		t.Fatalf("closed event = %+v", evs[1])
	}
	if evs, _ := st.DueEvents(ctx, now, evs[0].CreatedAt, 10, 10); len(evs) != 0 {
		t.Fatalf("events created before the first: %d", len(evs))
	}

	retry := payment.EventRetry{Base: time.Minute, Max: time.Hour, MaxAttempts: 10}
	steps := []struct {
		name          string
		do            func() error
		wantAttempts  int
		wantDelivered bool
		wantLastError string
	}{
		{"failed attempt", func() error { _, _, err := st.MarkEventAttempt(ctx, paid.EventID, "HTTP 502", now, retry); return err }, 1, false, "HTTP 502"},
		{"another failed attempt", func() error { _, _, err := st.MarkEventAttempt(ctx, paid.EventID, "timeout", now, retry); return err }, 2, false, "timeout"},
		{"delivered", func() error { return st.MarkEventDelivered(ctx, paid.EventID) }, 3, true, ""},
		{"delivered again changes nothing", func() error { return st.MarkEventDelivered(ctx, paid.EventID) }, 3, true, ""},
		{"late failure report changes nothing", func() error { _, _, err := st.MarkEventAttempt(ctx, paid.EventID, "late", now, retry); return err }, 3, true, ""},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if err := s.do(); err != nil {
				t.Fatal(err)
			}
			ev, err := st.GetEvent(ctx, paid.EventID)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Attempts != s.wantAttempts || ev.Delivered != s.wantDelivered || ev.LastError != s.wantLastError ||
				ev.DeliveredAt.IsZero() == s.wantDelivered {
				t.Fatalf("event = %+v", ev)
			}
		})
	}
	// Delivered events are never due, however late the clock.
	if evs, _ := st.DueEvents(ctx, now.Add(24*time.Hour), later, 10, 10); len(evs) != 1 || evs[0].EventID != closed.EventID {
		t.Fatalf("due after delivery = %+v", evs)
	}
	for name, err := range map[string]error{
		"get":       func() error { _, err := st.GetEvent(ctx, "evt_missing"); return err }(),
		"attempt":   func() error { _, _, err := st.MarkEventAttempt(ctx, "evt_missing", "x", now, retry); return err }(),
		"delivered": st.MarkEventDelivered(ctx, "evt_missing"),
	} {
		if !errors.Is(err, payment.ErrNotFound) {
			t.Errorf("%s of a missing event: %v", name, err)
		}
	}
}

// GetEventWithTenant reads in one statement what GetEvent and GetTenant read, with the
// tenant as it is at the read (a rotated secret is seen); a missing event is not found,
// and an event whose tenant is missing is another error.
func TestGetEventWithTenant(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	tn := payment.Tenant{ID: "evt-t", Name: "Evt", APIKeyHash: strings.Repeat("e", 64), NotifyURL: "https://evt.test/hook",
		WebhookSecret: "first", AlipayAppID: "2021000", AlipaySeller: "2088000"}
	if err := st.UpsertTenant(ctx, tn); err != nil {
		t.Fatal(err)
	}
	ev := paidEvent(t, st, "evt-t", "P_EVT1")
	if err := st.MarkEventDelivered(ctx, ev.EventID); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"first", "second"} {
		if secret != "first" {
			tn.WebhookSecret = secret
			if err := st.UpsertTenant(ctx, tn); err != nil {
				t.Fatal(err)
			}
		}
		gotEv, gotTn, err := st.GetEventWithTenant(ctx, ev.EventID)
		if err != nil {
			t.Fatal(err)
		}
		wantEv, _ := st.GetEvent(ctx, ev.EventID)
		wantTn, _ := st.GetTenant(ctx, "evt-t")
		if !reflect.DeepEqual(gotEv, wantEv) || gotTn != wantTn || gotTn.WebhookSecret != secret || !gotEv.Delivered {
			t.Fatalf("GetEventWithTenant = %+v, %+v\nwant %+v, %+v", gotEv, gotTn, wantEv, wantTn)
		}
	}
	if _, _, err := st.GetEventWithTenant(ctx, "evt_missing"); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("missing event: %v", err)
	}
	orphan := paidEvent(t, st, "evt-no-tenant", "P_EVT2")
	if _, _, err := st.GetEventWithTenant(ctx, orphan.EventID); err == nil || errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("event of a missing tenant: %v, want an error that is not ErrNotFound", err)
	}
}

// paidEvent pays a new payment of tenantID and returns its outbox event.
func paidEvent(tb testing.TB, st *mysql.Store, tenantID, paymentNo string) payment.Event {
	tb.Helper()
	ctx := context.Background()
	createPending(tb, st, tenantID, "o-"+paymentNo, paymentNo)
	tr, err := st.MarkPaid(ctx, paymentNo, "T"+paymentNo, time.Time{})
	if err != nil {
		tb.Fatal(err)
	}
	ev, err := st.GetEvent(ctx, tr.EventID)
	if err != nil {
		tb.Fatal(err)
	}
	return ev
}

// TestEventBackoff fails one event again and again at known times: each failure pushes
// next_attempt_at out twice as far, up to the maximum; the last allowed failure makes
// the event dead, and a dead event is never due. A delivery that succeeds later (an
// operator's manual retry) still marks it delivered.
func TestEventBackoff(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	ev := paidEvent(t, st, "t1", "p1")
	retry := payment.EventRetry{Base: time.Minute, Max: 10 * time.Minute, MaxAttempts: 6}
	createdBefore := time.Now().Add(time.Second)
	at := time.Now().UTC().Truncate(time.Microsecond)
	tests := []struct {
		name      string
		wantDelay time.Duration
		wantDead  bool
		wantDied  bool
	}{
		{"first failure", time.Minute, false, false},
		{"second", 2 * time.Minute, false, false},
		{"third", 4 * time.Minute, false, false},
		{"fourth", 8 * time.Minute, false, false},
		{"fifth hits the maximum", 10 * time.Minute, false, false},
		{"sixth is the last allowed", 10 * time.Minute, true, true},
		{"a failure of a dead event", 10 * time.Minute, true, false},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, died, err := st.MarkEventAttempt(ctx, ev.EventID, fmt.Sprintf("HTTP 50%d", i), at, retry)
			if err != nil {
				t.Fatal(err)
			}
			stored, err := st.GetEvent(ctx, ev.EventID)
			if err != nil {
				t.Fatal(err)
			}
			if !stored.NextAttemptAt.Equal(got.NextAttemptAt) || stored.Dead != got.Dead || stored.Attempts != got.Attempts {
				t.Fatalf("returned %+v, stored %+v", got, stored)
			}
			if delay := stored.NextAttemptAt.Sub(at); delay != tc.wantDelay || stored.Attempts != i+1 ||
				stored.Dead != tc.wantDead || died != tc.wantDied {
				t.Fatalf("after %d failures: next in %v, attempts %d, dead %v, died %v; want %v, %d, %v, %v",
					i+1, delay, stored.Attempts, stored.Dead, died, tc.wantDelay, i+1, tc.wantDead, tc.wantDied)
			}
			t.Logf("attempt %d failed at t: next at t+%v, dead=%v", stored.Attempts, stored.NextAttemptAt.Sub(at), stored.Dead)
			due := func(now time.Time) bool {
				evs, err := st.DueEvents(ctx, now, createdBefore, 10, 10)
				if err != nil {
					t.Fatal(err)
				}
				return len(evs) == 1 && evs[0].EventID == ev.EventID
			}
			if due(stored.NextAttemptAt.Add(-time.Microsecond)) {
				t.Fatal("due before next_attempt_at")
			}
			if got := due(stored.NextAttemptAt); got == tc.wantDead {
				t.Fatalf("due at next_attempt_at = %v, want %v (dead events are never due)", got, !tc.wantDead)
			}
			at = stored.NextAttemptAt
		})
	}
	if err := st.MarkEventDelivered(ctx, ev.EventID); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.GetEvent(ctx, ev.EventID); !got.Delivered || got.Dead || !got.NextAttemptAt.IsZero() {
		t.Fatalf("dead event delivered after all: %+v, want delivered and no longer dead", got)
	}
}

// TestDueEvents_FairAcrossTenants gives one tenant a backlog of 30 due events and two
// others a few: the batch holds at most perTenant of each, and starts with one event of
// every tenant.
func TestDueEvents_FairAcrossTenants(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	backlog := map[string]int{"big": 30, "small": 2, "tiny": 1}
	for _, tenant := range []string{"big", "small", "tiny"} { // big's events are the oldest
		for i := range backlog[tenant] {
			paidEvent(t, st, tenant, fmt.Sprintf("%s_%02d", tenant, i))
		}
	}
	now := time.Now().Add(time.Second)
	tests := []struct {
		name      string
		perTenant int
		limit     int
		want      map[string]int
	}{
		{"share of 5", 5, 100, map[string]int{"big": 5, "small": 2, "tiny": 1}},
		{"share larger than every backlog", 50, 100, map[string]int{"big": 30, "small": 2, "tiny": 1}},
		{"limit smaller than the shares", 5, 4, map[string]int{"big": 2, "small": 1, "tiny": 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := st.DueEvents(ctx, now, now, tc.perTenant, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, ev := range evs {
				got[ev.TenantID]++
			}
			if !maps.Equal(got, tc.want) {
				t.Fatalf("events per tenant = %v, want %v", got, tc.want)
			}
			first := map[string]bool{}
			for _, ev := range evs[:3] {
				first[ev.TenantID] = true
			}
			if len(first) != 3 || evs[0].PaymentNo != "big_00" {
				t.Fatalf("first three events are of %v, want one of each tenant starting with big_00", first)
			}
		})
	}
}

// TestClaimEvent_Concurrent has 20 sweepers claim the same due event as read: exactly
// one gets it, and it is not due again until the lease ends.
func TestClaimEvent_Concurrent(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	ev := paidEvent(t, st, "t1", "p1")
	retry := payment.EventRetry{Base: time.Minute, Max: time.Hour, MaxAttempts: 10}
	now := time.Now()
	tests := []struct {
		name  string
		setup func() payment.Event // the event as the sweepers read it
	}{
		{"never attempted (NULL next_attempt_at)", func() payment.Event { return ev }},
		{"due again after a failure", func() payment.Event {
			failed, _, err := st.MarkEventAttempt(ctx, ev.EventID, "timeout", now.Add(-time.Hour), retry)
			if err != nil {
				t.Fatal(err)
			}
			return failed
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			read := tc.setup()
			lease := now.Add(time.Minute)
			const n = 20
			var won atomic.Int32
			testenv.Parallel(n, func(i int) {
				ok, err := st.ClaimEvent(ctx, read, lease)
				if err != nil {
					t.Errorf("claim %d: %v", i, err)
				}
				if ok {
					won.Add(1)
				}
			})
			t.Logf("%d concurrent claims: %d won", n, won.Load())
			if won.Load() != 1 {
				t.Fatalf("%d claims won, want exactly 1", won.Load())
			}
			if evs, _ := st.DueEvents(ctx, now, now.Add(time.Second), 10, 10); len(evs) != 0 {
				t.Fatalf("claimed event still due: %+v", evs)
			}
			evs, _ := st.DueEvents(ctx, lease, now.Add(time.Second), 10, 10)
			if len(evs) != 1 || !evs[0].NextAttemptAt.Equal(lease.UTC().Truncate(time.Microsecond)) {
				t.Fatalf("due when the lease ends = %+v", evs)
			}
			if ok, err := st.ClaimEvent(ctx, read, lease.Add(time.Minute)); ok || err != nil {
				t.Fatalf("claim with the value read before: %v %v, want false", ok, err)
			}
		})
	}
}

func TestTenants(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	hash := func(c byte) string {
		b := make([]byte, 64)
		for i := range b {
			b[i] = c
		}
		return string(b)
	}
	a := payment.Tenant{ID: "acme", Name: "Acme", APIKeyHash: hash('a'), NotifyURL: "https://acme.test/hook",
		WebhookSecret: "s3cret", AlipayAppID: "2021000", AlipaySeller: "2088000"}
	if err := st.UpsertTenant(ctx, a); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	created := got.CreatedAt
	got.CreatedAt = time.Time{}
	if got != a || created.IsZero() {
		t.Fatalf("GetTenant = %+v, want %+v", got, a)
	}

	a.Name, a.APIKeyHash = "Acme Ltd", hash('b')
	if err := st.UpsertTenant(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got, err := st.TenantByAPIKeyHash(ctx, hash('b')); err != nil || got.Name != "Acme Ltd" || !got.CreatedAt.Equal(created) {
		t.Fatalf("after update: %+v %v", got, err)
	}
	if _, err := st.TenantByAPIKeyHash(ctx, hash('a')); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("old hash: %v", err)
	}

	// Another tenant may not take Acme's key hash, neither by insert nor by update, and
	// Acme must be left untouched.
	for _, b := range []payment.Tenant{
		{ID: "evil", Name: "Evil", APIKeyHash: hash('b'), NotifyURL: "https://evil.test"},
	} {
		if err := st.UpsertTenant(ctx, b); payment.ErrorCode(err) != payment.ECONFLICT {
			t.Fatalf("insert with a taken hash: %v", err)
		}
		b.APIKeyHash = hash('c')
		if err := st.UpsertTenant(ctx, b); err != nil {
			t.Fatal(err)
		}
		b.APIKeyHash = hash('b')
		if err := st.UpsertTenant(ctx, b); payment.ErrorCode(err) != payment.ECONFLICT {
			t.Fatalf("update to a taken hash: %v", err)
		}
	}
	if got, _ := st.GetTenant(ctx, "acme"); got.NotifyURL != "https://acme.test/hook" || got.APIKeyHash != hash('b') {
		t.Fatalf("acme was modified: %+v", got)
	}

	const n = 20
	testenv.Parallel(n, func(i int) {
		tn := payment.Tenant{ID: "race", Name: fmt.Sprintf("name %d", i), APIKeyHash: hash('d')}
		if err := st.UpsertTenant(ctx, tn); err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	})
	rows := count(t, db, "SELECT COUNT(*) FROM tenants WHERE id = 'race'")
	t.Logf("%d concurrent upserts of one tenant: rows=%d", n, rows)
	if rows != 1 {
		t.Fatal("want one tenant row")
	}
	if _, err := st.GetTenant(ctx, "nobody"); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("missing tenant: %v", err)
	}
	if err := st.UpsertTenant(ctx, payment.Tenant{ID: "bad id", APIKeyHash: hash('e')}); payment.ErrorCode(err) != payment.EINVALID {
		t.Fatalf("invalid id: %v", err)
	}
}

func TestRecordAnomaly(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	a := payment.Anomaly{Kind: "paid_after_close", TenantID: "t1", PaymentNo: "p1", TradeNo: "T1", Amount: 990,
		Detail: "Alipay reports TRADE_SUCCESS for a payment closed locally"}
	const n = 20
	testenv.Parallel(n, func(i int) {
		if err := st.RecordAnomaly(ctx, a); err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	})
	other := a
	other.Kind = "amount_mismatch"
	if err := st.RecordAnomaly(ctx, other); err != nil {
		t.Fatal(err)
	}
	rows := count(t, db, "SELECT COUNT(*) FROM payment_anomalies WHERE payment_no = 'p1'")
	t.Logf("%d concurrent records of one anomaly plus one other kind: rows=%d", n, rows)
	if rows != 2 {
		t.Fatalf("rows = %d, want 2", rows)
	}
	var amount int64
	if err := db.QueryRow("SELECT amount_fen FROM payment_anomalies WHERE kind = 'paid_after_close'").Scan(&amount); err != nil || amount != 990 {
		t.Fatalf("amount = %d %v", amount, err)
	}
	if err := st.RecordAnomaly(ctx, payment.Anomaly{Kind: "x"}); payment.ErrorCode(err) != payment.EINVALID {
		t.Fatalf("anomaly without payment_no: %v", err)
	}
}

// TestRecordAnomaly_OnePerSubject: an anomaly's identity is what it is about. Two
// anomalies of one kind on one payment about two subjects (two refunds that failed
// locally and that Alipay carried out) are two rows; the same subject recorded again, by
// many callers at once, is one row that keeps what was recorded first.
func TestRecordAnomaly_OnePerSubject(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	r1 := payment.Anomaly{Kind: "refund_succeeded_after_fail", TenantID: "t1", PaymentNo: "p1", Subject: "p1-r1", TradeNo: "T1",
		Amount: 300, Detail: "alipay confirms refund r1 that is FAILED locally"}
	r2 := r1
	r2.Subject, r2.Detail = "p1-r2", "alipay confirms refund r2 that is FAILED locally"
	testenv.Parallel(10, func(i int) {
		a := r1
		if i%2 == 1 {
			a = r2
		}
		if err := st.RecordAnomaly(ctx, a); err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	})
	again := r1
	again.Detail = "recorded again"
	if err := st.RecordAnomaly(ctx, again); err != nil {
		t.Fatal(err)
	}
	rows, err := db.QueryContext(ctx, "SELECT subject, detail FROM payment_anomalies WHERE kind = ? AND payment_no = 'p1' ORDER BY subject", r1.Kind)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var subject, detail string
		if err := rows.Scan(&subject, &detail); err != nil {
			t.Fatal(err)
		}
		got = append(got, subject+": "+detail)
	}
	if want := []string{"p1-r1: " + r1.Detail, "p1-r2: " + r2.Detail}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("anomalies of p1 = %q, want one per refund %q", got, want)
	}
	all, err := st.ListAnomalies(ctx, time.Time{}, 0)
	if err != nil || len(all) != 2 || all[0].Subject == "" || all[0].Subject == all[1].Subject {
		t.Fatalf("ListAnomalies = %+v, %v; want both with their subjects", all, err)
	}
	// A payment-wide anomaly (no subject) is one more row; its kinds are listed once.
	if err := st.RecordAnomaly(ctx, payment.Anomaly{Kind: r1.Kind, PaymentNo: "p1"}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM payment_anomalies WHERE payment_no = 'p1'"); n != 3 {
		t.Fatalf("rows = %d, want 3", n)
	}
	if kinds, err := st.AnomalyKinds(ctx, "p1"); err != nil || fmt.Sprint(kinds) != "[refund_succeeded_after_fail]" {
		t.Fatalf("AnomalyKinds(p1) = %v, %v; want the kind once", kinds, err)
	}
}

func TestListAnomalies(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i, kind := range []string{"paid_after_close", "amount_mismatch", "paid_after_close"} {
		if err := st.RecordAnomaly(ctx, payment.Anomaly{Kind: kind, TenantID: "t1", PaymentNo: fmt.Sprintf("p%d", i),
			TradeNo: fmt.Sprintf("T%d", i), Amount: payment.Amount(100 * (i + 1)), Detail: "d", CreatedAt: base.Add(time.Duration(i) * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	// Each recorded once, at its created_at (the store stamps last_seen_at with its clock).
	if _, err := db.ExecContext(ctx, "UPDATE payment_anomalies SET last_seen_at = created_at"); err != nil {
		t.Fatal(err)
	}
	all, err := st.ListAnomalies(ctx, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range all {
		got = append(got, fmt.Sprintf("%s/%s/%d", a.Kind, a.PaymentNo, a.Amount))
	}
	if fmt.Sprint(got) != "[paid_after_close/p2/300 amount_mismatch/p1/200 paid_after_close/p0/100]" {
		t.Fatalf("ListAnomalies = %v, want newest first", got)
	}
	if !all[0].CreatedAt.Equal(base.Add(2*time.Hour)) || all[0].TradeNo != "T2" || all[0].TenantID != "t1" {
		t.Fatalf("newest anomaly %+v", all[0])
	}
	recent, err := st.ListAnomalies(ctx, base.Add(time.Hour), 0)
	if err != nil || len(recent) != 2 {
		t.Fatalf("since +1h: %d anomalies (%v), want 2", len(recent), err)
	}
	if one, _ := st.ListAnomalies(ctx, time.Time{}, 1); len(one) != 1 || one[0].PaymentNo != "p2" {
		t.Fatalf("limit 1: %+v", one)
	}
}

// An anomaly is open until an operator resolves it with a note; the first resolution
// stands, recording it again (a retry, a statement re-run) leaves it resolved, and only
// anomalies resolved before the purge's time are purged, never an open one.
func TestResolveAndPurgeAnomalies(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	record := func(no, subject string) {
		t.Helper()
		if err := st.RecordAnomaly(ctx, payment.Anomaly{Kind: "refund_succeeded_after_fail", TenantID: "t1", PaymentNo: no, Subject: subject, Amount: 300}); err != nil {
			t.Fatal(err)
		}
	}
	record("p1", "r1")
	record("p1", "r2")
	record("p2", "")
	if _, _, err := st.ResolveAnomaly(ctx, "refund_succeeded_after_fail", "p1", "r1", "  "); payment.ErrorCode(err) != payment.EINVALID {
		t.Fatalf("resolve without a note: %v, want EINVALID", err)
	}
	if _, _, err := st.ResolveAnomaly(ctx, "refund_succeeded_after_fail", "p1", "r9", "x"); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("resolve an anomaly never recorded: %v, want ErrNotFound", err)
	}
	a, resolved, err := st.ResolveAnomaly(ctx, "refund_succeeded_after_fail", "p1", "r1", "refunded at Alipay; refunded_fen corrected by ops-123")
	if err != nil || !resolved || a.ResolvedAt.IsZero() || a.Subject != "r1" || a.Amount != 300 {
		t.Fatalf("resolve p1/r1: %+v, %v, %v", a, resolved, err)
	}
	again, resolved, err := st.ResolveAnomaly(ctx, "refund_succeeded_after_fail", "p1", "r1", "a second note")
	if err != nil || resolved || !again.ResolvedAt.Equal(a.ResolvedAt) || again.Resolution != a.Resolution {
		t.Fatalf("resolve p1/r1 again: %+v, %v, %v; want the first resolution to stand", again, resolved, err)
	}
	all, err := st.ListAnomalies(ctx, time.Time{}, 0)
	if err != nil || len(all) != 3 {
		t.Fatalf("list: %+v, %v", all, err)
	}
	for _, x := range all {
		if open := x.ResolvedAt.IsZero(); open != (x.Subject != "r1") {
			t.Fatalf("%s/%s: resolved at %v (%q); want only p1/r1 resolved", x.PaymentNo, x.Subject, x.ResolvedAt, x.Resolution)
		}
	}
	// Purged once its resolution is older than the horizon; open ones are kept.
	if n, err := st.PurgeResolvedAnomalies(ctx, a.ResolvedAt, 10); err != nil || n != 0 {
		t.Fatalf("purge before its resolution: %d, %v; want none", n, err)
	}
	// Recorded again after its resolution (the problem came back): it stays resolved with
	// its note, shows when it was seen again, and is not purged while it keeps being seen.
	time.Sleep(5 * time.Millisecond)
	record("p1", "r1")
	again, _, err = st.ResolveAnomaly(ctx, "refund_succeeded_after_fail", "p1", "r1", "x")
	if err != nil || !again.LastSeenAt.After(again.ResolvedAt) || again.Resolution != a.Resolution {
		t.Fatalf("recorded again after its resolution: %+v, %v; want it resolved, seen again after", again, err)
	}
	if n, err := st.PurgeResolvedAnomalies(ctx, again.LastSeenAt, 10); err != nil || n != 0 {
		t.Fatalf("purge before it was last seen: %d, %v; want none", n, err)
	}
	if _, err := db.ExecContext(ctx, "UPDATE payment_anomalies SET created_at = ? WHERE payment_no = 'p2'", time.Now().Add(-5*365*24*time.Hour).UTC()); err != nil {
		t.Fatal(err)
	}
	if n, err := st.PurgeResolvedAnomalies(ctx, time.Now().Add(time.Minute), 10); err != nil || n != 1 {
		t.Fatalf("purge after its resolution: %d, %v; want p1/r1", n, err)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM payment_anomalies WHERE resolved_at IS NULL"); n != 2 {
		t.Fatalf("%d open anomalies left, want 2 (an open one is kept whatever its age)", n)
	}
	if key := explainKeys(t, db, mysql.QPurgeResolvedAnomalies, time.Now(), time.Now(), 1000)["payment_anomalies"]; key != "idx_payment_anomalies_resolved" {
		t.Fatalf("the purge of resolved anomalies reads %q, want idx_payment_anomalies_resolved", key)
	}
}

func TestPing(t *testing.T) {
	st, _ := newStore(t)
	if err := st.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestPaidWithoutGrant(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	now := time.Now().UTC()
	tests := []struct {
		name    string
		paid    bool
		age     time.Duration // paid and updated this long ago
		created time.Duration // created this long ago, if not age
		benefit string        // already granted, if set
		want    bool
	}{
		{"paid, no grant, past the grace", true, 10 * time.Minute, 0, "", true},
		// The grant is the payment's, whatever its name: before, a payment granted under
		// an older PAYKIT_BENEFIT was listed, and granted again under the new one.
		{"paid, granted under another benefit name", true, 10 * time.Minute, 0, "coupon", false},
		{"paid and granted", true, 10 * time.Minute, 0, "vip_30d", false},
		{"paid within the grace", true, time.Minute, 0, "", false},
		{"paid before the look-back", true, 48 * time.Hour, 0, "", false},
		// By paid_at, not creation: before, a payment paid more than the look-back after
		// it was created was never repaired.
		{"created before the look-back, paid within it", true, 10 * time.Minute, 30 * 24 * time.Hour, "", true},
		{"pending", false, 10 * time.Minute, 0, "", false},
	}
	want := map[string]bool{}
	for i, tc := range tests {
		no := fmt.Sprintf("p%d", i)
		createPending(t, st, "t1", fmt.Sprintf("o%d", i), no)
		if tc.paid {
			if _, err := st.MarkPaid(ctx, no, "T"+no, time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
		at, created := now.Add(-tc.age), now.Add(-tc.age)
		if tc.created > 0 {
			created = now.Add(-tc.created)
		}
		if _, err := db.ExecContext(ctx, "UPDATE payments SET created_at = ?, updated_at = ?, paid_at = IF(paid_at IS NULL, NULL, ?) WHERE payment_no = ?",
			created, at, at, no); err != nil {
			t.Fatal(err)
		}
		if tc.benefit != "" {
			if _, err := st.GrantBenefit(ctx, payment.BenefitGrant{TenantID: "t1", PaymentNo: no, OrderID: "o", Benefit: tc.benefit}); err != nil {
				t.Fatal(err)
			}
		}
		if tc.want {
			want[no] = true
		}
	}
	got, err := st.PaidWithoutGrant(ctx, now.Add(-24*time.Hour), now.Add(-2*time.Minute), 10)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range got {
		seen[p.PaymentNo] = true
		if p.Status != payment.StatusPaid {
			t.Errorf("%s is %v, want paid", p.PaymentNo, p.Status)
		}
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if no := fmt.Sprintf("p%d", i); seen[no] != tc.want {
				t.Fatalf("%s listed = %v, want %v", no, seen[no], tc.want)
			}
		})
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d payments, want %d", len(got), len(want))
	}
	if one, err := st.PaidWithoutGrant(ctx, now.Add(-24*time.Hour), now.Add(-2*time.Minute), 1); err != nil || len(one) != 1 || one[0].PaymentNo != "p0" {
		t.Fatalf("limit 1: %+v %v, want the oldest paid (p0)", one, err)
	}
	// The repair reads the payments paid in its window by their paid_at index, and
	// probes the grants by the payment's key, once per payment.
	// Times as the store sends them, in microseconds: a parameter with nanoseconds is not
	// a DATETIME(6) to MariaDB, which then scans the whole index instead of a range.
	keys := explainKeys(t, db, mysql.QPaidWithoutGrant, now.Add(-24*time.Hour).Truncate(time.Microsecond), now.Add(-2*time.Minute).Truncate(time.Microsecond), 100)
	if keys["p"] != "idx_payments_paid_at" || keys["g"] != "uk_benefit_grants_payment" {
		t.Errorf("grant repair reads payments by %q and grants by %q, want idx_payments_paid_at and uk_benefit_grants_payment", keys["p"], keys["g"])
	}
}

// explainKeys returns the index the server (MariaDB, MySQL or TiDB) chooses for each
// table (by alias) of query.
func explainKeys(tb testing.TB, db *sql.DB, query string, args ...any) map[string]string {
	tb.Helper()
	out := map[string]string{}
	explainRows(tb, db, query, args, func(cols []string, vals []sql.NullString) {
		var table, key string
		for i, c := range cols {
			switch c {
			case "table":
				table = vals[i].String
			case "key":
				key = vals[i].String
			case "access object": // TiDB: "table:p, index:idx_payments_paid_at(paid_at)"
				table, key = tidbAccess(vals[i].String)
			}
		}
		if table != "" && (key != "" || out[table] == "") {
			out[table] = key
		}
	})
	return out
}

// explainRows hands each row of the EXPLAIN of query to each, with the column names.
func explainRows(tb testing.TB, db *sql.DB, query string, args []any, each func(cols []string, vals []sql.NullString)) {
	tb.Helper()
	rows, err := db.QueryContext(context.Background(), "EXPLAIN "+query, args...)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			tb.Fatal(err)
		}
		each(cols, vals)
	}
}

// tidbAccess reads the table (alias) and index of a TiDB plan row's access object. A row
// of an index lookup names the index, and the row of its table read only the table.
func tidbAccess(obj string) (table, index string) {
	for part := range strings.SplitSeq(obj, ",") {
		part = strings.TrimSpace(part)
		if v, ok := strings.CutPrefix(part, "table:"); ok {
			table = v
		}
		if v, ok := strings.CutPrefix(part, "index:"); ok {
			index, _, _ = strings.Cut(v, "(")
		}
	}
	return table, index
}

// TestGrantIsThePaymentsWhateverItsName: a payment granted under one benefit name is not
// granted again under another (PAYKIT_BENEFIT renamed between two sweeps). Before, the
// grant's key held the name, and a rename granted every recent paid payment twice.
func TestGrantIsThePaymentsWhateverItsName(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	p := createPending(t, st, "t1", "o1", "P1")
	if _, err := st.MarkPaid(ctx, p.PaymentNo, "T1", time.Time{}); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"order_fulfilment", "vip_30d", "order_fulfilment"} {
		created, err := st.GrantBenefit(ctx, payment.BenefitGrant{TenantID: "t1", PaymentNo: "P1", OrderID: "o1", Benefit: name})
		if err != nil || created != (i == 0) {
			t.Fatalf("grant %d (%s): created=%v err=%v, want created only the first time", i, name, created, err)
		}
	}
	if n := count(t, db, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = 'P1'"); n != 1 {
		t.Fatalf("%d grants for one payment, want 1", n)
	}
}
