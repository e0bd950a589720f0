package mysql_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/migrations"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
)

func TestTenantEventFeed(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	a1 := paidEvent(t, st, "t1", "p1")
	paidEvent(t, st, "t2", "p2")
	a3 := paidEvent(t, st, "t1", "p3")
	page, err := st.ListTenantEvents(ctx, "t1", 0, 1)
	if err != nil || len(page) != 1 || page[0].EventID != a1.EventID || page[0].Seq == 0 {
		t.Fatalf("page 1: %+v %v", page, err)
	}
	page, err = st.ListTenantEvents(ctx, "t1", page[0].Seq, 10)
	if err != nil || len(page) != 1 || page[0].EventID != a3.EventID {
		t.Fatalf("page 2: %+v %v", page, err)
	}
	if _, err := st.GetTenantEvent(ctx, "t2", a1.EventID); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("another tenant's event: %v", err)
	}
}

// A redelivery on request and the sweeper never hold one event at once, whoever comes
// first, and concurrent redeliveries of one event hold it one at a time.
func TestClaimEventForRedelivery(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	now := time.Now()
	lease := now.Add(time.Minute)
	retry := payment.EventRetry{Base: time.Minute, Max: time.Hour, MaxAttempts: 10}

	t.Run("sweeper first", func(t *testing.T) {
		ev := paidEvent(t, st, "t1", "s1")
		if ok, err := st.ClaimEvent(ctx, ev, lease); !ok || err != nil {
			t.Fatalf("sweeper claim: %v %v", ok, err)
		}
		if ok, err := st.ClaimEventForRedelivery(ctx, "t1", ev.EventID, now, lease); ok || err != nil {
			t.Fatalf("redelivery while the sweeper holds it: %v %v, want false", ok, err)
		}
		// The sweeper's attempt is recorded: the hold ends and a redelivery may go.
		if _, _, err := st.MarkEventAttempt(ctx, ev.EventID, "HTTP 500", now, retry); err != nil {
			t.Fatal(err)
		}
		if ok, err := st.ClaimEventForRedelivery(ctx, "t1", ev.EventID, now, lease); !ok || err != nil {
			t.Fatalf("redelivery after the sweeper's attempt: %v %v", ok, err)
		}
	})
	t.Run("redelivery first", func(t *testing.T) {
		ev := paidEvent(t, st, "t1", "r1")
		read := ev // as a sweeper read it, due
		if ok, err := st.ClaimEventForRedelivery(ctx, "t1", ev.EventID, now, lease); !ok || err != nil {
			t.Fatalf("redelivery claim: %v %v", ok, err)
		}
		if ok, err := st.ClaimEvent(ctx, read, lease); ok || err != nil {
			t.Fatalf("sweeper claim while a redelivery holds it: %v %v, want false", ok, err)
		}
		if evs, _ := st.DueEvents(ctx, now, now.Add(time.Second), 10, 10); len(evs) != 0 {
			t.Fatalf("held event still due for the sweeper: %+v", evs)
		}
	})
	t.Run("concurrent redeliveries, delivered event", func(t *testing.T) {
		ev := paidEvent(t, st, "t1", "c1")
		if err := st.MarkEventDelivered(ctx, ev.EventID); err != nil {
			t.Fatal(err)
		}
		const n = 10
		var won atomic.Int32
		testenv.Parallel(n, func(i int) {
			ok, err := st.ClaimEventForRedelivery(ctx, "t1", ev.EventID, now, lease)
			if err != nil {
				t.Errorf("claim %d: %v", i, err)
			}
			if ok {
				won.Add(1)
			}
		})
		if won.Load() != 1 {
			t.Fatalf("%d of %d claims won, want 1", won.Load(), n)
		}
		// Delivering a delivered event records nothing, so the release ends the hold.
		if err := st.ReleaseEventClaim(ctx, ev.EventID, lease); err != nil {
			t.Fatal(err)
		}
		if ok, err := st.ClaimEventForRedelivery(ctx, "t1", ev.EventID, now, lease); !ok || err != nil {
			t.Fatalf("claim after release: %v %v", ok, err)
		}
		if ok, _ := st.ClaimEventForRedelivery(ctx, "t2", ev.EventID, lease.Add(time.Hour), lease.Add(2*time.Hour)); ok {
			t.Fatal("another tenant claimed the event")
		}
	})
}

