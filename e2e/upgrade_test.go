package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
)

// upgradeWaitBound is the longest a payment may wait, with Worker Versioning, from the
// buyer's pay to PAID and from a refund's request to SUCCEEDED, through the upgrade and
// the rollback.
const upgradeWaitBound = 30 * time.Second

// upgradePaymentTTL is the storm's payments' TTL: an abandoned checkout closes after it,
// so one opened on the old build keeps that build busy about this long after the switch.
const upgradePaymentTTL = 20 * time.Second

// TestUpgradeStormWithWorkerVersioning upgrades a running deployment from the previous
// release (the newest in CHANGELOG.md, built from its commit) to this build and rolls it
// back, under traffic, by docs/operate/upgrades.md's Worker Versioning steps, whose
// `temporal worker deployment` commands it reads from the page and runs as written (with
// its deployment and build ids): two APIs behind a balancer (also Alipay's notify_url)
// and a worker of the old build, made current; merchants check out, buyers pay (Alipay
// notifies), a quarter of the checkouts are abandoned and close at their TTL, and
// merchants refund. The new build's worker starts beside the old and is made current,
// the APIs are replaced one by one, and the old worker stops once no payment or refund
// run started before the switch is open (what `describe-version` reports as drained; its
// output is logged). Then the same back to the old build. Every order answered 201 ends
// with one PAID payment, one grant and one payment.paid webhook; every abandoned one
// CLOSED; every refund accepted SUCCEEDED once; Alipay and MySQL agree to the fen;
// `paykit audit` is clean; no workflow task of any run on the task queue failed; no
// payment or refund waited more than upgradeWaitBound.
// scripts/test.sh runs it on the Temporal server on PostgreSQL (PAYKIT_E2E_TEMPORAL=postgres).
func TestUpgradeStormWithWorkerVersioning(t *testing.T) {
	if env.temporalScriptEnv == nil {
		t.Skip("runs on the Temporal server on PostgreSQL: PAYKIT_E2E_TEMPORAL=postgres or postgres-mtls (scripts/test.sh)")
	}
	previous := newestRelease(t)
	upgradeStorm(t, previous, true)
}

// TestUpgradeStormWithoutWorkerVersioning is the same storm without Worker Versioning,
// on the patching path, from v0.1.0 (the last release without it) to this build and back:
// old and new workers share the task queue while they overlap, and a task of a run one
// took down a branch past a version gate that the other does not know fails until a
// worker that knows it takes it. The money must still come out right; the failed workflow
// tasks are counted and logged ("failed workflow tasks: N"), not bounded. It runs on the
// dev server with the other e2e tests.
func TestUpgradeStormWithoutWorkerVersioning(t *testing.T) {
	upgradeStorm(t, "v0.1.0", false)
}

// newestRelease is the newest release CHANGELOG.md records.
func newestRelease(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(), "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## (v[0-9.]+) \(commit `).FindSubmatch(raw)
	if m == nil {
		t.Fatal("CHANGELOG.md records no release")
	}
	return string(m[1])
}

