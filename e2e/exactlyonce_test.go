package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/worker"
)

// simTrade reads the simulator's ledger entry of a trade.
func simTrade(t *testing.T, paymentNo string) map[string]any {
	t.Helper()
	r := do(t, http.MethodGet, env.simURL+"/_sim/trades/"+paymentNo, nil, nil)
	if r.status != http.StatusOK {
		t.Fatalf("sim trade %s: HTTP %d %s", paymentNo, r.status, r.body)
	}
	var tr map[string]any
	if err := json.Unmarshal(r.body, &tr); err != nil {
		t.Fatal(err)
	}
	return tr
}

// pauseOtherSweepers pauses the sweeper schedules of every other stack (they share the
// database and would re-drive this test's payments with their own settings) until the
// test ends.
func pauseOtherSweepers(t *testing.T, keep *stack) {
	t.Helper()
	pauseOthers(t, "paykit-sweeper-", worker.SweeperScheduleID(keep.taskQueue))
}

// pauseOthers pauses every schedule whose ID starts with prefix but keep until the test
// ends.
func pauseOthers(t *testing.T, prefix, keep string) {
	t.Helper()
	ctx := context.Background()
	sc := env.tc.ScheduleClient()
	it, err := sc.List(ctx, client.ScheduleListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(e.ID, prefix) || e.ID == keep {
			continue
		}
		h := sc.GetHandle(ctx, e.ID)
		if err := h.Pause(ctx, client.SchedulePauseOptions{Note: t.Name()}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Unpause(context.Background(), client.ScheduleUnpauseOptions{}) })
	}
	time.Sleep(500 * time.Millisecond) // let a run that was already going finish
}

// neverClosed fails if the payment was ever closed locally: a CLOSED row, or a
// payment.closed event in the outbox.
func neverClosed(t *testing.T, paymentNo string) {
	t.Helper()
	if n := count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ? AND type = 'payment.closed'", paymentNo); n != 0 {
		t.Fatalf("payment %s was closed locally (%d payment.closed events) while Alipay held the money", paymentNo, n)
	}
}

// A payment whose workflow was terminated and that the buyer then paid at Alipay must end
// PAID: the run that adopts it is refused when it opens the trade again (a precreate of a
// paid trade answers ACQ.TRADE_HAS_SUCCESS; a page payment past its expiry is refused
// before it is sent), and that refusal must lead to Alipay's word, not to a local close.
func TestTerminatedPaymentPaidAtAlipayIsNeverClosed(t *testing.T) {
	t.Run("qr re-driven by the notification", func(t *testing.T) {
		st := shared(t)
		tn := newTenant(t)
		body := order("rt1", 100)
		body["method"] = "qr"
		res := mustCheckout(t, st, tn, "", body)
		if err := env.tc.TerminateWorkflow(context.Background(), payment.WorkflowID(tn.id, "rt1"), "", "terminated by hand"); err != nil {
			t.Fatal(err)
		}
		simPay(t, res.PaymentNo)
		p := waitStatus(t, res.PaymentNo, payment.StatusPaid, 60*time.Second)
		neverClosed(t, res.PaymentNo)
		if tr := simTrade(t, res.PaymentNo); tr["trade_status"] != "TRADE_SUCCESS" {
			t.Fatalf("simulator ledger: %v", tr)
		}
		t.Logf("terminated QR payment paid at Alipay: re-driven run marked %s PAID (trade %s), never closed", p.PaymentNo, p.TradeNo)
	})
	t.Run("page re-driven by the sweeper after expiry", func(t *testing.T) {
		resetFaults(t)
		// The sweeper's default: it looks at payments pending for TTL + 2 × reconcile, so
		// every re-drive comes after the payment's expiry.
		st := newStack(t, stackOptions{paymentTTL: 4 * time.Second, extraEnv: []string{"PAYKIT_SWEEP_STALE_AFTER=6s"}})
		pauseOtherSweepers(t, st)
		tn := newTenant(t)
		simFault(t, "/notifications", map[string]any{"drop_next": 1000})
		res := mustCheckout(t, st, tn, "", order("rt2", 200))
		openCashier(t, res.PayURL)
		if err := env.tc.TerminateWorkflow(context.Background(), payment.WorkflowID(tn.id, "rt2"), "", "terminated by hand"); err != nil {
			t.Fatal(err)
		}
		simPay(t, res.PaymentNo)
		p := waitStatus(t, res.PaymentNo, payment.StatusPaid, 60*time.Second)
		neverClosed(t, res.PaymentNo)
		if !p.UpdatedAt.After(p.ExpireAt) {
			t.Fatalf("payment %+v: want it re-driven and paid after its expiry", p)
		}
		t.Logf("terminated page payment paid at Alipay: the sweeper's run after expiry marked it PAID, never closed")
	})
}