// TestFeedNeverPassesAnEventNotYetCommitted: payment A's transaction writes its event
// and has not committed when payment B's commits. A poller must not be handed B (and
// move its cursor past A's id) before A is visible: A would then never be listed. Each
// event is listed exactly once however the two commit.
func TestFeedNeverPassesAnEventNotYetCommitted(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	a := createPending(t, st, "t1", "oa", "PA")
	b := createPending(t, st, "t1", "ob", "PB")
	held, release := make(chan struct{}), make(chan struct{})
	mysql.SetAfterEventInsert(st, func(no string) {
		if no == a.PaymentNo {
			close(held)
			<-release
		}
	})
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := st.MarkPaid(ctx, a.PaymentNo, "TA", time.Time{}); err != nil {
			t.Errorf("mark A paid: %v", err)
		}
	})
	<-held // A's event is written, its transaction open
	wg.Go(func() {
		if _, err := st.MarkPaid(ctx, b.PaymentNo, "TB", time.Time{}); err != nil {
			t.Errorf("mark B paid: %v", err)
		}
	})
	listed := map[string]int{}
	var cursor int64
	poll := func() {
		evs, err := st.ListTenantEvents(ctx, "t1", cursor, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			listed[ev.PaymentNo]++
			cursor = ev.Seq
		}
	}
	time.Sleep(300 * time.Millisecond) // B has had time to commit, were it free to
	poll()
	close(release)
	wg.Wait()
	poll()
	if listed["PA"] != 1 || listed["PB"] != 1 {
		t.Fatalf("events listed to the poller: %v, want PA and PB once each", listed)
	}
}

