package mysql_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
)

// A payment created with a query interval has its first query at the schedule's time and
// is due then; one created without (a run that keeps its own timer) never is. Each query
// made moves it on once, however many reconcilers took it: the compare-and-set on the due
// time they read lets one count it. A payment that is no longer pending is never due.
func TestQueryScheduleOfPendingPayments(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	interval := time.Minute
	before := time.Now()
	scheduled := newPayment("t1", "o1", "P20261204query000000000001")
	scheduled.QueryInterval = interval
	p, _, err := st.CreatePendingPayment(ctx, scheduled)
	if err != nil {
		t.Fatal(err)
	}
	if !p.QueryScheduled {
		t.Fatal("created with a query interval: QueryScheduled = false")
	}
	if got, err := st.GetPayment(ctx, p.PaymentNo); err != nil || !got.QueryScheduled {
		t.Fatalf("read back: QueryScheduled = %v, %v", got.QueryScheduled, err)
	}
	timer := createPending(t, st, "t1", "o2", "P20261204query000000000002")
	if timer.QueryScheduled {
		t.Fatal("created without a query interval: QueryScheduled = true")
	}
	closed := newPayment("t1", "o3", "P20261204query000000000003")
	closed.QueryInterval = interval
	if _, _, err := st.CreatePendingPayment(ctx, closed); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ClosePayment(ctx, closed.PaymentNo, "expired"); err != nil {
		t.Fatal(err)
	}

	if due, _, err := st.DueQueries(ctx, before, payment.Cursor{}, 10); err != nil || len(due) != 0 {
		t.Fatalf("due at creation: %v, %v; want none", due, err)
	}
	later := time.Now().Add(2 * interval)
	due, _, err := st.DueQueries(ctx, later, payment.Cursor{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || due[0].PaymentNo != scheduled.PaymentNo || due[0].Queries != 0 || due[0].Step != interval ||
		due[0].TenantID != "t1" || due[0].Amount != scheduled.Amount || due[0].WorkflowID != scheduled.WorkflowID {
		t.Fatalf("due: %+v; want only %s, with no query made", due, scheduled.PaymentNo)
	}
	first := due[0].NextQueryAt
	lo, hi := before.Add(interval*8/10-time.Second), time.Now().Add(interval*12/10+time.Second)
	if first.Before(lo) || first.After(hi) {
		t.Fatalf("first query at %v, want within ±20%% of a minute after creation", first)
	}

	var updatedBefore time.Time
	if err := db.QueryRow("SELECT updated_at FROM payments WHERE payment_no = ?", scheduled.PaymentNo).Scan(&updatedBefore); err != nil {
		t.Fatal(err)
	}
	next := later.Add(2 * interval)
	var wins int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			won, err := st.QueryMade(ctx, due[0], next)
			if err != nil {
				t.Error(err)
			}
			if won {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d reconcilers counted the same query, want 1", wins)
	}
	// A query changes nothing of the payment's own: its updated_at stays.
	var updatedAfter time.Time
	if err := db.QueryRow("SELECT updated_at FROM payments WHERE payment_no = ?", scheduled.PaymentNo).Scan(&updatedAfter); err != nil {
		t.Fatal(err)
	}
	if !updatedAfter.Equal(updatedBefore) {
		t.Fatalf("updated_at moved from %v to %v on a query", updatedBefore, updatedAfter)
	}
	var queries int
	if err := db.QueryRow("SELECT queries FROM payments WHERE payment_no = ?", scheduled.PaymentNo).Scan(&queries); err != nil || queries != 1 {
		t.Fatalf("queries = %d, %v; want 1", queries, err)
	}
	if due, _, _ := st.DueQueries(ctx, later, payment.Cursor{}, 10); len(due) != 0 {
		t.Fatalf("due after its query: %+v", due)
	}
	due, _, _ = st.DueQueries(ctx, next, payment.Cursor{}, 10)
	if len(due) != 1 || due[0].Queries != 1 {
		t.Fatalf("due at its next query: %+v", due)
	}
	// The last query leaves none due, and the payment still reads as scheduled.
	if won, err := st.QueryMade(ctx, due[0], time.Time{}); !won || err != nil {
		t.Fatalf("last query: %v, %v", won, err)
	}
	if due, _, _ := st.DueQueries(ctx, next.Add(time.Hour), payment.Cursor{}, 10); len(due) != 0 {
		t.Fatalf("due after the last query: %+v", due)
	}
	if got, _ := st.GetPayment(ctx, p.PaymentNo); !got.QueryScheduled {
		t.Fatal("after its last query: QueryScheduled = false")
	}
	// Past its expiry a payment is not due (the close path asks), whatever its schedule.
	if _, err := db.Exec("UPDATE payments SET next_query_at = ?, expire_at = ? WHERE payment_no = ?",
		time.Now().UTC().Add(-time.Minute), time.Now().UTC().Add(-time.Second), scheduled.PaymentNo); err != nil {
		t.Fatal(err)
	}
	if due, _, _ := st.DueQueries(ctx, time.Now(), payment.Cursor{}, 10); len(due) != 0 {
		t.Fatalf("due past its expiry: %+v", due)
	}
	// Paid: no longer due, and the compare-and-set refuses a reconciler that read it before.
	if _, err := st.MarkPaid(ctx, scheduled.PaymentNo, "T1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if won, err := st.QueryMade(ctx, due[0], next); won || err != nil {
		t.Fatalf("query made of a paid payment: %v, %v; want refused", won, err)
	}
}

// A payment whose TTL leaves no query before the close path's at expiry is created with
// none: nothing is ever due for it.
func TestQueryScheduleLeavesAShortPaymentToItsClosePath(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	np := newPayment("t1", "o1", "P20261204short00000000001")
	np.QueryInterval, np.ExpireAt = time.Minute, time.Now().Add(90*time.Second)
	p, _, err := st.CreatePendingPayment(ctx, np)
	if err != nil {
		t.Fatal(err)
	}
	if p.QueryScheduled {
		t.Fatal("a 90 s payment on a one-minute step has a first query; the close path asks at expiry")
	}
	if due, _, _ := st.DueQueries(ctx, time.Now().Add(time.Hour), payment.Cursor{}, 10); len(due) != 0 {
		t.Fatalf("due: %+v", due)
	}
}

// The due payments are read a page at a time in (next_query_at, id) order, each page past
// the last one read, ties included, so that a payment that stays due (its claim cannot be
// written) is not read again in the same walk; the page that ends the walk hands back the
// zero cursor. A claim counts a query at most 32,767 times (payments.queries is a
// SMALLINT) and still moves the payment to its next query.
func TestDueQueriesPageOnPastACursor(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	var nos []string
	for _, no := range []string{"P20261207cursor00000000001", "P20261207cursor00000000002", "P20261207cursor00000000003"} {
		np := newPayment("t1", no, no)
		np.QueryInterval = time.Minute
		if _, _, err := st.CreatePendingPayment(ctx, np); err != nil {
			t.Fatal(err)
		}
		nos = append(nos, no)
	}
	at := time.Now().UTC().Add(-time.Minute).Truncate(time.Millisecond)
	if _, err := db.Exec("UPDATE payments SET next_query_at = ?", at); err != nil {
		t.Fatal(err)
	}
	var got []string
	var after payment.Cursor
	for page := 1; ; page++ {
		due, next, err := st.DueQueries(ctx, time.Now(), after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range due {
			got = append(got, q.PaymentNo)
		}
		if next.IsZero() {
			break
		}
		if page > len(nos) {
			t.Fatalf("walk did not end: read %v", got)
		}
		after = next
	}
	if fmt.Sprint(got) != fmt.Sprint(nos) {
		t.Fatalf("walk read %v, want each of %v once, in order", got, nos)
	}

	if _, err := db.Exec("UPDATE payments SET queries = 32767 WHERE payment_no = ?", nos[0]); err != nil {
		t.Fatal(err)
	}
	due, _, err := st.DueQueries(ctx, time.Now(), payment.Cursor{}, 1)
	if err != nil || len(due) != 1 || due[0].PaymentNo != nos[0] {
		t.Fatalf("head: %+v, %v", due, err)
	}
	if won, err := st.QueryMade(ctx, due[0], time.Now().Add(time.Minute)); !won || err != nil {
		t.Fatalf("claim of a payment queried 32,767 times: %v, %v; want it written", won, err)
	}
	var queries int
	if err := db.QueryRow("SELECT queries FROM payments WHERE payment_no = ?", nos[0]).Scan(&queries); err != nil || queries != 32767 {
		t.Fatalf("queries = %d, %v; want 32767", queries, err)
	}
}

// Two stacks (Temporal namespace and task queue) on one database each reconcile and
// re-drive only the payments whose runs are theirs: a store given a run scope writes it on
// every payment it creates, and its due queries and pending walk read that scope's
// payments and those created before payments had one (an empty scope), never another's. Before,
// each stack's reconciler claimed and queried the other's payments, and its sweeper
// started runs for them on its own task queue.
func TestStacksSharingADatabaseReconcileTheirOwnPayments(t *testing.T) {
	a, db := newStore(t)
	b := mysql.NewStore(db)
	t.Cleanup(func() { _ = b.Close() })
	a.SetRunScope(payment.RunScope("default", "payments-a"))
	b.SetRunScope(payment.RunScope("default", "payments-b"))
	legacy := mysql.NewStore(db) // a build from before run scopes
	t.Cleanup(func() { _ = legacy.Close() })
	ctx := context.Background()
	before := time.Now()
	for _, c := range []struct {
		st *mysql.Store
		no string
	}{{a, "P20261207scope00000000000A"}, {b, "P20261207scope00000000000B"}, {legacy, "P20261207scope00000000000L"}} {
		np := newPayment("t1", "o-"+c.no, c.no)
		np.QueryInterval = time.Minute
		if _, _, err := c.st.CreatePendingPayment(ctx, np); err != nil {
			t.Fatal(err)
		}
	}
	later := time.Now().Add(2 * time.Minute)
	for name, c := range map[string]struct {
		st   *mysql.Store
		want []string
	}{
		"a": {a, []string{"P20261207scope00000000000A", "P20261207scope00000000000L"}},
		"b": {b, []string{"P20261207scope00000000000B", "P20261207scope00000000000L"}},
	} {
		due, _, err := c.st.DueQueries(ctx, later, payment.Cursor{}, 10)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, q := range due {
			got = append(got, q.PaymentNo)
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("stack %s: due %v, want %v", name, got, c.want)
		}
		pending, _, err := c.st.PendingPaymentsBefore(ctx, later, payment.Cursor{}, 10)
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, p := range pending {
			got = append(got, p.PaymentNo)
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("stack %s: pending walk %v, want %v", name, got, c.want)
		}
	}
	if n := count(t, db, "SELECT COUNT(*) FROM payments WHERE run_scope = 'default/payments-a' AND created_at >= ?", before.Add(-time.Second).UTC()); n != 1 {
		t.Errorf("%d payments written with stack a's scope, want 1", n)
	}
}
