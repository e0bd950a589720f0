package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
)

// tcpBalancer hands each new connection to the first backend, in turn, that accepts it:
// the load balancer in front of a Temporal cluster's frontends.
type tcpBalancer struct {
	addr     string
	backends []string
	mu       sync.Mutex
	next     int
	served   []int
}

func newTCPBalancer(t *testing.T, backends ...string) *tcpBalancer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &tcpBalancer{addr: ln.Addr().String(), backends: backends, served: make([]int, len(backends))}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go b.serve(c)
		}
	}()
	return b
}

func (b *tcpBalancer) serve(c net.Conn) {
	defer c.Close()
	b.mu.Lock()
	first := b.next
	b.next = (b.next + 1) % len(b.backends)
	b.mu.Unlock()
	for i := range b.backends {
		k := (first + i) % len(b.backends)
		be, err := net.DialTimeout("tcp", b.backends[k], time.Second)
		if err != nil {
			continue
		}
		b.mu.Lock()
		b.served[k]++
		b.mu.Unlock()
		defer be.Close()
		go func() { _, _ = io.Copy(be, c); _ = be.(*net.TCPConn).CloseWrite() }()
		_, _ = io.Copy(c, be)
		return
	}
}

func (b *tcpBalancer) connections() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.served...)
}

// startTemporalNode starts a second node of the run's Temporal server on PostgreSQL: the
// same databases, its own ports and config (scripts/temporal-postgres.sh config and
// start), all four services; the nodes find each other through the cluster_membership
// table. It returns the node and its frontend's address once that answers.
func startTemporalNode(t *testing.T, name string) (*proc, string) {
	t.Helper()
	port, err := freePortBlock()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(repoRoot(), "scripts", "temporal-postgres.sh")
	envv := append(append([]string{}, env.temporalScriptEnv...),
		"TEMPORAL_PORT="+strconv.Itoa(port),
		"TEMPORAL_PG_DIR="+filepath.Join(env.dir, name),
		"TEMPORAL_METRICS_ADDR="+freeAddr())
	cmd := exec.Command(script, "config")
	cmd.Env = append(os.Environ(), envv...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s config: %v\n%s", script, err, b)
	}
	node, err := env.start(name, script, []string{"start"}, envv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.stop)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	c, err := dialTemporal(addr, env.temporalTLS, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	return node, addr
}

// stormClock keeps, for each kind of operation of the node-kill storm, the longest time
// one took, apart for those that ended before the node was killed and the rest.
type stormClock struct {
	mu       sync.Mutex
	killedAt time.Time
	before   map[string]time.Duration
	after    map[string]time.Duration
	n        map[string]int
}

func newStormClock() *stormClock {
	return &stormClock{before: map[string]time.Duration{}, after: map[string]time.Duration{}, n: map[string]int{}}
}

func (c *stormClock) kill() {
	c.mu.Lock()
	c.killedAt = time.Now()
	c.mu.Unlock()
}

// took records an operation of the kind that started at start and has just ended.
func (c *stormClock) took(kind string, start time.Time) {
	end := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.killedAt.IsZero() || end.Before(c.killedAt) {
		c.before[kind] = max(c.before[kind], end.Sub(start))
		return
	}
	c.after[kind] = max(c.after[kind], end.Sub(start))
	c.n[kind]++
}

func (c *stormClock) figures(kind string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("%s at most %s before the kill, at most %s for the %d ending after it",
		kind, c.before[kind].Round(100*time.Millisecond), c.after[kind].Round(100*time.Millisecond), c.n[kind])
}

// stormClient is a merchant's or buyer's HTTP client: it gives up on an answer after three
// seconds and asks again, as a real one does.
var stormClient = &http.Client{Timeout: 3 * time.Second}

func stormCall(method, url string, headers map[string]string, body []byte) (response, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return response{}, err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := stormClient.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// retryable reports whether a client asks again with the same key after this answer:
// the service was unavailable or slow, or the same key is still being served.
func retryable(r response) bool {
	switch r.status {
	case http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case http.StatusConflict:
		return bytes.Contains(r.body, []byte(payment.EINFLIGHT))
	}
	return false
}

// paymentRunsEndPaid waits until every run of the workflow that holds the payment has
// ended and requires each to end PAID and one of them to have granted the benefit and
// told the merchant. A notification whose hand-over was retried while a node was down
// can reach the workflow after the run that settled the payment has ended: the inbox
// then re-drives a run, which finds the payment PAID and its webhook sent, and ends.
func paymentRunsEndPaid(t *testing.T, workflowID, paymentNo string, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	query := fmt.Sprintf("WorkflowId = '%s' AND PaymentNo = '%s'", workflowID, paymentNo)
	for {
		resp, err := env.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		closed := err == nil && len(resp.Executions) > 0
		for _, e := range resp.GetExecutions() {
			closed = closed && e.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
		}
		if closed {
			settled := false
			for _, e := range resp.Executions {
				var st workflows.PaymentState
				if err := env.tc.GetWorkflow(ctx, workflowID, e.Execution.RunId).Get(ctx, &st); err != nil {
					t.Fatalf("workflow %s run %s of %s: %v", workflowID, e.Execution.RunId, paymentNo, err)
				}
				if st.Status != payment.StatusPaid {
					t.Errorf("workflow %s run %s of %s ended %s: %+v", workflowID, e.Execution.RunId, paymentNo, st.Status, st)
				}
				settled = settled || (st.BenefitGranted && st.WebhookSent)
			}
			if !settled {
				t.Errorf("workflow %s: no run of %s granted the benefit and sent the webhook (%d runs)", workflowID, paymentNo, len(resp.Executions))
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the runs of %s holding payment %s have not all ended: %v", workflowID, paymentNo, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestTemporalNodeKilledMidStorm runs paykit on a Temporal cluster of two server nodes on
// the same PostgreSQL, each with frontend, history, matching and worker, behind a TCP
// load balancer that paykit's API and worker dial. While merchants check out new orders
// (with Idempotency-Keys, asking again after an error or a timeout), buyers pay them at
// Alipay and merchants make partial refunds of paid payments, the second node is
// SIGKILLed (its history shards and task queue partitions move to the first) and brought
// back. Every checkout answered 201 must end with its one payment PAID once, one grant,
// one payment.paid event and webhook; every refund accepted must be SUCCEEDED once, at
// Alipay as in MySQL to the fen, with its refund.succeeded event and webhook; nothing is
// an anomaly and `paykit audit` finds nothing. The log gives the stall: the longest
// checkout, pay-to-PAID and refund-to-SUCCEEDED before the kill and after it.
func TestTemporalNodeKilledMidStorm(t *testing.T) {
	if env.temporalScriptEnv == nil {
		t.Skip("runs on the Temporal server on PostgreSQL: PAYKIT_E2E_TEMPORAL=postgres or postgres-mtls (scripts/test.sh)")
	}
	started := time.Now()
	node2, addr2 := startTemporalNode(t, "temporal-node2")
	lb := newTCPBalancer(t, env.temporalAddr, addr2)
	st := newNamedStack(t, "cluster", stackOptions{extraEnv: []string{"PAYKIT_TEMPORAL_ADDR=" + lb.addr}})
	tn := newTenant(t)
	clock := newStormClock()
	h := func(key string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + tn.apiKey, "Content-Type": "application/json", "Idempotency-Key": key}
	}

	var (
		mu       sync.Mutex
		orders   = map[string]string{} // order id -> payment_no, for every checkout answered 201
		refunds  = map[string]string{} // refund_no -> payment_no, for every refund accepted
		timedOut int                   // requests asked again after the client gave up on them
		refused  int                   // requests asked again after a 503, 504 or 409 in_flight
		payers   sync.WaitGroup
		checking sync.WaitGroup
	)
	// pay pays a payment as the buyer and waits until it is PAID.
	pay := func(no string) {
		at := time.Now()
		if r, err := stormCall(http.MethodPost, env.simURL+"/_sim/trades/"+no+"/pay", map[string]string{"Content-Type": "application/json"}, []byte(`{}`)); err != nil || r.status != http.StatusOK {
			t.Errorf("sim pay %s: %v HTTP %d %s", no, err, r.status, r.body)
			return
		}
		for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if p, err := env.store.GetPayment(context.Background(), no); err == nil && p.Status == payment.StatusPaid {
				clock.took("pay to PAID", at)
				return
			}
		}
		t.Errorf("payment %s not PAID 3m after the buyer paid", no)
	}
	// checkout creates an order's payment, asking again with the same key and body after
	// an error or a timeout; a quarter of the orders are sent twice more once answered, as
	// a client that lost the answer would. It returns the payment_no.
	checkout := func(id string, fen int64) string {
		key := "nodekill-" + id
		b, _ := json.Marshal(map[string]any{"order_id": id, "amount_fen": fen, "subject": "Node kill " + id, "method": "qr"})
		at := time.Now()
		var res checkoutResult
		for deadline := at.Add(2 * time.Minute); ; time.Sleep(250 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("checkout %s: no 201 in 2m", id)
				return ""
			}
			r, err := stormCall(http.MethodPost, st.apiURL+"/v1/payments", h(key), b)
			if err == nil && r.status == http.StatusCreated {
				if err := json.Unmarshal(r.body, &res); err != nil || res.PaymentNo == "" {
					t.Errorf("checkout %s: %v %s", id, err, r.body)
					return ""
				}
				break
			}
			if err == nil && !retryable(r) {
				t.Errorf("checkout %s: HTTP %d %s", id, r.status, r.body)
				return ""
			}
			mu.Lock()
			if err != nil {
				timedOut++
			} else {
				refused++
			}
			mu.Unlock()
		}
		clock.took("checkout", at)
		mu.Lock()
		orders[id] = res.PaymentNo
		again := len(orders)%4 == 0
		mu.Unlock()
		for i := 0; again && i < 2; i++ {
			if r, err := stormCall(http.MethodPost, st.apiURL+"/v1/payments", h(key), b); err == nil && r.status == http.StatusCreated {
				var dup checkoutResult
				if json.Unmarshal(r.body, &dup) != nil || dup.PaymentNo != res.PaymentNo {
					t.Errorf("checkout %s sent again: %s, first answer was payment %s", id, r.body, res.PaymentNo)
				}
			}
		}
		return res.PaymentNo
	}
	// refund asks for a partial refund of a paid payment, asking again with the same key
	// after an error or a timeout (and a quarter of them once more once accepted), and
	// waits until it is SUCCEEDED.
	refund := func(key, no string, fen int64) {
		b, _ := json.Marshal(map[string]any{"amount_fen": fen, "reason": "node kill storm"})
		at := time.Now()
		var r payment.Refund
		for deadline := at.Add(2 * time.Minute); ; time.Sleep(250 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("refund %s of %s: not accepted in 2m", key, no)
				return
			}
			resp, err := stormCall(http.MethodPost, st.apiURL+"/v1/payments/"+no+"/refunds", h(key), b)
			if err == nil && (resp.status == http.StatusCreated || resp.status == http.StatusOK) {
				if err := json.Unmarshal(resp.body, &r); err != nil || r.RefundNo == "" {
					t.Errorf("refund %s: %v %s", key, err, resp.body)
					return
				}
				break
			}
			if err == nil && !retryable(resp) {
				t.Errorf("refund %s of %s: HTTP %d %s", key, no, resp.status, resp.body)
				return
			}
			mu.Lock()
			if err != nil {
				timedOut++
			} else {
				refused++
			}
			mu.Unlock()
		}
		mu.Lock()
		if prev, ok := refunds[r.RefundNo]; ok {
			t.Errorf("refund %s accepted twice (payments %s and %s)", r.RefundNo, prev, no)
		}
		refunds[r.RefundNo] = no
		again := len(refunds)%4 == 0
		mu.Unlock()
		if again {
			if resp, err := stormCall(http.MethodPost, st.apiURL+"/v1/payments/"+no+"/refunds", h(key), b); err == nil && resp.status/100 == 2 {
				var dup payment.Refund
				if json.Unmarshal(resp.body, &dup) != nil || dup.RefundNo != r.RefundNo {
					t.Errorf("refund %s sent again: %s, first answer was refund %s", key, resp.body, r.RefundNo)
				}
			}
		}
		for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			got, err := env.store.GetRefund(context.Background(), tn.id, r.RefundNo)
			if err == nil && got.Status == payment.RefundSucceeded {
				clock.took("refund to SUCCEEDED", at)
				return
			}
			if err == nil && got.Status == payment.RefundFailed {
				t.Errorf("refund %s of %s FAILED: %+v", r.RefundNo, no, got)
				return
			}
		}
		t.Errorf("refund %s of %s not SUCCEEDED 3m after it was asked", r.RefundNo, no)
	}

	// The payments refunds are made of, paid on the whole cluster.
	pool := make([]string, 6)
	for i := range pool {
		checking.Go(func() {
			pool[i] = checkout(fmt.Sprintf("pool%d", i), 5000)
			if pool[i] != "" {
				pay(pool[i])
			}
		})
	}
	checking.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// The storm: two merchants check out new orders, whose buyers pay them as they are
	// answered, and two make partial refunds of the pool, each pausing half a second
	// between requests, until stop is closed.
	stop := make(chan struct{})
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	var storm sync.WaitGroup
	for g := range 2 {
		storm.Go(func() {
			for n := 0; !stopped(); n++ {
				if no := checkout(fmt.Sprintf("c%d-%03d", g, n), int64(100+n)); no != "" {
					payers.Go(func() { time.Sleep(200 * time.Millisecond); pay(no) })
				}
				time.Sleep(500 * time.Millisecond)
			}
		})
		storm.Go(func() {
			for n := 0; !stopped(); n++ {
				no := pool[(2*n+g)%len(pool)]
				checking.Go(func() { refund(fmt.Sprintf("nodekill-r%d-%03d", g, n), no, int64(10+n%7)) })
				time.Sleep(500 * time.Millisecond)
			}
		})
	}
	// Five seconds on the whole cluster, eight with node 2 killed, five as it comes back.
	time.Sleep(5 * time.Second)
	node2.kill()
	clock.kill()
	killedAt := time.Now()
	time.Sleep(8 * time.Second)
	if err := node2.run(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	time.Sleep(5 * time.Second)
	close(stop)
	storm.Wait()
	payers.Wait()
	checking.Wait()
	settled := time.Now()
	if t.Failed() {
		t.FailNow()
	}

	// Every order's run has ended PAID, granted and told the merchant.
	for id, no := range orders {
		paymentRunsEndPaid(t, payment.WorkflowID(tn.id, id), no, 3*time.Minute)
	}
	waitRefundWebhooks(t, tn.id, payment.EventRefundSucceeded, len(refunds), time.Minute)
	time.Sleep(time.Second) // late copies of the notifications and webhooks land

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
	for id, no := range orders {
		for _, c := range []struct {
			what      string
			got, want int
		}{
			{"payments", count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND order_id = ?", tn.id, id), 1},
			{"PAID payments", count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND order_id = ? AND status = 1", tn.id, id), 1},
			{"grants", count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", no), 1},
			{"payment.paid events", count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ? AND type = ?", no, payment.EventPaymentPaid), 1},
			{"undelivered events", count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ? AND delivered = 0", no), 0},
			{"distinct payment.paid webhooks", len(paidHooks[no]), 1},
		} {
			if c.got != c.want {
				t.Errorf("order %s (payment %s): %s = %d, want %d", id, no, c.what, c.got, c.want)
			}
		}
	}
	if n := count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ?", tn.id); n != len(orders) {
		t.Errorf("%d payments for %d orders answered 201", n, len(orders))
	}

	// Refunds: each accepted one SUCCEEDED once, and Alipay's ledger agrees with MySQL to
	// the fen on every trade.
	perPayment := map[string]int{}
	for _, no := range refunds {
		perPayment[no]++
	}
	if n := count(t, "SELECT COUNT(*) FROM refunds WHERE tenant_id = ?", tn.id); n != len(refunds) {
		t.Errorf("%d refund rows for %d refunds accepted", n, len(refunds))
	}
	if n := count(t, "SELECT COUNT(*) FROM refunds WHERE tenant_id = ? AND status = 1", tn.id); n != len(refunds) {
		t.Errorf("%d refunds SUCCEEDED of %d accepted", n, len(refunds))
	}
	if len(refundHooks) != len(refunds) {
		t.Errorf("merchant received %d distinct refund.succeeded webhooks for %d refunds", len(refundHooks), len(refunds))
	}
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
	simSucceeded := map[string]map[string]int64{} // payment_no -> out_request_no -> fen
	for _, sr := range simRows {
		if sr.State != "succeeded" {
			continue
		}
		if simSucceeded[sr.OutTradeNo] == nil {
			simSucceeded[sr.OutTradeNo] = map[string]int64{}
		}
		simSucceeded[sr.OutTradeNo][sr.OutRequestNo] += sr.RefundFen
	}
	refundedFen := int64(0)
	for _, no := range orders {
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
		var atAlipay int64
		for _, fen := range simSucceeded[no] {
			atAlipay += fen
		}
		if tr.RefundedFen != succeeded || atAlipay != succeeded || int64(p.Refunded) != succeeded {
			t.Errorf("payment %s: Alipay's trade refunded %d fen and its refunds %d, MySQL %d SUCCEEDED and refunded_fen %d",
				no, tr.RefundedFen, atAlipay, succeeded, p.Refunded)
		}
		if n := len(simSucceeded[no]); n != perPayment[no] {
			t.Errorf("payment %s: %d refunds at Alipay, %d accepted", no, n, perPayment[no])
		}
		if n := count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ? AND type = ?", no, payment.EventRefundSucceeded); n != perPayment[no] {
			t.Errorf("payment %s: %d refund.succeeded events for %d refunds", no, n, perPayment[no])
		}
		refundedFen += succeeded
	}
	if n := count(t, "SELECT COUNT(*) FROM payment_anomalies WHERE tenant_id = ?", tn.id); n != 0 {
		t.Errorf("%d anomalies recorded", n)
	}
	auditClean(t, st, started, tn.id)

	t.Logf("2 Temporal nodes behind a TCP balancer (connections per node %v); node 2 SIGKILLed %s into the storm and restarted %s later; "+
		"%d orders checked out and paid exactly once, %d partial refunds (%d fen) SUCCEEDED once at Alipay and in MySQL, audit clean; "+
		"%d requests asked again after the client gave up at 3s, %d after a 503, 504 or 409 in_flight; "+
		"%s; %s; %s; settled %s after the restart; in %s",
		lb.connections(), 5*time.Second, restarted.Sub(killedAt).Round(100*time.Millisecond),
		len(orders), len(refunds), refundedFen, timedOut, refused,
		clock.figures("checkout"), clock.figures("pay to PAID"), clock.figures("refund to SUCCEEDED"),
		settled.Sub(restarted).Round(100*time.Millisecond), time.Since(started).Round(time.Second))
}