// TestFeedUnderConcurrentPayments: 50 payments of one tenant are marked paid at once
// while a poller follows the feed in a tight loop; it sees every event exactly once.
func TestFeedUnderConcurrentPayments(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	const n = 50
	for i := range n {
		createPending(t, st, "t1", fmt.Sprintf("o%d", i), fmt.Sprintf("P%03d", i))
	}
	done := make(chan struct{})
	listed := map[string]int{}
	var pollErr error
	var pw sync.WaitGroup
	pw.Go(func() {
		var cursor int64
		for {
			// Stop at the first empty page read after every payment committed: a page
			// read while the last ones were committing may miss them and be empty.
			finished := false
			select {
			case <-done:
				finished = true
			default:
			}
			evs, err := st.ListTenantEvents(ctx, "t1", cursor, 7)
			if err != nil {
				pollErr = err
				return
			}
			for _, ev := range evs {
				listed[ev.PaymentNo]++
				cursor = ev.Seq
			}
			if len(evs) == 0 && finished {
				return
			}
		}
	})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := st.MarkPaid(ctx, fmt.Sprintf("P%03d", i), fmt.Sprintf("T%03d", i), time.Time{}); err != nil {
				t.Errorf("mark paid %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	close(done)
	pw.Wait()
	if pollErr != nil {
		t.Fatal(pollErr)
	}
	for i := range n {
		if no := fmt.Sprintf("P%03d", i); listed[no] != 1 {
			t.Errorf("%s listed %d times, want once", no, listed[no])
		}
	}
}

// TestFeedOrderDoesNotDependOnIDs plays two SQL servers of one distributed database (TiDB
// gives each its own batch of AUTO_INCREMENT ids): an event written through the server
// whose batch is higher commits first and is listed; the next event of the tenant comes
// through the other server, with a lower id. The poller must still list it. Before, the
// feed paged by id and its cursor, past the higher id, never listed the later event.
func TestFeedOrderDoesNotDependOnIDs(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	ids := []int64{2_000_001, 1_000_001, 2_000_002}
	mysql.SetEventIDs(st, func() int64 {
		id := ids[0]
		ids = ids[1:]
		return id
	})
	var cursor int64
	var listed []string
	poll := func() {
		evs, err := st.ListTenantEvents(ctx, "t1", cursor, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			listed = append(listed, ev.PaymentNo)
			cursor = ev.Seq
		}
	}
	paidEvent(t, st, "t1", "high") // through the server of ids 2,000,000…
	poll()
	paidEvent(t, st, "t1", "low") // then through the server of ids 1,000,000…
	poll()
	paidEvent(t, st, "t1", "highAgain")
	poll()
	if fmt.Sprint(listed) != "[high low highAgain]" {
		t.Fatalf("the poller listed %v, want [high low highAgain]", listed)
	}
	// Positions are the tenant's own count, dense and in commit order.
	evs, err := st.ListTenantEvents(ctx, "t1", 0, 100)
	if err != nil || len(evs) != 3 || evs[0].Seq != 1 || evs[1].Seq != 2 || evs[2].Seq != 3 {
		t.Fatalf("feed: %+v %v, want positions 1, 2, 3", evs, err)
	}
	if got, err := st.GetTenantEvent(ctx, "t1", evs[1].EventID); err != nil || got.Seq != 2 {
		t.Fatalf("event by id: %+v %v, want position 2", got, err)
	}
}

// TestFeedCursorsSurviveTheMigrationToFeedPositions: events written before migration 0033
// keep the positions a merchant's cursor was handed (their ids) and their change stamps,
// and the tenant's next event comes after them.
func TestFeedCursorsSurviveTheMigrationToFeedPositions(t *testing.T) {
	db, _ := testenv.EmptyMySQL(t)
	ctx := context.Background()
	if err := migrations.UpTo(ctx, db, 32, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	// What the store wrote before: the lock's count, and an event paged by its id.
	for _, q := range []string{
		`INSERT INTO tenant_feed_locks (tenant_id, events) VALUES ('t1', 2), ('t2', 1)`,
		`INSERT INTO payment_events (id, event_id, tenant_id, payment_no, type, payload, created_at, changed_at) VALUES
			(40, 'e40', 't1', 'P40', 'payment.paid', '{}', NOW(6), '2026-01-02 03:04:05.000006'),
			(41, 'e41', 't2', 'P41', 'payment.paid', '{}', NOW(6), '2026-01-02 03:04:05.000006'),
			(57, 'e57', 't1', 'P57', 'payment.paid', '{}', NOW(6), '2026-01-02 03:04:05.000006')`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatal(err)
	}
	// The backfill keeps the audit's change stamp: a new one would send the next audit
	// window over every payment that has an event.
	var restamped int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM payment_events
		WHERE changed_at <> '2026-01-02 03:04:05.000006'`).Scan(&restamped); err != nil || restamped != 0 {
		t.Fatalf("%d events given a new changed_at by the backfill (%v), want none", restamped, err)
	}
	st := mysql.NewStore(db)
	t.Cleanup(func() { _ = st.Close() })
	evs, err := st.ListTenantEvents(ctx, "t1", 40, 100)
	if err != nil || len(evs) != 1 || evs[0].EventID != "e57" || evs[0].Seq != 57 {
		t.Fatalf("after a cursor of 40: %+v %v, want e57 at 57", evs, err)
	}
	next := paidEvent(t, st, "t1", "Pnext")
	evs, err = st.ListTenantEvents(ctx, "t1", 57, 100)
	if err != nil || len(evs) != 1 || evs[0].EventID != next.EventID || evs[0].Seq != 58 {
		t.Fatalf("after a cursor of 57: %+v %v, want the new event at 58", evs, err)
	}
}

// The feed's horizon is the highest position of the tenant's events the purge deleted: a
// cursor below it has had events after it deleted. It never moves back, an undelivered
// event kept below it changes nothing, and another tenant's purge is not this tenant's.
func TestFeedHorizonIsTheLastPurgedPosition(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	horizon := func(tenantID string) int64 {
		t.Helper()
		h, err := st.FeedHorizon(ctx, tenantID)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	purge := func() {
		t.Helper()
		for {
			n, err := st.PurgeDeliveredEvents(ctx, time.Now().Add(-90*24*time.Hour), 2)
			if err != nil {
				t.Fatal(err)
			}
			if n < 2 {
				return
			}
		}
	}
	var evs []payment.Event
	for i := range 5 {
		ev, err := st.GetTenantEvent(ctx, "t1", paidEvent(t, st, "t1", fmt.Sprintf("P%d", i+1)).EventID)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	other := paidEvent(t, st, "t2", "Q1")
	// P2's event stays undelivered: old and still owed, it is kept.
	for _, ev := range []payment.Event{evs[0], evs[2], evs[3], evs[4], other} {
		if err := st.MarkEventDelivered(ctx, ev.EventID); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-100 * 24 * time.Hour).UTC()
	if _, err := db.ExecContext(ctx, "UPDATE payment_events SET created_at = ? WHERE event_id IN (?, ?, ?, ?)",
		old, evs[0].EventID, evs[1].EventID, evs[2].EventID, evs[3].EventID); err != nil {
		t.Fatal(err)
	}
	if h := horizon("t1"); h != 0 {
		t.Fatalf("horizon %d before any purge, want 0", h)
	}
	purge()
	// P1, P3 and P4 are purged; P2 (owed) and P5 (recent) are kept.
	if h := horizon("t1"); h != evs[3].Seq {
		t.Fatalf("horizon %d, want %d: the position of P4, the last purged", h, evs[3].Seq)
	}
	if h := horizon("t2"); h != 0 {
		t.Fatalf("t2's horizon %d, want 0: none of its events was purged", h)
	}
	left, err := st.ListTenantEvents(ctx, "t1", 0, 100)
	if err != nil || len(left) != 2 || left[0].EventID != evs[1].EventID || left[1].EventID != evs[4].EventID {
		t.Fatalf("events left: %+v %v, want P2's and P5's", left, err)
	}
	// P2's event, delivered late and purged, is below the horizon, which stays.
	if err := st.MarkEventDelivered(ctx, evs[1].EventID); err != nil {
		t.Fatal(err)
	}
	purge()
	if h := horizon("t1"); h != evs[3].Seq {
		t.Fatalf("horizon %d after P2's purge, want %d", h, evs[3].Seq)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM payment_events WHERE tenant_id = 't1'"); n != 1 {
		t.Fatalf("%d of t1's events left, want P5's", n)
	}
}
