package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/payment"
)

// A stack on a Redis Cluster of three masters, one of which is SIGKILLed halfway through a
// storm of duplicate checkouts (no key, a shared key, keys of their own) and duplicated
// notifications. Redis is a fast path: the orders whose locks, keys and cached answers lived
// on the dead master go to MySQL, and every order still ends with one payment, PAID once,
// one grant, one payment.paid event and one webhook.
func TestRedisClusterMasterKilledMidStorm(t *testing.T) {
	resetFaults(t)
	c, err := testenv.StartRedisCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	st := newStack(t, stackOptions{redisAddr: c.Addr()})
	tn := newTenant(t)
	simFault(t, "/notifications", map[string]any{"copies": 5})
	const orders, copies = 12, 8
	nos := make([]string, orders)
	var liveBefore int // paykit keys on the masters that live, right before the kill
	for i := range orders {
		if i == orders/2 {
			// Redis was used, and the master about to die holds some of it.
			if n := masterKeys(t, c.Addrs[0]); n == 0 {
				t.Fatalf("the master at %s holds no paykit key after %d orders: the test would kill nothing that matters", c.Addrs[0], i)
			}
			liveBefore = masterKeys(t, c.Addrs[1]) + masterKeys(t, c.Addrs[2])
			if err := c.Kill(0); err != nil {
				t.Fatal(err)
			}
			t.Logf("killed the master at %s after %d orders", c.Addrs[0], i)
		}
		id := fmt.Sprintf("rc%d", i)
		shared := "rc-shared-" + id + "-" + randHex(4)
		nos[i] = checkoutsAtOnce(t, st, tn, copies, order(id, int64(100+i)), func(j int) string {
			switch j % 3 {
			case 0:
				return ""
			case 1:
				return shared
			}
			return fmt.Sprintf("rc-own-%s-%d-%s", id, j, randHex(3))
		}, true)
		// The replay of the shared key answers as the first did, Redis or not.
		res := mustCheckout(t, st, tn, shared, order(id, int64(100+i)))
		if res.PaymentNo != nos[i] {
			t.Fatalf("order %s: the shared key replayed payment %s, the storm got %s", id, res.PaymentNo, nos[i])
		}
		openCashier(t, res.PayURL)
		simPay(t, nos[i])
	}
	for i, no := range nos {
		id := fmt.Sprintf("rc%d", i)
		if p := waitStatus(t, no, payment.StatusPaid, 60*time.Second); p.TradeNo == "" {
			t.Fatalf("order %s: paid without a trade_no: %+v", id, p)
		}
		final := waitWorkflowClosed(t, payment.WorkflowID(tn.id, id), 60*time.Second)
		if final.Status != payment.StatusPaid || !final.BenefitGranted || !final.WebhookSent {
			t.Fatalf("order %s: workflow result %+v", id, final)
		}
	}
	time.Sleep(500 * time.Millisecond) // let the last copies of the notifications land
	for i, no := range nos {
		id := fmt.Sprintf("rc%d", i)
		payments := count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND order_id = ?", tn.id, id)
		paid := count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND order_id = ? AND status = 1", tn.id, id)
		grants := count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", no)
		events := count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ? AND type = ?", no, payment.EventPaymentPaid)
		if payments != 1 || paid != 1 || grants != 1 || events != 1 {
			t.Errorf("order %s: payments=%d paid=%d grants=%d payment.paid events=%d, want 1 each", id, payments, paid, grants, events)
		}
	}
	ids := map[string]int{}
	for _, h := range env.merchant.received(tn.id) {
		ids[h.eventID]++
	}
	if len(ids) != orders {
		t.Errorf("webhooks for %d distinct events, want %d", len(ids), orders)
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("event %s delivered %d times", id, n)
		}
	}
	// The live masters kept serving: the answers cached after the kill are there.
	if n := masterKeys(t, c.Addrs[1]) + masterKeys(t, c.Addrs[2]); n <= liveBefore {
		t.Errorf("the live masters hold %d paykit keys, %d before the kill: Redis was not used after it", n, liveBefore)
	}
	// Ready, with Redis degraded: a fast path down is not a dependency down.
	r := do(t, http.MethodGet, st.apiAdminURL+"/readyz", nil, nil)
	var ready struct {
		Checks map[string]string `json:"checks"`
	}
	r.json(t, &ready)
	if r.status != http.StatusOK || ready.Checks["redis"] != "degraded" {
		t.Errorf("readyz with a master down: HTTP %d %s, want 200 with redis degraded", r.status, r.body)
	}
	t.Logf("%d orders × %d checkouts and 5 copies of every notification on a 3-master cluster, one master killed halfway: one payment, PAID once, one grant, one event and one webhook each", orders, copies)
}

// masterKeys counts the paykit keys one master of a cluster holds.
func masterKeys(t *testing.T, addr string) int {
	t.Helper()
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	defer rdb.Close()
	keys, err := rdb.Keys(context.Background(), "paykit:*").Result()
	if err != nil {
		t.Fatalf("keys on %s: %v", addr, err)
	}
	return len(keys)
}
