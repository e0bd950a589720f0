package mysql_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/payment"
)

// The payments from before payments named their app are written with the deployment's
// first app by as many processes as start at once: each row exactly once, by one of
// them. Once a walk finished, no start walks again, also after the apps recorded before
// it are forgotten; before, the first app cannot be forgotten, which would leave a later
// one to be written on them.
func TestDefaultAppBackfillRunsToTheEndOnce(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	if app, ok, err := st.DefaultAppToBackfill(ctx); err != nil || ok {
		t.Fatalf("with no app recorded: %q, %v, %v; want nothing to backfill", app, ok, err)
	}
	const rows = 6 // three payments, three refunds
	for i := range rows / 2 {
		no := fmt.Sprintf("PB%d", i)
		createPending(t, st, "t1", "o"+no, no)
		if _, err := st.MarkPaid(ctx, no, "T"+no, time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.CreateRefund(ctx, payment.NewRefund{RefundNo: "R" + no, TenantID: "t1", PaymentNo: no, Amount: 10}); err != nil {
			t.Fatal(err)
		}
	}
	for _, app := range []string{"2021first", "2021second"} {
		if _, err := st.KeepDeploymentApp(ctx, app, "2088", ""); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // created_at orders the apps
	}
	if app, ok, err := st.DefaultAppToBackfill(ctx); err != nil || !ok || app != "2021first" {
		t.Fatalf("to backfill: %q, %v, %v; want the first app recorded", app, ok, err)
	}
	if _, err := st.ForgetDeploymentApp(ctx, "2021first"); err == nil {
		t.Fatal("the first app was forgotten before its older payments were written with it")
	}

	const procs = 4
	written := make([]int64, procs)
	errs := make([]error, procs)
	testenv.Parallel(procs, func(i int) {
		written[i], errs[i] = st.BackfillDefaultApp(ctx, "2021first", 1)
	})
	var total int64
	for i := range procs {
		if errs[i] != nil {
			t.Fatalf("process %d: %v", i, errs[i])
		}
		total += written[i]
	}
	if total != rows {
		t.Fatalf("%d rows written by %d processes, want %d: each exactly once", total, procs, rows)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM payments WHERE alipay_app_id <> '2021first'`) +
		count(t, db, `SELECT COUNT(*) FROM refunds WHERE alipay_app_id <> '2021first'`); n != 0 {
		t.Fatalf("%d rows not on the first app", n)
	}
	if app, ok, err := st.DefaultAppToBackfill(ctx); err != nil || ok {
		t.Fatalf("after the walk: %q, %v, %v; want nothing to backfill", app, ok, err)
	}

	// An app recorded afterwards carries the walk's end, so forgetting those recorded
	// before it does not make a later start walk again with it.
	if _, err := st.KeepDeploymentApp(ctx, "2021third", "2088", ""); err != nil {
		t.Fatal(err)
	}
	for _, app := range []string{"2021first", "2021second"} {
		if ok, err := st.ForgetDeploymentApp(ctx, app); err != nil || !ok {
			t.Fatalf("forget %s: %v, %v", app, ok, err)
		}
	}
	if app, ok, err := st.DefaultAppToBackfill(ctx); err != nil || ok {
		t.Fatalf("after the first apps are forgotten: %q, %v, %v; want nothing to backfill", app, ok, err)
	}
}
