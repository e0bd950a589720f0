package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
)

// TestScheduledAuditChecksWhatChangesAfterItsFirstWindow runs the audit on a schedule of
// its own (every 3 s, over one tenant): payments are audited clean, then changed by hand
// after their first window (an earlier payment of a paid order flipped to PAID, a
// refunded_fen above the amount, a payment.paid event marked dead) and each is reported
// by the next run. Then the schedule is paused for more than two runs while another
// payment is changed, and the first run after the resume audits every window the pause
// skipped, from the watermark.
func TestScheduledAuditChecksWhatChangesAfterItsFirstWindow(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	ctx := context.Background()

	// The order's first attempt, closed; its second, paid.
	first, _, err := env.store.CreatePendingPayment(ctx, payment.NewPayment{PaymentNo: "PA" + randHex(8), TenantID: tn.id,
		OrderID: "a1", Amount: 990, Currency: "CNY", Subject: "first attempt", ExpireAt: time.Now().Add(time.Minute),
		WorkflowID: payment.WorkflowID(tn.id, "a1"), AlipayAppID: appID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.store.ClosePayment(ctx, first.PaymentNo, "expired"); err != nil {
		t.Fatal(err)
	}
	paid := map[string]string{}
	for _, id := range []string{"a1", "a2", "a3", "a4"} {
		res := mustCheckout(t, st, tn, "", order(id, 990))
		openCashier(t, res.PayURL)
		simPay(t, res.PaymentNo)
		waitStatus(t, res.PaymentNo, payment.StatusPaid, 60*time.Second)
		paid[id] = res.PaymentNo
	}
	for _, no := range paid {
		waitFor(t, 30*time.Second, func() bool {
			return count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ? AND type = ? AND delivered = 1", no, payment.EventPaymentPaid) == 1
		})
	}

	scope := "paykit-audit-" + st.taskQueue + "/" + tn.id
	sc := env.tc.ScheduleClient()
	id := "audit-e2e-" + tn.id
	h, err := sc.Create(ctx, client.ScheduleOptions{
		ID:      id,
		Spec:    client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: 3 * time.Second}}},
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		Action: &client.ScheduleWorkflowAction{ID: id + "-run", Workflow: workflows.AuditWorkflowName, TaskQueue: st.taskQueue,
			Args: []any{workflows.AuditInput{Window: 3 * time.Second, Lag: time.Second, TenantID: tn.id,
				GrantSLA: time.Second, WebhookSLA: 2 * time.Second, PendingGrace: time.Second}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Delete(context.Background()) })
	watermark := func() time.Time {
		var at time.Time
		_ = env.db.QueryRowContext(ctx, "SELECT audited_until FROM audit_watermarks WHERE scope = ?", scope).Scan(&at)
		return at
	}
	anomalies := func() map[string]int {
		out := map[string]int{}
		rows, err := env.db.QueryContext(ctx, "SELECT kind, payment_no FROM payment_anomalies WHERE tenant_id = ? AND kind LIKE 'audit\\_%'", tn.id)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var kind, no string
			if err := rows.Scan(&kind, &no); err != nil {
				t.Fatal(err)
			}
			out[kind+" "+no]++
		}
		return out
	}

	// The first windows audit the payments as they are: clean.
	settled := time.Now()
	waitFor(t, 30*time.Second, func() bool { return watermark().After(settled) })
	if a := anomalies(); len(a) != 0 {
		t.Fatalf("audited as they are, the payments have findings: %v", a)
	}

	// Changed by hand, leaving updated_at and changed_at to the database.
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := env.db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec("UPDATE payments SET status = 1, trade_no = ?, paid_at = UTC_TIMESTAMP(6) WHERE payment_no = ?", "T"+first.PaymentNo, first.PaymentNo)
	exec("UPDATE payments SET refunded_fen = amount_fen + 100 WHERE payment_no = ?", paid["a2"])
	exec("UPDATE payment_events SET dead = 1, delivered = 0 WHERE payment_no = ? AND type = ?", paid["a3"], payment.EventPaymentPaid)
	wants := []string{
		"audit_double " + paid["a1"],
		"audit_refund_exceeds_paid " + paid["a2"],
		"audit_undelivered_event " + paid["a3"],
	}
	waitFor(t, 30*time.Second, func() bool {
		a := anomalies()
		for _, w := range wants {
			if a[w] == 0 {
				return false
			}
		}
		return true
	})

	// Paused for more than two runs; a payment changes meanwhile.
	if err := h.Pause(ctx, client.SchedulePauseOptions{Note: "e2e"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // a run started before the pause may still be finishing
	paused := watermark()
	exec("UPDATE payments SET refunded_fen = amount_fen + 1 WHERE payment_no = ?", paid["a4"])
	time.Sleep(7 * time.Second)
	if now := watermark(); !now.Equal(paused) {
		t.Fatalf("the watermark moved from %s to %s while the schedule was paused", paused, now)
	}
	if a := anomalies(); a["audit_refund_exceeds_paid "+paid["a4"]] != 0 {
		t.Fatal("a change made during the pause was audited before the resume")
	}
	resumed := time.Now()
	if err := h.Unpause(ctx, client.ScheduleUnpauseOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() bool { return anomalies()["audit_refund_exceeds_paid "+paid["a4"]] == 1 })
	// The finding is recorded before its window's end moves the watermark.
	waitFor(t, 30*time.Second, func() bool { return !watermark().Before(resumed.Add(-time.Second)) })
	if at := watermark(); at.Sub(paused) < 7*time.Second {
		t.Fatalf("after the resume the watermark is at %s: %s past where the pause left it (%s); want it to have caught up",
			at, at.Sub(paused), paused)
	}
	// The first run after the resume audited the skipped windows one after another.
	desc, err := h.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var caughtUp activities.AuditResult
	for _, act := range desc.Info.RecentActions {
		if act.ActualTime.Before(resumed) || act.StartWorkflowResult == nil {
			continue
		}
		run := env.tc.GetWorkflow(ctx, act.StartWorkflowResult.WorkflowID, act.StartWorkflowResult.FirstExecutionRunID)
		if err := run.Get(ctx, &caughtUp); err != nil {
			t.Fatal(err)
		}
		break
	}
	if caughtUp.Windows < 3 {
		t.Fatalf("the first run after the resume audited %d windows (%+v), want the ones the pause skipped (at least 3)", caughtUp.Windows, caughtUp)
	}
	a := anomalies()
	for k, n := range a {
		if n != 1 {
			t.Errorf("anomaly %s recorded %d times", k, n)
		}
	}
	t.Logf("findings %v; %d windows caught up after the pause, watermark %s", a, caughtUp.Windows, fmt.Sprint(watermark().Format(time.RFC3339Nano)))
}
