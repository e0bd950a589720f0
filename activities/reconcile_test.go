package activities_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/payment"
)

// The scheduled reconciler's run queries each due pending payment once at Alipay, through
// the gateway of the app it was opened on, and moves it to its next query on its own
// step; a payment that is not due, or not pending, is not queried; a second run at once
// finds nothing due. A payment Alipay says is paid is counted paid (this worker has no
// Temporal client to wake its run with: the e2e tests see the wake).
func TestReconcileDueQueriesEachDuePaymentOnce(t *testing.T) {
	f := newFixture(t)
	step := 30 * time.Second
	var nos []string
	for i, method := range []payment.Method{payment.MethodQR, payment.MethodQR, payment.MethodPage, payment.MethodPage} {
		in := f.createInput("due-" + string(rune('a'+i)))
		in.Method, in.QueryInterval, in.ExpireAt = method, step, time.Now().Add(15*time.Minute)
		var created activities.CreatePaymentResult
		if err := f.local(t, &created, f.acts.CreatePayment, in); err != nil {
			t.Fatal(err)
		}
		if !created.QueryScheduled {
			t.Fatalf("%s created without its first query", in.PaymentNo)
		}
		if method == payment.MethodQR {
			open := activities.OpenTradeInput{PaymentNo: in.PaymentNo, Subject: in.Subject, Amount: in.Amount, ExpireAt: in.ExpireAt, Method: method}
			if err := f.local(t, nil, f.acts.OpenTrade, open); err != nil {
				t.Fatal(err)
			}
		}
		nos = append(nos, in.PaymentNo)
	}
	if _, err := f.sim.Pay(testAppID, nos[0], "buyer"); err != nil {
		t.Fatal(err)
	}
	// The first three are due; the last is not yet.
	if _, err := f.db.Exec("UPDATE payments SET next_query_at = ? WHERE payment_no IN (?, ?, ?)", time.Now().UTC().Add(-time.Second), nos[0], nos[1], nos[2]); err != nil {
		t.Fatal(err)
	}
	var res activities.ReconcileDueResult
	in := activities.ReconcileDueInput{Interval: time.Hour, Page: 2, Parallel: 4, Budget: time.Minute}
	if err := f.remote(t, &res, f.acts.ReconcileDue, in); err != nil {
		t.Fatal(err)
	}
	if res.Queried != 3 || res.Paid != 1 || res.Failed != 0 || res.Behind {
		t.Fatalf("result %+v, want 3 queried over two pages, 1 paid", res)
	}
	for i, no := range nos {
		want := map[bool]int{true: 1, false: 0}[i < 3]
		if q := f.sim.Calls(no)["alipay.trade.query"]; q != want {
			t.Errorf("%s: %d queries at Alipay, want %d", no, q, want)
		}
		var queries int
		var next *time.Time
		if err := f.db.QueryRow("SELECT queries, next_query_at FROM payments WHERE payment_no = ?", no).Scan(&queries, &next); err != nil {
			t.Fatal(err)
		}
		if queries != want {
			t.Errorf("%s: queries = %d, want %d", no, queries, want)
		}
		// The next is the payment's own second step (two steps of 30 s, ±20%), not the
		// run's one-hour fallback.
		if i < 3 && (next == nil || time.Until(*next) < 40*time.Second || time.Until(*next) > 80*time.Second) {
			t.Errorf("%s: next query at %v, want about a minute from now", no, next)
		}
	}
	res = activities.ReconcileDueResult{}
	if err := f.remote(t, &res, f.acts.ReconcileDue, in); err != nil {
		t.Fatal(err)
	}
	if res.Queried != 0 {
		t.Fatalf("second run at once: %+v, want nothing due", res)
	}
}

// failingClaims is a query schedule whose claims cannot be written (a database that reads
// but refuses writes).
type failingClaims struct{ payment.QuerySchedule }

func (failingClaims) QueryMade(context.Context, payment.DueQuery, time.Time) (bool, error) {
	return false, errors.New("mysql: --read-only")
}

// A reconciler that cannot write its claims makes no query at all and fails the run: the
// payments stay due for the next, and Alipay is not asked the same questions in a loop.
func TestReconcileDueMakesNoQueryItCannotClaim(t *testing.T) {
	f := newFixture(t)
	in := f.createInput("claim")
	in.Method, in.QueryInterval = payment.MethodPage, 30*time.Second
	if err := f.local(t, nil, f.acts.CreatePayment, in); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Exec("UPDATE payments SET next_query_at = ? WHERE payment_no = ?", time.Now().UTC().Add(-time.Second), in.PaymentNo); err != nil {
		t.Fatal(err)
	}
	f.acts.Store.QuerySchedule = failingClaims{f.acts.Store.QuerySchedule}
	err := f.remote(t, nil, f.acts.ReconcileDue, activities.ReconcileDueInput{Interval: time.Minute, Page: 10, Parallel: 2, Budget: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("run with claims refused: %v, want the claim's error", err)
	}
	if q := f.sim.Calls(in.PaymentNo)["alipay.trade.query"]; q != 0 {
		t.Fatalf("%d queries made without a claim", q)
	}
}