// runbook returns the `temporal worker deployment <verb> ...` command of
// docs/operate/upgrades.md's Worker Versioning steps as the page writes it, with its
// --deployment-name and --build-id set to this run's, and without the leading
// `temporal`.
func runbook(t *testing.T, verb, deployment, build string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(), "docs", "operate", "upgrades.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("`(temporal worker deployment " + verb + " [^`]*)`").FindSubmatch(raw)
	if m == nil {
		t.Fatalf("docs/operate/upgrades.md has no `temporal worker deployment %s` command", verb)
	}
	f := strings.Fields(string(m[1]))
	for i := 1; i < len(f); i++ {
		switch f[i-1] {
		case "--deployment-name":
			f[i] = deployment
		case "--build-id":
			f[i] = build
		}
	}
	return f[1:]
}

// upgrade is one upgrade and rollback: its processes and the balancer in front of its
// APIs.
type upgrade struct {
	t          *testing.T
	versioning bool
	deployment string
	base       *stack // the first stack: its environment is every process's
	lb         *balancer
	apis       []*stack
	n          int // processes started, for their names
}

// upgradeStorm runs the upgrade and rollback between the release previous and this build
// under the storm, then checks the money and counts the failed workflow tasks.
func upgradeStorm(t *testing.T, previous string, versioning bool) {
	started := time.Now()
	resetFaults(t)
	prev := buildRelease(t, previous)
	queue := "e2e-upgrade-" + randHex(4)
	u := &upgrade{t: t, versioning: versioning, deployment: "paykit-" + queue, lb: newBalancer(t)}
	oldID, newID := strings.ReplaceAll(prev.Version, ".", "-"), "next"
	u.base = newNamedStack(t, "old", stackOptions{bin: prev.paykit, taskQueue: queue, paymentTTL: upgradePaymentTTL,
		extraEnv: append([]string{"PAYKIT_PUBLIC_URL=" + u.lb.url}, u.versionEnv(oldID)...)})
	t.Cleanup(func() { deleteSchedules(queue) })
	u.apis = []*stack{u.base, u.startAPI(prev.paykit)}
	u.route()
	u.makeCurrent(oldID)
	pauseOtherSweepers(t, u.base)

	s := newUpgradeStormTraffic(t, u.lb.url)
	s.fillPool(4)
	s.start()
	time.Sleep(6 * time.Second)

	oldWorker := u.base.worker
	newWorker := u.roll(oldWorker, env.paykitBin, oldID, newID)
	time.Sleep(6 * time.Second)
	u.roll(newWorker, prev.paykit, newID, oldID)
	time.Sleep(4 * time.Second)
	s.finish()
	if t.Failed() {
		t.FailNow()
	}
	s.check(u.base)
	auditClean(t, u.base, started, s.tn.id)

	failed, raced, runs := failedTasksOnQueue(t, queue, started)
	if versioning && failed != 0 {
		t.Errorf("%d failed workflow tasks in %d runs on the task queue, want none", failed, runs)
	}
	if versioning {
		for _, c := range s.longest() {
			if c.took > upgradeWaitBound {
				t.Errorf("%s took %s, more than the bound %s", c.kind, c.took.Round(100*time.Millisecond), upgradeWaitBound)
			}
		}
	}
	t.Logf("%s to this build and back, Worker Versioning %v: %d orders paid once, %d abandoned and closed, %d refunds (%d fen) SUCCEEDED once at Alipay and in MySQL, audit clean; "+
		"failed workflow tasks: %d in %d runs on the task queue (and %d completions that met a signal, taken again); longest waits: %v; in %s",
		prev.Version, versioning, len(s.orders), len(s.abandoned), len(s.refunds), s.refundedFen, failed, runs, raced, s.longest(), time.Since(started).Round(time.Second))
}

// versionEnv is a worker's Worker Versioning settings for build id (none without
// versioning).
func (u *upgrade) versionEnv(id string) []string {
	if !u.versioning {
		return nil
	}
	return []string{"PAYKIT_WORKER_VERSIONING=true", "PAYKIT_WORKER_DEPLOYMENT=" + u.deployment, "PAYKIT_WORKER_BUILD_ID=" + id}
}

// makeCurrent runs the runbook's set-current-version for build id (with versioning).
func (u *upgrade) makeCurrent(id string) {
	if u.versioning {
		temporalCLI(u.t, runbook(u.t, "set-current-version", u.deployment, id)...)
	}
}

func (u *upgrade) route() {
	urls := make([]string, len(u.apis))
	for i, a := range u.apis {
		urls[i] = a.apiURL
	}
	u.lb.setBackends(urls...)
}

// startAPI starts an API of the binary bin with the base stack's settings, on its own
// ports, and returns it once it is ready.
func (u *upgrade) startAPI(bin string) *stack {
	u.t.Helper()
	u.n++
	apiAddr, adminAddr := freeAddr(), freeAddr()
	apiHosts.Store(apiAddr, true)
	a := &stack{name: fmt.Sprintf("%s-api%d", u.base.name, u.n), apiURL: "http://" + apiAddr, apiAdminURL: "http://" + adminAddr}
	var err error
	a.api, err = env.start(a.name, bin, []string{"api"}, append(append([]string{}, u.base.env...), "PAYKIT_HTTP_ADDR="+apiAddr, "PAYKIT_API_ADMIN_ADDR="+adminAddr))
	if err != nil {
		u.t.Fatal(err)
	}
	u.t.Cleanup(a.api.stop)
	if err := waitAPI(a.apiURL, a.apiAdminURL); err != nil {
		u.t.Fatal(err)
	}
	return a
}

// startWorker starts a worker of the binary bin polling as build id, and returns it once
// it is ready.
func (u *upgrade) startWorker(bin, id string) *proc {
	u.t.Helper()
	u.n++
	admin := freeAddr()
	w, err := env.start(fmt.Sprintf("%s-worker%d-%s", u.base.name, u.n, id), bin, []string{"worker"},
		append(append(append([]string{}, u.base.env...), u.versionEnv(id)...), "PAYKIT_WORKER_ADMIN_ADDR="+admin))
	if err != nil {
		u.t.Fatal(err)
	}
	u.t.Cleanup(w.stop)
	if err := waitHTTP("http://"+admin+"/readyz", 60*time.Second); err != nil {
		u.t.Fatal(err)
	}
	return w
}

// roll moves the deployment from build from (whose worker is old) to build to, of the
// binary bin, by the runbook's steps: to's worker beside from's (1), to made current (3),
// the APIs replaced one by one (4), from's worker stopped once drained (5). It returns
// to's worker.
func (u *upgrade) roll(old *proc, bin, from, to string) *proc {
	t := u.t
	t.Helper()
	w := u.startWorker(bin, to)
	u.makeCurrent(to)
	switched := time.Now()
	for i := range u.apis {
		next := u.startAPI(bin)
		prev := u.apis[i]
		u.apis[i] = next
		u.route()
		prev.api.stop()
	}
	u.waitDrained(from, switched)
	old.stop()
	t.Logf("%s → %s: APIs replaced, %s drained and its worker stopped %s after the switch", from, to, from, time.Since(switched).Round(100*time.Millisecond))
	return w
}

// waitDrained waits until no payment or refund run started on the task queue before
// switched is open: what describe-version reports as drained, read without the server's
// drainage refresh delay. With versioning, describe-version's answer is logged.
func (u *upgrade) waitDrained(build string, switched time.Time) {
	t := u.t
	t.Helper()
	query := fmt.Sprintf("TaskQueue = '%s' AND ExecutionStatus = 'Running' AND StartTime < '%s' AND WorkflowType IN ('%s', '%s')",
		u.base.taskQueue, switched.UTC().Format(time.RFC3339Nano), workflows.PaymentWorkflowName, workflows.RefundWorkflowName)
	deadline := time.Now().Add(upgradePaymentTTL + 90*time.Second)
	for {
		resp, err := env.tc.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		if err == nil && len(resp.Executions) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs started before the switch still open after %s: %v %v", upgradePaymentTTL+90*time.Second, resp.GetExecutions(), err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if u.versioning {
		out := temporalCLI(t, runbook(t, "describe-version", u.deployment, build)...)
		for line := range strings.Lines(out) {
			if strings.Contains(line, "Drainage") {
				t.Logf("describe-version --build-id %s: %s", build, strings.TrimSpace(line))
			}
		}
	}
}

// failedTasksOnQueue counts the WorkflowTaskFailed events in the histories of every run
// on the task queue started since since, and returns it with the number of runs. A task
// refused because a signal arrived as it completed its run (UnhandledCommand: the worker
// takes the signal in a new task) is counted apart, as raced: it is how Temporal hands a
// late signal to a run of any build, not a task a build failed.
func failedTasksOnQueue(t *testing.T, queue string, since time.Time) (failed, raced, runs int) {
	t.Helper()
	ctx := context.Background()
	query := fmt.Sprintf("TaskQueue = '%s' AND StartTime >= '%s'", queue, since.Add(-time.Minute).UTC().Format(time.RFC3339Nano))
	var token []byte
	for {
		resp, err := env.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.Executions {
			runs++
			f, r := workflowTaskFailures(t, e.Execution.WorkflowId, e.Execution.RunId)
			failed += f
			raced += r
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return failed, raced, runs
		}
	}
}

// upgradeTraffic is the storm's merchants and buyers: checkouts (a quarter abandoned,
// the rest paid as they are answered) and partial refunds of a pool of paid payments,
// through the balancer, asking again after an error or a timeout.
type upgradeTraffic struct {
	t           *testing.T
	url         string
	tn          tenant
	mu          sync.Mutex
	orders      map[string]string // order id -> payment_no, checkouts answered 201 and paid
	abandoned   map[string]string // order id -> payment_no, answered 201 and never paid
	refunds     map[string]string // refund_no -> payment_no, refunds accepted
	waits       map[string]time.Duration
	pool        []string
	refundedFen int64
	stop        chan struct{}
	gen, work   sync.WaitGroup
}

func newUpgradeStormTraffic(t *testing.T, url string) *upgradeTraffic {
	return &upgradeTraffic{t: t, url: url, tn: newTenant(t), orders: map[string]string{}, abandoned: map[string]string{},
		refunds: map[string]string{}, waits: map[string]time.Duration{}, stop: make(chan struct{})}
}

func (s *upgradeTraffic) took(kind string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waits[kind] = max(s.waits[kind], time.Since(at))
}

type wait struct {
	kind string
	took time.Duration
}

func (w wait) String() string { return w.kind + " " + w.took.Round(100*time.Millisecond).String() }

// longest is the longest wait of each kind.
func (s *upgradeTraffic) longest() []wait {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ws []wait
	for _, k := range []string{"checkout", "pay to PAID", "refund to SUCCEEDED"} {
		ws = append(ws, wait{k, s.waits[k]})
	}
	return ws
}

func (s *upgradeTraffic) headers(key string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + s.tn.apiKey, "Content-Type": "application/json", "Idempotency-Key": key}
}

// post sends a merchant's request until it is answered 201 or 200, asking again with the
// same key after an error, a timeout or a retryable answer, for up to two minutes.
func (s *upgradeTraffic) post(path, key string, body map[string]any) (response, bool) {
	b, _ := json.Marshal(body)
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		r, err := stormCall(http.MethodPost, s.url+path, s.headers(key), b)
		if err == nil && (r.status == http.StatusCreated || r.status == http.StatusOK) {
			return r, true
		}
		if err == nil && !retryable(r) {
			s.t.Errorf("POST %s (%s): HTTP %d %s", path, key, r.status, r.body)
			return r, false
		}
	}
	s.t.Errorf("POST %s (%s): not answered in 2m", path, key)
	return response{}, false
}

// checkout opens an order's QR payment and returns its payment_no.
func (s *upgradeTraffic) checkout(id string, fen int64) string {
	at := time.Now()
	r, ok := s.post("/v1/payments", "upgrade-"+id, map[string]any{"order_id": id, "amount_fen": fen, "subject": "Upgrade " + id, "method": "qr"})
	var res checkoutResult
	if !ok || json.Unmarshal(r.body, &res) != nil || res.PaymentNo == "" {
		if ok {
			s.t.Errorf("checkout %s: %s", id, r.body)
		}
		return ""
	}
	s.took("checkout", at)
	return res.PaymentNo
}

// pay pays a payment as the buyer and waits until it is PAID.
func (s *upgradeTraffic) pay(no string) {
	at := time.Now()
	if r, err := stormCall(http.MethodPost, env.simURL+"/_sim/trades/"+no+"/pay", map[string]string{"Content-Type": "application/json"}, []byte(`{}`)); err != nil || r.status != http.StatusOK {
		s.t.Errorf("sim pay %s: %v HTTP %d %s", no, err, r.status, r.body)
		return
	}
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if p, err := env.store.GetPayment(context.Background(), no); err == nil && p.Status == payment.StatusPaid {
			s.took("pay to PAID", at)
			return
		}
	}
	s.t.Errorf("payment %s not PAID 3m after the buyer paid", no)
}

// refund asks for a partial refund and waits until it is SUCCEEDED.
func (s *upgradeTraffic) refund(key, no string, fen int64) {
	at := time.Now()
	r, ok := s.post("/v1/payments/"+no+"/refunds", key, map[string]any{"amount_fen": fen, "reason": "upgrade storm"})
	var rf payment.Refund
	if !ok || json.Unmarshal(r.body, &rf) != nil || rf.RefundNo == "" {
		if ok {
			s.t.Errorf("refund %s: %s", key, r.body)
		}
		return
	}
	s.mu.Lock()
	if prev, dup := s.refunds[rf.RefundNo]; dup {
		s.t.Errorf("refund %s accepted twice (payments %s and %s)", rf.RefundNo, prev, no)
	}
	s.refunds[rf.RefundNo] = no
	s.mu.Unlock()
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		got, err := env.store.GetRefund(context.Background(), s.tn.id, rf.RefundNo)
		if err == nil && got.Status == payment.RefundSucceeded {
			s.took("refund to SUCCEEDED", at)
			return
		}
		if err == nil && got.Status == payment.RefundFailed {
			s.t.Errorf("refund %s of %s FAILED: %+v", rf.RefundNo, no, got)
			return
		}
	}
	s.t.Errorf("refund %s of %s not SUCCEEDED 3m after it was asked", rf.RefundNo, no)
}

// fillPool checks out and pays n payments for the refunds to draw on.
func (s *upgradeTraffic) fillPool(n int) {
	s.pool = make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("pool%d", i)
			if no := s.checkout(id, 5000); no != "" {
				s.pay(no)
				s.mu.Lock()
				s.orders[id], s.pool[i] = no, no
				s.mu.Unlock()
			}
		})
	}
	wg.Wait()
	if s.t.Failed() {
		s.t.FailNow()
	}
}

func (s *upgradeTraffic) stopped() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// start sets two merchants checking out (every fourth order abandoned, the rest paid as
// answered) and two refunding, each pausing 400 ms between requests, until finish.
func (s *upgradeTraffic) start() {
	for g := range 2 {
		s.gen.Go(func() {
			for n := 0; !s.stopped(); n++ {
				id := fmt.Sprintf("u%d-%03d", g, n)
				no := s.checkout(id, int64(100+n))
				s.mu.Lock()
				switch {
				case no == "":
				case n%4 == 3:
					s.abandoned[id] = no
				default:
					s.orders[id] = no
					s.work.Go(func() { time.Sleep(200 * time.Millisecond); s.pay(no) })
				}
				s.mu.Unlock()
				time.Sleep(400 * time.Millisecond)
			}
		})
		s.gen.Go(func() {
			for n := 0; !s.stopped(); n++ {
				no := s.pool[(2*n+g)%len(s.pool)]
				s.work.Go(func() { s.refund(fmt.Sprintf("upgrade-r%d-%03d", g, n), no, int64(10+n%7)) })
				time.Sleep(400 * time.Millisecond)
			}
		})
	}
}

// finish stops the merchants and waits for every payment and refund asked for to settle.
func (s *upgradeTraffic) finish() {
	close(s.stop)
	s.gen.Wait()
	s.work.Wait()
}

// check requires the money to be right: each paid order's runs ended PAID with one
// grant, one payment.paid event and webhook; each abandoned order CLOSED with no grant and
// no paid trade; each refund SUCCEEDED once with its event and webhook; Alipay's ledger
// and MySQL agree to the fen; no anomaly.
func (s *upgradeTraffic) check(st *stack) {
	t, tn := s.t, s.tn
	for id, no := range s.orders {
		paymentRunsEndPaid(t, payment.WorkflowID(tn.id, id), no, 3*time.Minute)
	}
	for _, no := range s.abandoned {
		waitStatus(t, no, payment.StatusClosed, upgradePaymentTTL+2*time.Minute)
	}
	waitRefundWebhooks(t, tn.id, payment.EventRefundSucceeded, len(s.refunds), time.Minute)
	time.Sleep(time.Second) // late copies of notifications and webhooks land
	paidHooks, refundHooks := map[string]map[string]bool{}, map[string]bool{}
	for _, w := range env.merchant.received(tn.id) {
		var body struct {
			PaymentNo string `json:"payment_no"`
		}
		if !w.verified || json.Unmarshal(w.body, &body) != nil {
			t.Errorf("webhook %s: verified %v, body %s", w.eventID, w.verified, w.body)
			continue
		}
		switch w.typ {
		case payment.EventPaymentPaid:
			if paidHooks[body.PaymentNo] == nil {
				paidHooks[body.PaymentNo] = map[string]bool{}
			}
			paidHooks[body.PaymentNo][w.eventID] = true
		case payment.EventRefundSucceeded:
			refundHooks[w.eventID] = true
		}
	}
	for id, no := range s.orders {
		s.want(id, no, []countCheck{
			{"PAID payments", count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND order_id = ? AND status = 1", tn.id, id), 1},
			{"grants", count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", no), 1},
			{"payment.paid events", count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ? AND type = ?", no, payment.EventPaymentPaid), 1},
			{"undelivered events", count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ? AND delivered = 0", no), 0},
			{"distinct payment.paid webhooks", len(paidHooks[no]), 1},
		})
	}
	for id, no := range s.abandoned {
		s.want(id, no, []countCheck{
			{"payments", count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND order_id = ?", tn.id, id), 1},
			{"grants", count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", no), 0},
			{"payment.paid webhooks", len(paidHooks[no]), 0},
		})
	}
	if n := count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ?", tn.id); n != len(s.orders)+len(s.abandoned) {
		t.Errorf("%d payments for %d orders answered 201", n, len(s.orders)+len(s.abandoned))
	}
	if n := count(t, "SELECT COUNT(*) FROM refunds WHERE tenant_id = ? AND status = 1", tn.id); n != len(s.refunds) {
		t.Errorf("%d refunds SUCCEEDED of %d accepted", n, len(s.refunds))
	}
	if len(refundHooks) != len(s.refunds) {
		t.Errorf("merchant received %d distinct refund.succeeded webhooks for %d refunds", len(refundHooks), len(s.refunds))
	}
	s.ledgerAgrees()
	if n := count(t, "SELECT COUNT(*) FROM payment_anomalies WHERE tenant_id = ?", tn.id); n != 0 {
		t.Errorf("%d anomalies recorded", n)
	}
}

type countCheck struct {
	what      string
	got, want int
}

func (s *upgradeTraffic) want(id, no string, checks []countCheck) {
	for _, c := range checks {
		if c.got != c.want {
			s.t.Errorf("order %s (payment %s): %s = %d, want %d", id, no, c.what, c.got, c.want)
		}
	}
}

// ledgerAgrees compares the simulator's trades and refunds with MySQL's, to the fen.
func (s *upgradeTraffic) ledgerAgrees() {
	t := s.t
	var ledger []struct {
		OutTradeNo  string `json:"out_trade_no"`
		TradeNo     string `json:"trade_no"`
		TradeStatus string `json:"trade_status"`
		TotalFen    int64  `json:"total_fen"`
		RefundedFen int64  `json:"refunded_fen"`
	}
	do(t, http.MethodGet, env.simURL+"/_sim/trades", nil, nil).json(t, &ledger)
	trades := map[string]int{}
	for i, tr := range ledger {
		trades[tr.OutTradeNo] = i
	}
	var simRows []simRefund
	do(t, http.MethodGet, env.simURL+"/_sim/refunds", nil, nil).json(t, &simRows)
	atAlipay, refundsAt := map[string]int64{}, map[string]int{}
	for _, sr := range simRows {
		if sr.State == "succeeded" {
			atAlipay[sr.OutTradeNo] += sr.RefundFen
			refundsAt[sr.OutTradeNo]++
		}
	}
	perPayment := map[string]int{}
	for _, no := range s.refunds {
		perPayment[no]++
	}
	for _, no := range s.orders {
		p, err := env.store.GetPayment(context.Background(), no)
		if err != nil {
			t.Fatal(err)
		}
		i, ok := trades[no]
		if !ok {
			t.Errorf("payment %s: no trade at Alipay", no)
			continue
		}
		tr := ledger[i]
		if tr.TradeStatus != "TRADE_SUCCESS" || tr.TradeNo != p.TradeNo || tr.TotalFen != int64(p.Amount) {
			t.Errorf("payment %s: trade %+v at Alipay, %+v locally", no, tr, p)
		}
		var succeeded int64
		if err := env.db.QueryRow("SELECT COALESCE(SUM(amount_fen), 0) FROM refunds WHERE payment_no = ? AND status = 1", no).Scan(&succeeded); err != nil {
			t.Fatal(err)
		}
		if tr.RefundedFen != succeeded || atAlipay[no] != succeeded || int64(p.Refunded) != succeeded || refundsAt[no] != perPayment[no] {
			t.Errorf("payment %s: Alipay's trade refunded %d fen in %d refunds (%d fen), MySQL %d SUCCEEDED and refunded_fen %d for %d accepted",
				no, tr.RefundedFen, refundsAt[no], atAlipay[no], succeeded, p.Refunded, perPayment[no])
		}
		s.refundedFen += succeeded
	}
	for _, no := range s.abandoned {
		if i, ok := trades[no]; ok && ledger[i].TradeStatus == "TRADE_SUCCESS" {
			t.Errorf("abandoned payment %s: paid at Alipay %+v", no, ledger[i])
		}
	}
}
