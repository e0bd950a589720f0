package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
)

// TestAbandonedCheckoutsCostTheirQueriesOnly: payments nobody pays, opened by the API (page)
// and by their run (QR), on a 12 s TTL and a 1 s query step. The scheduled reconciler
// queries each at most three times before expiry (about 1, 3 and 7 s after creation), the
// runs keep no timer of their own, and each unpaid payment's run completes at most three
// workflow tasks: its start, its expiry (with the close path) and the closed webhook's
// end. One paid while every notification is lost ends PAID through the reconciler's
// wake, before its expiry.
//
// The reconciler's own cost is a run per period, not per pass: over the test (its passes 1
// s apart, a run making a minute of them) the stack's ReconcilerWorkflow runs are counted
// with their history events, and there are at most the minutes begun plus one. Before,
// the schedule started a run for every pass, one a second.
func TestAbandonedCheckoutsCostTheirQueriesOnly(t *testing.T) {
	resetFaults(t)
	ttl := 12 * time.Second
	started := time.Now()
	st := newStack(t, stackOptions{paymentTTL: ttl})
	tn := newTenant(t)
	simFault(t, "/notifications", map[string]any{"drop_next": 1000})
	type opened struct{ no, order string }
	var abandoned []opened
	for i := range 6 {
		body := order(fmt.Sprintf("ab-%d", i), int64(200+i))
		if i%2 == 1 {
			body["method"] = "qr"
		}
		res := mustCheckout(t, st, tn, "", body)
		abandoned = append(abandoned, opened{res.PaymentNo, fmt.Sprintf("ab-%d", i)})
	}
	paid := mustCheckout(t, st, tn, "", order("ab-paid", 990))
	openCashier(t, paid.PayURL)
	simPay(t, paid.PaymentNo)
	p := waitStatus(t, paid.PaymentNo, payment.StatusPaid, ttl)
	if !p.UpdatedAt.Before(paid.ExpireAt) {
		t.Fatalf("paid payment marked PAID at %s, not before its expiry %s", p.UpdatedAt, paid.ExpireAt)
	}
	final := waitWorkflowClosed(t, payment.WorkflowID(tn.id, "ab-paid"), 30*time.Second)
	if !final.QueryScheduled || final.WokenAt.IsZero() {
		t.Fatalf("paid payment's run: query scheduled %v, woken at %v; want PAID on the reconciler's wake", final.QueryScheduled, final.WokenAt)
	}
	maxQ, maxTasks := 0, 0
	for _, a := range abandoned {
		waitStatus(t, a.no, payment.StatusClosed, ttl+30*time.Second)
		st := waitWorkflowClosed(t, payment.WorkflowID(tn.id, a.order), 30*time.Second)
		if !st.QueryScheduled {
			t.Errorf("%s: its run keeps its own reconciliation timer", a.no)
		}
		var calls map[string]int
		do(t, http.MethodGet, env.simURL+"/_sim/calls?out_trade_no="+a.no, nil, nil).json(t, &calls)
		// Three by the reconciler, one by the close path at expiry.
		if q := calls["alipay.trade.query"]; q > 4 {
			t.Errorf("%s: %d Alipay queries (%v), want at most 3 and the close path's", a.no, q, calls)
		}
		var queries int
		if err := env.db.QueryRow("SELECT queries FROM payments WHERE payment_no = ?", a.no).Scan(&queries); err != nil {
			t.Fatal(err)
		}
		if queries < 1 || queries > 3 {
			t.Errorf("%s: the reconciler queried it %d times before expiry, want 1 to 3", a.no, queries)
		}
		tasks := len(workflowTaskWorkers(t, payment.WorkflowID(tn.id, a.order)))
		if tasks > 3 {
			t.Errorf("%s: its run completed %d workflow tasks, want at most 3", a.no, tasks)
		}
		maxQ, maxTasks = max(maxQ, queries), max(maxTasks, tasks)
	}
	t.Logf("%d abandoned payments: at most %d reconciler queries and %d workflow tasks each; the paid one PAID on the reconciler's wake at %s",
		len(abandoned), maxQ, maxTasks, final.WokenAt.Format(time.RFC3339Nano))

	took := time.Since(started)
	runs, events := reconcilerRuns(t, st.taskQueue)
	if limit := int(took/time.Minute) + 2; runs > limit {
		t.Errorf("%d reconciler runs in %s, want at most %d: a run per minute-long span, not per 1 s pass", runs, took.Round(time.Second), limit)
	}
	t.Logf("reconciler over %s with 1 s passes: %d workflow runs, %d history events in all (one run per pass would be %d runs)",
		took.Round(time.Second), runs, events, int(took/time.Second))
}

