package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/paykit/paykit/payment"
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

// TestTemporalNodeKilledMidStorm runs paykit on a Temporal cluster of two server nodes on
// the same PostgreSQL, each with frontend, history, matching and worker, behind a TCP
// load balancer that paykit's API and worker dial. While the buyers pay, the second node
// is SIGKILLed (its history shards and task queue partitions move to the first) and
// brought back. Every order must still end with one payment, one PAID, one grant, one
// payment.paid event and one webhook, and `paykit audit` must find nothing. The log
// gives the stall: the longest time from a buyer's pay to its payment being PAID for the
// payments paid while the node was down or coming back.
func TestTemporalNodeKilledMidStorm(t *testing.T) {
	if env.temporalScriptEnv == nil {
		t.Skip("runs on the Temporal server on PostgreSQL: PAYKIT_E2E_TEMPORAL=postgres or postgres-mtls (scripts/test.sh)")
	}
	started := time.Now()
	node2, addr2 := startTemporalNode(t, "temporal-node2")
	lb := newTCPBalancer(t, env.temporalAddr, addr2)
	st := newNamedStack(t, "cluster", stackOptions{extraEnv: []string{"PAYKIT_TEMPORAL_ADDR=" + lb.addr}})
	tn := newTenant(t)

	const orders = 16
	ids := make([]string, orders)
	nos := make([]string, orders)
	var wg sync.WaitGroup
	for i := range orders {
		ids[i] = fmt.Sprintf("node%02d", i)
		body := order(ids[i], int64(100+i))
		body["method"] = "qr" // the trade exists at once, with no cashier to open
		nos[i] = mustCheckout(t, st, tn, "", body).PaymentNo
	}

	// paidIn records how long each payment took from the buyer's pay to PAID.
	paidIn := make([]time.Duration, orders)
	pay := func(i int) {
		at := time.Now()
		simPay(t, nos[i])
		waitStatus(t, nos[i], payment.StatusPaid, 3*time.Minute)
		paidIn[i] = time.Since(at)
	}
	// A quarter paid on the whole cluster; the node dies as the next quarter is paid, the
	// third quarter is paid with it down, and the last as it comes back.
	q := orders / 4
	for i := range q {
		wg.Go(func() { pay(i) })
	}
	wg.Wait()
	for i := q; i < 2*q; i++ {
		wg.Go(func() { pay(i) })
	}
	node2.kill()
	killedAt := time.Now()
	for i := 2 * q; i < 3*q; i++ {
		wg.Go(func() { pay(i) })
	}
	wg.Wait()
	if err := node2.run(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	for i := 3 * q; i < orders; i++ {
		wg.Go(func() { pay(i) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	for i := range orders {
		final := waitPaymentRunClosed(t, payment.WorkflowID(tn.id, ids[i]), nos[i], 3*time.Minute)
		if final.Status != payment.StatusPaid || !final.BenefitGranted || !final.WebhookSent {
			t.Errorf("order %s: workflow result %+v", ids[i], final)
		}
	}
	time.Sleep(time.Second) // late copies of the notifications land
	webhooks := map[string]map[string]bool{}
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
		for _, c := range []struct {
			what      string
			got, want int
		}{
			{"payments", count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND order_id = ?", tn.id, id), 1},
			{"PAID payments", count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND order_id = ? AND status = 1", tn.id, id), 1},
			{"grants", count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", no), 1},
			{"payment.paid events", count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ? AND type = ?", no, payment.EventPaymentPaid), 1},
			{"undelivered events", count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ? AND delivered = 0", no), 0},
			{"distinct payment.paid webhooks", len(webhooks[no]), 1},
		} {
			if c.got != c.want {
				t.Errorf("order %s (payment %s): %s = %d, want %d", id, no, c.what, c.got, c.want)
			}
		}
	}
	if n := count(t, "SELECT COUNT(*) FROM payment_anomalies WHERE tenant_id = ?", tn.id); n != 0 {
		t.Errorf("%d anomalies recorded", n)
	}
	auditClean(t, st, started, tn.id)

	var before, stall time.Duration
	for i := range orders {
		if i < q {
			before = max(before, paidIn[i])
		} else {
			stall = max(stall, paidIn[i])
		}
	}
	t.Logf("2 Temporal nodes behind a TCP balancer (connections per node %v); node 2 SIGKILLed with %d of %d paid and restarted %s later: "+
		"%d orders paid exactly once, audit clean; pay to PAID at most %s on the whole cluster, at most %s with the node killed or coming back; in %s",
		lb.connections(), q, orders, restarted.Sub(killedAt).Round(100*time.Millisecond), orders,
		before.Round(100*time.Millisecond), stall.Round(100*time.Millisecond), time.Since(started).Round(time.Second))
}
