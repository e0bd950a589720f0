package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/paykit/paykit/workflows"
	"go.temporal.io/api/workflowservice/v1"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/paykit/paykit/payment"
)

// TestTwoAPIsTwoWorkersExactlyOnce runs the production topology: two API processes behind
// a round-robin balancer (which is also the notify_url Alipay calls back) and two worker
// processes on one task queue. Every order is checked out several times at once, spread
// over both APIs; every notification comes four times, answered by both APIs; and the
// worker holding more of the payments in flight is SIGKILLed while they are being settled,
// so that the other must take them over. Each order must still end with
// one payment, one trade, one PAID, one grant and one payment.paid event, and
// `paykit audit` must find nothing. CI runs it on the Temporal server on PostgreSQL
// (PAYKIT_E2E_TEMPORAL=postgres).
func TestTwoAPIsTwoWorkersExactlyOnce(t *testing.T) {
	started := time.Now()
	resetFaults(t)
	lb := newBalancer(t)
	queue := "e2e-topology-" + randHex(4)
	opts := stackOptions{taskQueue: queue, extraEnv: []string{"PAYKIT_PUBLIC_URL=" + lb.url}}
	a, b := newNamedStack(t, "a", opts), newNamedStack(t, "b", opts)
	lb.setBackends(a.apiURL, b.apiURL)
	pauseOtherSweepers(t, a)
	front := &stack{name: "balancer", apiURL: lb.url}
	tn := newTenant(t)
	simFault(t, "/notifications", map[string]any{"copies": 4})

	const orders, copies = 12, 8
	ids := make([]string, orders)
	bodies := make([]map[string]any, orders)
	for i := range orders {
		ids[i] = fmt.Sprintf("topo%02d", i)
		bodies[i] = order(ids[i], int64(100+i))
		if i%2 == 0 {
			bodies[i]["method"] = "qr"
		}
	}
	// Every order checked out `copies` times at once through the balancer: with no key, with
	// one shared key and with keys of their own.
	nos := make([]string, orders)
	var wg sync.WaitGroup
	for i := range orders {
		wg.Go(func() {
			res := spreadCheckouts(t, front, tn, copies, bodies[i])
			nos[i] = res.PaymentNo
			if res.PayURL != "" && bodies[i]["method"] == nil {
				openCashier(t, res.PayURL)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// The buyers pay; one worker dies while the first half is being settled, and the rest
	// is paid (and checked out again) with one worker left. The merchant answers webhooks
	// slowly meanwhile, so that the payments the victim holds are still in flight (between
	// MarkPaid and their delivered webhook) when it dies, however fast the machine.
	half := orders / 2
	env.merchant.setDelay(tn.id, 3*time.Second)
	for i := range half {
		wg.Go(func() { simPay(t, nos[i]) })
	}
	wg.Wait()
	// Kill as soon as the first payment is PAID, while the others are between their
	// notification and their grant and webhook.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND status = 1", tn.id) > 0 {
			break
		}
	}
	// The victim is the worker that ran the last workflow task of more of the payments
	// still in flight: it holds them in its sticky cache, the other must take them over.
	holds := map[int]int{}
	for i := range half {
		if pids := workflowTaskWorkers(t, payment.WorkflowID(tn.id, ids[i])); len(pids) > 0 {
			holds[pids[len(pids)-1]]++
		}
	}
	victim, survivor := b, a
	if holds[a.worker.cmd.Process.Pid] > holds[b.worker.cmd.Process.Pid] {
		victim, survivor = a, b
	}
	pidVictim, pidSurvivor := victim.worker.cmd.Process.Pid, survivor.worker.cmd.Process.Pid
	victim.worker.kill()
	env.merchant.setDelay(tn.id, 0)
	paidAtKill := count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND status = 1", tn.id)
	for i := half; i < orders; i++ {
		wg.Go(func() {
			simPay(t, nos[i])
			if no := spreadCheckouts(t, front, tn, 2, bodies[i]).PaymentNo; no != nos[i] {
				t.Errorf("order %s: checkout after pay answered payment %s, want %s", ids[i], no, nos[i])
			}
		})
	}
	wg.Wait()

	for i := range orders {
		waitStatus(t, nos[i], payment.StatusPaid, 90*time.Second)
		// The run that holds the payment: a checkout racing the pay may have started a
		// later run of the order, refused at its start (order_already_paid).
		final := waitPaymentRunClosed(t, payment.WorkflowID(tn.id, ids[i]), nos[i], 90*time.Second)
		if final.Status != payment.StatusPaid || !final.BenefitGranted || !final.WebhookSent {
			t.Errorf("order %s: workflow result %+v", ids[i], final)
		}
	}
	time.Sleep(time.Second) // the last copies of the notifications land

	webhooks := map[string]map[string]bool{} // payment_no -> distinct payment.paid event ids
	for _, w := range env.merchant.received(tn.id) {
		var body struct {
			PaymentNo string `json:"payment_no"`
		}
		if !w.verified || json.Unmarshal(w.body, &body) != nil {
			t.Errorf("webhook %s: verified %v, body %s", w.eventID, w.verified, w.body)
			continue
		}
		if w.typ == payment.EventPaymentPaid {
			if webhooks[body.PaymentNo] == nil {
				webhooks[body.PaymentNo] = map[string]bool{}
			}
			webhooks[body.PaymentNo][w.eventID] = true
		}
	}
	for i, id := range ids {
		no := nos[i]
		checks := []struct {
			what      string
			got, want int
		}{
			{"payments", count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND order_id = ?", tn.id, id), 1},
			{"PAID payments", count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND order_id = ? AND status = 1", tn.id, id), 1},
			{"trades", count(t, "SELECT COUNT(DISTINCT trade_no) FROM payments WHERE tenant_id = ? AND order_id = ? AND trade_no <> ''", tn.id, id), 1},
			{"grants", count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", no), 1},
			{"payment.paid events", count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ? AND type = ?", no, payment.EventPaymentPaid), 1},
			{"undelivered events", count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ? AND delivered = 0", no), 0},
			{"verified notifications recorded", count(t, "SELECT COUNT(*) FROM channel_notifications WHERE payment_no = ? AND verified = 1", no), 1},
			{"distinct payment.paid webhooks", len(webhooks[no]), 1},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("order %s (payment %s): %s = %d, want %d", id, no, c.what, c.got, c.want)
			}
		}
		if tr := simTrade(t, no); tr["trade_status"] != "TRADE_SUCCESS" {
			t.Errorf("order %s: simulator trade %v", id, tr)
		}
	}
	if n := count(t, "SELECT COUNT(*) FROM payment_anomalies WHERE tenant_id = ?", tn.id); n != 0 {
		t.Errorf("%d anomalies recorded", n)
	}
	checkouts, callbacks := lb.served("/v1/payments"), lb.served("/callbacks/alipay")
	for i, be := range []*stack{a, b} {
		if checkouts[i] == 0 || callbacks[i] == 0 {
			t.Errorf("API %s served %d checkouts and %d notifications; want both APIs to serve both", be.name, checkouts[i], callbacks[i])
		}
	}
	// The histories show who did the work: the victim ran workflow tasks of these payments
	// before it died, and the survivor finished the ones it had started.
	ranByVictim, takenOver := 0, 0
	for _, id := range ids {
		byVictim, after := false, false
		for _, pid := range workflowTaskWorkers(t, payment.WorkflowID(tn.id, id)) {
			switch pid {
			case pidVictim:
				byVictim = true
			case pidSurvivor:
				after = after || byVictim
			}
		}
		if byVictim {
			ranByVictim++
		}
		if after {
			takenOver++
		}
	}
	if ranByVictim == 0 || takenOver == 0 {
		t.Errorf("worker %s ran workflow tasks of %d payments before it was killed, %d finished by %s; want a takeover",
			victim.name, ranByVictim, takenOver, survivor.name)
	}
	auditClean(t, a, started, tn.id)
	t.Logf("%d orders, %d checkouts per order over 2 APIs (checkouts %v, notifications %v per API); worker %s ran tasks of %d payments and was SIGKILLed "+
		"with %d of %d PAID, worker %s finished %d of them: 1 payment, 1 trade, 1 PAID, 1 grant, 1 payment.paid event per order, audit clean, in %s",
		orders, copies, checkouts, callbacks, victim.name, ranByVictim, paidAtKill, orders, survivor.name, takenOver, time.Since(started).Round(time.Second))
}

// spreadCheckouts sends n checkouts of one order at once (every fourth with no key, half
// with one shared key, the rest with keys of their own), retrying 409 in_flight, and
// requires every answer to name the same payment: 201 with it, or 409 order_already_paid
// with it. It returns the first 201 answer, or the paid payment's number.
func spreadCheckouts(t *testing.T, st *stack, tn tenant, n int, body map[string]any) checkoutResult {
	t.Helper()
	shared := "topo-" + randHex(6)
	nos := make([]string, n)
	var (
		mu    sync.Mutex
		first checkoutResult
	)
	var wg sync.WaitGroup
	for i := range n {
		key := shared
		switch {
		case i%4 == 0:
			key = ""
		case i%2 == 1:
			key = fmt.Sprintf("%s-%d", shared, i)
		}
		wg.Go(func() {
			for range 400 {
				r := st.checkout(t, tn, key, body)
				var res struct {
					checkoutResult
					Code    string          `json:"code"`
					Payment payment.Payment `json:"payment"`
				}
				_ = json.Unmarshal(r.body, &res)
				switch {
				case r.status == http.StatusCreated:
					nos[i] = res.PaymentNo
					mu.Lock()
					if first.PaymentNo == "" {
						first = res.checkoutResult
					}
					mu.Unlock()
					return
				case r.status == http.StatusConflict && res.Code == payment.EORDERPAID:
					nos[i] = res.Payment.PaymentNo
					return
				case r.status == http.StatusConflict && (res.Code == payment.EINFLIGHT || res.Code == payment.EFINISHING):
					time.Sleep(50 * time.Millisecond)
				default:
					t.Errorf("checkout %d of %v: HTTP %d %s", i, body["order_id"], r.status, r.body)
					return
				}
			}
			t.Errorf("checkout %d of %v: still in flight", i, body["order_id"])
		})
	}
	wg.Wait()
	for i := range n {
		if nos[i] != nos[0] {
			t.Errorf("order %v: checkout %d got payment %q, checkout 0 got %q", body["order_id"], i, nos[i], nos[0])
		}
	}
	if first.PaymentNo == "" {
		first.PaymentNo = nos[0]
	}
	return first
}

// workflowTaskWorkers returns, in history order, the process ID of the worker that
// completed each workflow task of the workflow's current run (the SDK's default worker
// identity is pid@host@queue).
func workflowTaskWorkers(t *testing.T, workflowID string) []int {
	t.Helper()
	var pids []int
	it := env.tc.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", workflowID, err)
		}
		if attrs := ev.GetWorkflowTaskCompletedEventAttributes(); attrs != nil {
			pid, _ := strconv.Atoi(strings.SplitN(attrs.GetIdentity(), "@", 2)[0])
			pids = append(pids, pid)
		}
	}
	return pids
}

// newNamedStack is newStack for a test that runs several stacks: each gets its own name,
// and so its own log files.
func newNamedStack(t *testing.T, suffix string, o stackOptions) *stack {
	t.Helper()
	return startTestStack(t, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())+"-"+suffix, o)
}

// auditClean runs `paykit audit` over the test's window with the stack's settings; it
// must exit 0 with no findings.
func auditClean(t *testing.T, st *stack, since time.Time, tenants ...string) {
	t.Helper()
	if len(tenants) == 0 {
		t.Fatal("auditClean: name the tenants to audit")
	}
	// Other tests share the database, and their tenants (some with Alipay apps at other
	// simulators) are not this stack's to audit: each of this test's tenants is audited
	// alone (-tenant), over one window of absolute times fixed here, so that every run
	// reads the same payments whatever time passes between them.
	from := since.Add(-time.Minute).UTC().Format(time.RFC3339Nano)
	until := time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)
	for _, tenant := range tenants {
		cmd := exec.Command(env.paykitBin, "audit", "-tenant", tenant, "-since", from, "-until", until)
		cmd.Env = append(os.Environ(), st.env...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("paykit audit: %v", err)
		}
		switch code := cmd.ProcessState.ExitCode(); code {
		case 0:
			t.Logf("paykit audit -tenant %s: %s", tenant, strings.TrimSpace(lastLine(string(out))))
		case 1:
			t.Errorf("paykit audit -tenant %s: findings of this test's tenant\n%s", tenant, out)
		default:
			t.Errorf("paykit audit -tenant %s: exit %d\n%s", tenant, code, out)
		}
	}
}

// balancer is a round-robin HTTP load balancer in front of the APIs, counting by path
// which backend served each request.
type balancer struct {
	url      string
	next     atomic.Uint64
	mu       sync.Mutex
	backends []*httputil.ReverseProxy
	counts   map[string][]int
}

func newBalancer(t *testing.T) *balancer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lb := &balancer{url: "http://" + l.Addr().String(), counts: map[string][]int{}}
	srv := &http.Server{Handler: lb, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return lb
}

func (lb *balancer) setBackends(urls ...string) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	lb.backends = nil
	for _, u := range urls {
		target, _ := url.Parse(u)
		lb.backends = append(lb.backends, httputil.NewSingleHostReverseProxy(target))
	}
}

func (lb *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	lb.mu.Lock()
	if len(lb.backends) == 0 {
		lb.mu.Unlock()
		http.Error(w, "no backends yet", http.StatusServiceUnavailable)
		return
	}
	i := int(lb.next.Add(1)) % len(lb.backends)
	be := lb.backends[i]
	if lb.counts[r.URL.Path] == nil {
		lb.counts[r.URL.Path] = make([]int, len(lb.backends))
	}
	lb.counts[r.URL.Path][i]++
	lb.mu.Unlock()
	be.ServeHTTP(w, r)
}

// served returns how many requests for path each backend got.
func (lb *balancer) served(path string) []int {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	out := make([]int, len(lb.backends))
	copy(out, lb.counts[path])
	return out
}

// waitPaymentRunClosed waits for the run of workflowID that holds paymentNo (found by its
// PaymentNo search attribute) to close, and returns its result.
func waitPaymentRunClosed(t *testing.T, workflowID, paymentNo string, d time.Duration) workflows.PaymentState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	query := fmt.Sprintf("WorkflowId = '%s' AND PaymentNo = '%s'", workflowID, paymentNo)
	for {
		resp, err := env.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		if err == nil && len(resp.Executions) > 0 {
			var st workflows.PaymentState
			if err := env.tc.GetWorkflow(ctx, workflowID, resp.Executions[0].Execution.RunId).Get(ctx, &st); err != nil {
				t.Fatalf("workflow %s run of %s: %v", workflowID, paymentNo, err)
			}
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no run of %s holds payment %s: %v", workflowID, paymentNo, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