// A paid order is final: the same checkout again, with another Idempotency-Key or none (a
// second browser tab), is answered 409 order_already_paid with the paid payment, and
// nothing is charged twice. Re-purchase is an explicit opt-in.
func TestPaidOrderIsNotChargedAgain(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	res := mustCheckout(t, st, tn, "dbl1-first", order("dbl1", 990))
	openCashier(t, res.PayURL)
	simPay(t, res.PaymentNo)
	waitStatus(t, res.PaymentNo, payment.StatusPaid, 30*time.Second)
	waitWorkflowClosed(t, payment.WorkflowID(tn.id, "dbl1"), 30*time.Second)
	for _, key := range []string{"", "dbl1-second-tab", "dbl1-third-try"} {
		r := st.checkout(t, tn, key, order("dbl1", 990))
		var prob struct {
			Code    string          `json:"code"`
			Payment payment.Payment `json:"payment"`
		}
		r.json(t, &prob)
		if r.status != http.StatusConflict || prob.Code != payment.EORDERPAID || prob.Payment.PaymentNo != res.PaymentNo ||
			prob.Payment.Status != payment.StatusPaid {
			t.Fatalf("checkout of a paid order with key %q: HTTP %d %s", key, r.status, r.body)
		}
	}
	if n := count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND order_id = 'dbl1'", tn.id); n != 1 {
		t.Fatalf("payments for the paid order = %d, want 1", n)
	}
	again := order("dbl1", 990)
	again["repurchase"] = true
	second := mustCheckout(t, st, tn, "dbl1-repurchase", again)
	if second.PaymentNo == res.PaymentNo {
		t.Fatal("re-purchase returned the paid payment")
	}
	t.Logf("paid order answered 409 order_already_paid three times; re-purchase opened %s", second.PaymentNo)
}

// A closed payment's run may still be delivering its webhook to a merchant that is down.
// A new checkout of the order must not get that dead payment back: the old run makes way
// and the checkout opens a new pending payment at once.
func TestCheckoutAfterCloseOpensANewPaymentWhileTheOldWebhookRetries(t *testing.T) {
	st := newStack(t, stackOptions{paymentTTL: 2 * time.Second, extraEnv: []string{
		"PAYKIT_WEBHOOK_MAX_ATTEMPTS=50", "PAYKIT_WEBHOOK_INITIAL_INTERVAL=2s", "PAYKIT_WEBHOOK_MAX_INTERVAL=5s"}})
	tn := newTenant(t)
	err := env.store.UpsertTenant(context.Background(), payment.Tenant{ID: tn.id, Name: t.Name(), APIKeyHash: api.HashAPIKey(tn.apiKey),
		NotifyURL: env.simURL + "/merchant-is-down", WebhookSecret: tn.secret, AlipayAppID: appID, AlipaySeller: sellerID})
	if err != nil {
		t.Fatal(err)
	}
	first := mustCheckout(t, st, tn, "", order("cl1", 300))
	waitStatus(t, first.PaymentNo, payment.StatusClosed, 30*time.Second)
	start := time.Now()
	second := mustCheckout(t, st, tn, "", order("cl1", 300))
	if second.PaymentNo == first.PaymentNo || second.Status != payment.StatusPending || second.PayURL == "" {
		t.Fatalf("checkout after close answered %+v, want a new pending payment", second)
	}
	t.Logf("new payment %s opened %s after the old one closed, its webhook still undelivered", second.PaymentNo, time.Since(start).Round(time.Millisecond))
}

// A PAID payment whose grant keeps failing, and whose run is then gone (terminated right
// after MarkPaid, or its local activity gave up), still gets exactly one grant: the
// sweeper repairs it once the grant works again.
func TestLostGrantIsRepairedBySweeper(t *testing.T) {
	resetFaults(t)
	st := newStack(t, stackOptions{extraEnv: []string{"PAYKIT_SWEEP_GRANT_GRACE=2s"}})
	tn := newTenant(t)
	// Break the grant for this tenant only, the way a full disk or a bad migration would.
	trigger := "bg_fail_" + tn.id
	if _, err := env.db.Exec("CREATE TRIGGER " + trigger + " BEFORE INSERT ON benefit_grants FOR EACH ROW " +
		"IF NEW.tenant_id = '" + tn.id + "' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'grants are broken'; END IF"); err != nil {
		t.Fatal(err)
	}
	dropped := false
	drop := func() {
		if !dropped {
			dropped = true
			if _, err := env.db.Exec("DROP TRIGGER " + trigger); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(drop)
	body := order("gr1", 700)
	body["method"] = "qr"
	res := mustCheckout(t, st, tn, "", body)
	simPay(t, res.PaymentNo)
	waitStatus(t, res.PaymentNo, payment.StatusPaid, 30*time.Second)
	// The run is still retrying its grant; it ends the way a terminate or a long outage
	// would end it, with no grant.
	time.Sleep(time.Second)
	if err := env.tc.TerminateWorkflow(context.Background(), payment.WorkflowID(tn.id, "gr1"), "", "gone before its grant"); err != nil {
		t.Fatal(err)
	}
	if n := count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", res.PaymentNo); n != 0 {
		t.Fatalf("%d grants while grants were broken", n)
	}
	drop()
	deadline := time.Now().Add(30 * time.Second)
	for count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", res.PaymentNo) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the sweeper did not repair the lost grant")
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // a few more sweeps
	if n := count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", res.PaymentNo); n != 1 {
		t.Fatalf("grants = %d, want exactly 1", n)
	}
	t.Logf("grant of %s lost with its run and repaired once by the sweeper", res.PaymentNo)
}