// reconcilerRuns counts the ReconcilerWorkflow runs of a task queue and their history
// events.
func reconcilerRuns(t *testing.T, taskQueue string) (runs, events int) {
	t.Helper()
	ctx := context.Background()
	query := fmt.Sprintf("WorkflowType = '%s' AND TaskQueue = '%s'", workflows.ReconcilerWorkflowName, taskQueue)
	var token []byte
	for {
		resp, err := env.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.GetExecutions() {
			runs++
			it := env.tc.GetWorkflowHistory(ctx, e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				if _, err := it.Next(); err != nil {
					t.Fatal(err)
				}
				events++
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return runs, events
		}
	}
}

// TestReconcilerResumesSoonAfterItsWorkerIsKilled: the scheduled reconciler's loop is one
// long activity, so a worker SIGKILLed under it is noticed only by the activity's
// heartbeat timeout, and until then no payment is queried. The worker is killed just after
// the loop's heartbeat reached Temporal and started again at once; a payment is then paid
// while every notification is lost. It must be PAID, by the reconciler on the restarted
// worker, within 20 s of Alipay taking the money. Before, the loop's heartbeat timeout was
// 30 s (and its heartbeats were sent 24 s apart), so the reconciler stood still for about
// half a minute after the kill.
func TestReconcilerResumesSoonAfterItsWorkerIsKilled(t *testing.T) {
	resetFaults(t)
	st := newStack(t, stackOptions{paymentTTL: 2 * time.Minute})
	tn := newTenant(t)
	// Just after a heartbeat reached Temporal: the most the old timeout could hold it.
	beat := reconcilerLoopHeartbeat(t, st.taskQueue, time.Now().Add(-time.Second))
	st.worker.kill()
	killed := time.Now()
	if err := st.worker.run(); err != nil {
		t.Fatal(err)
	}
	if err := waitHTTP(st.workerAdminURL+"/readyz", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	simFault(t, "/notifications", map[string]any{"drop_next": 1000})
	res := mustCheckout(t, st, tn, "", order("rk-1", 1500))
	openCashier(t, res.PayURL)
	simPay(t, res.PaymentNo)
	paid := time.Now()
	waitStatus(t, res.PaymentNo, payment.StatusPaid, 60*time.Second)
	took := time.Since(paid)
	final := waitWorkflowClosed(t, payment.WorkflowID(tn.id, "rk-1"), 30*time.Second)
	if final.WokenAt.IsZero() {
		t.Fatalf("paid without the reconciler's wake: %+v", final)
	}
	resumed := reconcilerLoopHeartbeat(t, st.taskQueue, killed)
	t.Logf("loop heartbeat %s before the kill; the loop heartbeat again %s after it; PAID %s after Alipay took the money",
		killed.Sub(beat).Round(time.Millisecond), resumed.Sub(killed).Round(time.Millisecond), took.Round(time.Millisecond))
	if took > 20*time.Second {
		t.Fatalf("PAID %s after Alipay took the money with every notification lost, want within 20 s: the reconciler stood still after its worker was killed",
			took.Round(time.Millisecond))
	}
}

// reconcilerLoopHeartbeat waits for the running reconciler loop of taskQueue to have a
// heartbeat recorded by Temporal after after, and returns its time.
func reconcilerLoopHeartbeat(t *testing.T, taskQueue string, after time.Time) time.Time {
	t.Helper()
	ctx := context.Background()
	query := fmt.Sprintf("WorkflowType = '%s' AND TaskQueue = '%s' AND ExecutionStatus = 'Running'", workflows.ReconcilerWorkflowName, taskQueue)
	var at time.Time
	waitFor(t, 90*time.Second, func() bool {
		resp, err := env.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.GetExecutions() {
			d, err := env.tc.DescribeWorkflow(ctx, e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId())
			if err != nil {
				continue
			}
			for _, pa := range d.RawResponse.GetPendingActivities() {
				if hb := pa.GetLastHeartbeatTime(); hb != nil && hb.AsTime().After(after) {
					at = hb.AsTime()
					return true
				}
			}
		}
		return false
	})
	return at
}
