package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
)

// paidPayment checks out an order, pays it at the simulator and waits until the payment
// is PAID and its workflow has ended.
func paidPayment(t *testing.T, st *stack, tn tenant, orderID string, fen int64) string {
	t.Helper()
	res := mustCheckout(t, st, tn, "", order(orderID, fen))
	openCashier(t, res.PayURL)
	simPay(t, res.PaymentNo)
	waitStatus(t, res.PaymentNo, payment.StatusPaid, 30*time.Second)
	waitWorkflowClosed(t, payment.WorkflowID(tn.id, orderID), 30*time.Second)
	return res.PaymentNo
}

// postRefund asks for a refund of a payment.
func (st *stack) postRefund(t testing.TB, tn tenant, paymentNo, idemKey string, body map[string]any) response {
	t.Helper()
	b, _ := json.Marshal(body)
	h := map[string]string{"Authorization": "Bearer " + tn.apiKey, "Content-Type": "application/json"}
	if idemKey != "" {
		h["Idempotency-Key"] = idemKey
	}
	return do(t, http.MethodPost, st.apiURL+"/v1/payments/"+paymentNo+"/refunds", h, b)
}

// waitRefund polls MySQL until the refund reaches want.
func waitRefund(t *testing.T, tenantID, refundNo string, want payment.RefundStatus, d time.Duration) payment.Refund {
	t.Helper()
	deadline := time.Now().Add(d)
	var (
		r   payment.Refund
		err error
	)
	for time.Now().Before(deadline) {
		r, err = env.store.GetRefund(context.Background(), tenantID, refundNo)
		if err == nil && r.Status == want {
			return r
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("refund %s: status %s (err %v), want %s after %s", refundNo, r.Status, err, want, d)
	return r
}

// simRefund is one refund in the simulator's ledger.
type simRefund struct {
	OutTradeNo   string    `json:"out_trade_no"`
	OutRequestNo string    `json:"out_request_no"`
	RefundFen    int64     `json:"refund_fen"`
	Replays      int       `json:"replays"`
	State        string    `json:"state"`
	CreatedAt    time.Time `json:"created_at"`
}

// simRefunds returns the simulator's refunds (fund changes) of one trade.
func simRefunds(t *testing.T, paymentNo string) []simRefund {
	t.Helper()
	var all []simRefund
	do(t, http.MethodGet, env.simURL+"/_sim/refunds", nil, nil).json(t, &all)
	var out []simRefund
	for _, r := range all {
		if r.OutTradeNo == paymentNo {
			out = append(out, r)
		}
	}
	return out
}

// refundWebhooks returns the tenant's refund webhooks of one type.
func refundWebhooks(tenantID, typ string) []webhook {
	var out []webhook
	for _, w := range env.merchant.received(tenantID) {
		if w.typ == typ {
			out = append(out, w)
		}
	}
	return out
}

// waitRefundWebhooks waits until the tenant has received n webhooks of the type.
func waitRefundWebhooks(t *testing.T, tenantID, typ string, n int, d time.Duration) []webhook {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		hooks := refundWebhooks(tenantID, typ)
		if len(hooks) >= n || time.Now().After(deadline) {
			return hooks
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestRefundConcurrentIdenticalRequests(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	no := paidPayment(t, st, tn, "r1001", 990)
	const n = 50
	key := "refund-same-" + randHex(6)
	bodies := make([]string, n)
	statuses := make([]int, n)
	conflicts := 0
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			for range 200 {
				r := st.postRefund(t, tn, no, key, map[string]any{"amount_fen": 300, "reason": "damaged"})
				if r.status == http.StatusConflict {
					mu.Lock()
					conflicts++
					mu.Unlock()
					time.Sleep(50 * time.Millisecond)
					continue
				}
				statuses[i], bodies[i] = r.status, string(r.body)
				return
			}
		})
	}
	wg.Wait()
	for i := range n {
		if statuses[i] != http.StatusCreated || bodies[i] != bodies[0] {
			t.Fatalf("response %d: HTTP %d %s\nfirst: %s", i, statuses[i], bodies[i], bodies[0])
		}
	}
	var r payment.Refund
	if err := json.Unmarshal([]byte(bodies[0]), &r); err != nil {
		t.Fatal(err)
	}
	final := waitRefund(t, tn.id, r.RefundNo, payment.RefundSucceeded, 60*time.Second)
	if c := count(t, "SELECT COUNT(*) FROM refunds WHERE tenant_id = ? AND payment_no = ?", tn.id, no); c != 1 {
		t.Fatalf("refunds = %d, want 1", c)
	}
	sim := simRefunds(t, no)
	if len(sim) != 1 || sim[0].RefundFen != 300 || sim[0].OutRequestNo != final.OutRequestNo {
		t.Fatalf("simulator refunds = %+v, want one of 300 fen with %s", sim, final.OutRequestNo)
	}
	p, _ := env.store.GetPayment(context.Background(), no)
	if p.Refunded != 300 || p.RefundState != payment.RefundStatePartial || p.Status != payment.StatusPaid {
		t.Fatalf("payment refunded_fen %d, refund_state %s, status %s", p.Refunded, p.RefundState, p.Status)
	}
	hooks := waitRefundWebhooks(t, tn.id, payment.EventRefundSucceeded, 1, 20*time.Second)
	if len(hooks) != 1 || !hooks[0].verified {
		t.Fatalf("refund webhooks = %+v, want one verified", hooks)
	}
	var body map[string]any
	if err := json.Unmarshal(hooks[0].body, &body); err != nil || body["refund_no"] != r.RefundNo || body["amount_fen"] != float64(300) {
		t.Fatalf("webhook body %s (%v)", hooks[0].body, err)
	}
	// The API shows the refund and the payment's refunded total.
	auth := map[string]string{"Authorization": "Bearer " + tn.apiKey}
	var list struct {
		RefundedFen int64            `json:"refunded_fen"`
		RefundState string           `json:"refund_state"`
		Refunds     []payment.Refund `json:"refunds"`
	}
	do(t, http.MethodGet, st.apiURL+"/v1/payments/"+no+"/refunds", auth, nil).json(t, &list)
	if list.RefundedFen != 300 || list.RefundState != "partial" || len(list.Refunds) != 1 || list.Refunds[0].Status != payment.RefundSucceeded {
		t.Fatalf("GET refunds = %+v", list)
	}
	if g := do(t, http.MethodGet, st.apiURL+"/v1/refunds/"+r.RefundNo, auth, nil); g.status != http.StatusOK {
		t.Fatalf("GET refund: HTTP %d %s", g.status, g.body)
	}
	// Another tenant can neither see nor refund it.
	other := newTenant(t)
	if g := do(t, http.MethodGet, st.apiURL+"/v1/refunds/"+r.RefundNo, map[string]string{"Authorization": "Bearer " + other.apiKey}, nil); g.status != http.StatusNotFound {
		t.Fatalf("other tenant GET refund: HTTP %d %s", g.status, g.body)
	}
	if g := st.postRefund(t, other, no, "", map[string]any{"amount_fen": 100, "refund_no": "other-tenant"}); g.status != http.StatusNotFound {
		t.Fatalf("other tenant refund: HTTP %d %s", g.status, g.body)
	}
	wf := waitRefundWorkflow(t, payment.RefundWorkflowID(tn.id, r.RefundNo))
	if wf.Status != payment.RefundSucceeded || !wf.FundChange || !wf.WebhookSent {
		t.Fatalf("refund workflow result %+v", wf)
	}
	t.Logf("%d identical refund requests: %d identical 201 bodies (%d in-flight 409s retried), 1 refund row, 1 fund change at the simulator, 1 webhook",
		n, n, conflicts)
}

// waitRefundWorkflow waits for a refund's workflow to end and returns its result.
func waitRefundWorkflow(t *testing.T, workflowID string) workflows.RefundState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var st workflows.RefundState
	if err := env.tc.GetWorkflow(ctx, workflowID, "").Get(ctx, &st); err != nil {
		t.Fatalf("workflow %s: %v", workflowID, err)
	}
	return st
}

func TestRefundConcurrentPartialRefundsNeverExceedThePayment(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	no := paidPayment(t, st, tn, "r2001", 990)
	const n = 20
	statuses := make([]int, n)
	codes := make([]string, n)
	refundNos := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := st.postRefund(t, tn, no, fmt.Sprintf("refund-part-%02d-%s", i, randHex(4)), map[string]any{"amount_fen": 100})
			var v struct {
				Code     string `json:"code"`
				RefundNo string `json:"refund_no"`
			}
			_ = json.Unmarshal(r.body, &v)
			statuses[i], codes[i], refundNos[i] = r.status, v.Code, v.RefundNo
		})
	}
	wg.Wait()
	created, exceeded := 0, 0
	for i := range n {
		switch {
		case statuses[i] == http.StatusCreated:
			created++
		case statuses[i] == http.StatusConflict && codes[i] == payment.EREFUNDEXCEEDS:
			exceeded++
		default:
			t.Fatalf("request %d: HTTP %d %s", i, statuses[i], codes[i])
		}
	}
	if created != 9 || exceeded != 11 {
		t.Fatalf("created %d, exceeded %d; want 9 and 11 (990 fen holds nine refunds of 100)", created, exceeded)
	}
	for i := range n {
		if statuses[i] == http.StatusCreated {
			waitRefund(t, tn.id, refundNos[i], payment.RefundSucceeded, 90*time.Second)
		}
	}
	var simTotal int64
	for _, r := range simRefunds(t, no) {
		simTotal += r.RefundFen
	}
	p, _ := env.store.GetPayment(context.Background(), no)
	tr := simTrade(t, no)
	if simTotal != 900 || p.Refunded != 900 || tr["refunded_fen"] != float64(900) || tr["trade_status"] != "TRADE_SUCCESS" {
		t.Fatalf("simulator refunded %d (trade %v %v), MySQL %d; want 900 of 990 on both sides", simTotal, tr["refunded_fen"], tr["trade_status"], p.Refunded)
	}
	if p.Status != payment.StatusPaid || p.RefundState != payment.RefundStatePartial {
		t.Fatalf("payment %s, refund_state %s", p.Status, p.RefundState)
	}
	t.Logf("%d concurrent 100-fen refunds of 990 fen: %d accepted, %d refund_exceeds_remaining; 900 fen refunded at the simulator and in MySQL", n, created, exceeded)
}

func TestRefundThroughAlipayFaults(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	no := paidPayment(t, st, tn, "r3001", 990)
	// The refund first meets 3 ACQ.SYSTEM_ERRORs, then a hang after Alipay has moved the
	// money (its answer is lost), then a 5xx: the outcome stays unknown three ways.
	const method = "alipay.trade.refund"
	simFault(t, "/gateway", map[string]any{"mode": "system_error", "count": 3, "method": method})
	simFault(t, "/gateway", map[string]any{"mode": "hang", "count": 1, "method": method, "after_processing": true})
	simFault(t, "/gateway", map[string]any{"mode": "http_error", "count": 1, "status": 502, "method": method})
	r := st.postRefund(t, tn, no, "refund-faults-"+randHex(4), map[string]any{"amount_fen": 450, "refund_no": "faulty-1"})
	if r.status != http.StatusCreated {
		t.Fatalf("refund: HTTP %d %s", r.status, r.body)
	}
	waitRefund(t, tn.id, "faulty-1", payment.RefundSucceeded, 120*time.Second)
	wf := waitRefundWorkflow(t, payment.RefundWorkflowID(tn.id, "faulty-1"))
	sim := simRefunds(t, no)
	if len(sim) != 1 || sim[0].RefundFen != 450 || sim[0].Replays < 1 {
		t.Fatalf("simulator refunds = %+v, want one fund change of 450 fen, replayed", sim)
	}
	p, _ := env.store.GetPayment(context.Background(), no)
	if p.Refunded != 450 || wf.Status != payment.RefundSucceeded || wf.FundChange || wf.ConfirmedBy != "query" {
		t.Fatalf("refunded %d, workflow %+v; want 450, and success from a fund_change N replay", p.Refunded, wf)
	}
	var left struct {
		Gateway []map[string]any `json:"gateway"`
	}
	do(t, http.MethodGet, env.simURL+"/_sim/faults", nil, nil).json(t, &left)
	if len(left.Gateway) != 0 {
		t.Fatalf("injected faults not all hit: %+v", left.Gateway)
	}
	t.Logf("refund through 3 ACQ.SYSTEM_ERROR, a hang after processing and a 502: 1 fund change at the simulator (%d replays), answered fund_change N and confirmed by the refund query in round %d",
		sim[0].Replays, wf.Rounds)
}

func TestRefundWorkerKilledMidRefund(t *testing.T) {
	resetFaults(t)
	st := newStack(t, stackOptions{})
	tn := newTenant(t)
	no := paidPayment(t, st, tn, "r4001", 990)
	// Alipay moves the money and then holds the answer; the worker dies while it waits.
	simFault(t, "/gateway", map[string]any{"mode": "hang", "count": 1, "method": "alipay.trade.refund", "after_processing": true})
	r := st.postRefund(t, tn, no, "refund-kill-"+randHex(4), map[string]any{"amount_fen": 990, "refund_no": "kill-1"})
	if r.status != http.StatusCreated {
		t.Fatalf("refund: HTTP %d %s", r.status, r.body)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(simRefunds(t, no)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the simulator never received the refund")
		}
		time.Sleep(50 * time.Millisecond)
	}
	st.worker.kill()
	if rf, _ := env.store.GetRefund(context.Background(), tn.id, "kill-1"); rf.Status != payment.RefundPending {
		t.Fatalf("refund %s with the worker killed mid-call", rf.Status)
	}
	st.restartWorker(t)
	waitRefund(t, tn.id, "kill-1", payment.RefundSucceeded, 120*time.Second)
	wf := waitRefundWorkflow(t, payment.RefundWorkflowID(tn.id, "kill-1"))
	sim := simRefunds(t, no)
	if len(sim) != 1 || sim[0].RefundFen != 990 {
		t.Fatalf("simulator refunds = %+v, want one of 990 fen", sim)
	}
	p, _ := env.store.GetPayment(context.Background(), no)
	if p.Refunded != 990 || p.RefundState != payment.RefundStateFull || p.Status != payment.StatusPaid {
		t.Fatalf("payment refunded %d, %s, %s", p.Refunded, p.RefundState, p.Status)
	}
	hooks := waitRefundWebhooks(t, tn.id, payment.EventRefundSucceeded, 1, 20*time.Second)
	if len(hooks) < 1 {
		t.Fatal("no refund.succeeded webhook")
	}
	for _, h := range hooks {
		if h.eventID != hooks[0].eventID {
			t.Fatalf("webhooks with different event ids: %+v", hooks)
		}
	}
	t.Logf("worker SIGKILLed while Alipay held the answer of a committed refund: the restarted worker converged on 1 fund change (%d replays), fund_change %v, confirmed by %s",
		sim[0].Replays, wf.FundChange, wf.ConfirmedBy)
}

func TestRefundFullRefundClosesTheTradeAndKeepsThePaymentPaid(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	no := paidPayment(t, st, tn, "r5001", 990)
	// Part twice, then the rest, as docs/integrate/refunds.md shows.
	for i, fen := range []int64{300, 200, 490} {
		r := st.postRefund(t, tn, no, fmt.Sprintf("refund-full-%d-%s", i, randHex(4)), map[string]any{"amount_fen": fen, "refund_no": fmt.Sprintf("full-%d", i)})
		if r.status != http.StatusCreated {
			t.Fatalf("refund %d: HTTP %d %s", i, r.status, r.body)
		}
		waitRefund(t, tn.id, fmt.Sprintf("full-%d", i), payment.RefundSucceeded, 60*time.Second)
	}
	if r := st.postRefund(t, tn, no, "", map[string]any{"amount_fen": 1, "refund_no": "one-fen-more"}); r.status != http.StatusConflict {
		t.Fatalf("refund past the amount: HTTP %d %s", r.status, r.body)
	}
	tr := simTrade(t, no)
	if tr["trade_status"] != "TRADE_CLOSED" || tr["refunded_fen"] != float64(990) {
		t.Fatalf("simulator trade %v refunded %v, want TRADE_CLOSED and 990", tr["trade_status"], tr["refunded_fen"])
	}
	// The simulator's refund notifications (TRADE_SUCCESS twice, then TRADE_CLOSED) reach
	// the callback; none of them may touch the PAID payment.
	deadline := time.Now().Add(20 * time.Second)
	for count(t, "SELECT COUNT(*) FROM channel_notifications WHERE payment_no = ?", no) < 4 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	p, _ := env.store.GetPayment(context.Background(), no)
	if p.Status != payment.StatusPaid || p.Refunded != 990 || p.RefundState != payment.RefundStateFull {
		t.Fatalf("payment %s refunded %d %s; want PAID, 990, full", p.Status, p.Refunded, p.RefundState)
	}
	auth := map[string]string{"Authorization": "Bearer " + tn.apiKey}
	var got payment.Payment
	do(t, http.MethodGet, st.apiURL+"/v1/payments/"+no, auth, nil).json(t, &got)
	if got.Status != payment.StatusPaid || got.Refunded != 990 || got.RefundState != "full" {
		t.Fatalf("GET payment %+v", got)
	}
	sim := simRefunds(t, no)
	if len(sim) != 3 {
		t.Fatalf("simulator refunds = %d, want 3", len(sim))
	}
	// Each refund's time is Alipay's gmt_refund_pay (to the second), not the local clock.
	for i, sr := range sim {
		r, err := env.store.GetRefund(context.Background(), tn.id, fmt.Sprintf("full-%d", i))
		if err != nil || !r.RefundedAt.Equal(sr.CreatedAt.Truncate(time.Second)) {
			t.Fatalf("refund full-%d: refunded_at %v (%v), want Alipay's %v", i, r.RefundedAt, err, sr.CreatedAt.Truncate(time.Second))
		}
	}
	if hooks := waitRefundWebhooks(t, tn.id, payment.EventRefundSucceeded, 3, 20*time.Second); len(hooks) != 3 {
		t.Fatalf("refund webhooks = %d, want 3", len(hooks))
	}
	t.Logf("refunds of 300, 200 and 490 fen: simulator TRADE_CLOSED with 990 refunded, payment PAID with refund_state full, 1 fen more refused")
}

func TestRefundNotificationsConcurrentAndBeforeTheAnswer(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	no := paidPayment(t, st, tn, "r6001", 990)
	// Alipay commits the refund and holds its answer; meanwhile its refund notification
	// arrives as 20 concurrent copies.
	simFault(t, "/notifications", map[string]any{"copies": 20})
	simFault(t, "/gateway", map[string]any{"mode": "hang", "count": 1, "method": "alipay.trade.refund", "after_processing": true})
	r := st.postRefund(t, tn, no, "refund-notify-"+randHex(4), map[string]any{"amount_fen": 500, "refund_no": "notified-1"})
	if r.status != http.StatusCreated {
		t.Fatalf("refund: HTTP %d %s", r.status, r.body)
	}
	rf := waitRefund(t, tn.id, "notified-1", payment.RefundSucceeded, 90*time.Second)
	waitRefundWorkflow(t, payment.RefundWorkflowID(tn.id, "notified-1"))
	// The simulator sent the copies; the callback kept one (notify_id dedupe).
	var attempts []struct {
		Kind         string `json:"kind"`
		Acknowledged bool   `json:"acknowledged"`
	}
	do(t, http.MethodGet, env.simURL+"/_sim/notifications?out_trade_no="+no, nil, nil).json(t, &attempts)
	copies, acked := 0, 0
	for _, a := range attempts {
		if a.Kind == "refund" {
			copies++
			if a.Acknowledged {
				acked++
			}
		}
	}
	if copies < 20 || acked == 0 {
		t.Fatalf("refund notification copies sent = %d (acknowledged %d), want 20", copies, acked)
	}
	if n := count(t, "SELECT COUNT(*) FROM channel_notifications WHERE payment_no = ? AND raw_payload LIKE ?", no, "%out_biz_no="+rf.OutRequestNo+"%"); n != 1 {
		t.Fatalf("refund notifications recorded = %d, want 1 (deduped on notify_id)", n)
	}
	if n := count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ? AND type = ?", no, payment.EventRefundSucceeded); n != 1 {
		t.Fatalf("refund.succeeded events = %d, want 1", n)
	}
	if n := count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ? AND type <> ?", no, payment.EventPaymentPaid); n != 1 {
		t.Fatalf("events other than payment.paid = %d, want only the refund's", n)
	}
	p, _ := env.store.GetPayment(context.Background(), no)
	if p.Status != payment.StatusPaid || p.Refunded != 500 || p.RefundState != payment.RefundStatePartial {
		t.Fatalf("payment %s refunded %d %s; want PAID, 500, partial", p.Status, p.Refunded, p.RefundState)
	}
	if sim := simRefunds(t, no); len(sim) != 1 || sim[0].RefundFen != 500 {
		t.Fatalf("simulator refunds = %+v", sim)
	}
	var outcomes []string
	rows, err := env.db.Query("SELECT DISTINCT outcome FROM channel_notifications WHERE payment_no = ? AND raw_payload LIKE ?", no, "%out_biz_no=%")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var o string
		_ = rows.Scan(&o)
		outcomes = append(outcomes, o)
	}
	_ = rows.Close()
	for _, o := range outcomes {
		switch o {
		case "refund_workflow_started", "refund_already_final", "duplicate", "received":
		default:
			t.Fatalf("refund notification outcome %q", o)
		}
	}
	t.Logf("refund notification delivered as %d concurrent copies while Alipay held the answer: outcomes %v; 1 refund.succeeded, payment PAID with 500 fen refunded", copies, outcomes)
}

func TestRefundResolvesPaidAfterCloseOnceHoweverOftenAsked(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	no := paidPayment(t, st, tn, "r7001", 990)
	// Stand in for the race that leaves money at Alipay for a payment closed locally: the
	// row is closed by hand and the anomaly recorded as the callback records it.
	if _, err := env.db.Exec("UPDATE payments SET status = 2, close_reason = 'expired' WHERE payment_no = ?", no); err != nil {
		t.Fatal(err)
	}
	if err := env.store.RecordAnomaly(context.Background(), payment.Anomaly{Kind: "paid_after_close", TenantID: tn.id,
		PaymentNo: no, Amount: 990, Detail: t.Name()}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		cmd := exec.Command(env.paykitBin, "anomalies", "-resolve-refund", no)
		cmd.Env = append(os.Environ(), st.env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, out)
		}
		t.Logf("run %d: %s", i, strings.TrimSpace(string(out)))
	}
	refundNo := payment.AnomalyRefundNo(no)
	waitRefund(t, tn.id, refundNo, payment.RefundSucceeded, 60*time.Second)
	// A third run after it succeeded changes nothing either.
	cmd := exec.Command(env.paykitBin, "anomalies", "-resolve-refund", no)
	cmd.Env = append(os.Environ(), st.env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("third run: %v\n%s", err, out)
	}
	if sim := simRefunds(t, no); len(sim) != 1 || sim[0].RefundFen != 990 {
		t.Fatalf("simulator refunds = %+v, want one of 990 fen", sim)
	}
	if n := count(t, "SELECT COUNT(*) FROM refunds WHERE payment_no = ?", no); n != 1 {
		t.Fatalf("refunds = %d, want 1", n)
	}
	p, _ := env.store.GetPayment(context.Background(), no)
	if p.Status != payment.StatusClosed || p.Refunded != 990 {
		t.Fatalf("payment %s refunded %d; want CLOSED and 990", p.Status, p.Refunded)
	}
	if tr := simTrade(t, no); tr["trade_status"] != "TRADE_CLOSED" {
		t.Fatalf("simulator trade %v", tr["trade_status"])
	}
	t.Logf("paid_after_close on %s resolved by refund three times: 1 refund of 990 fen at the simulator", no)
}

// TestRefundRefusedByAlipayFails: Alipay refuses a refund of a finished trade
// (ACQ.TRADE_HAS_FINISHED); the refund fails, its reservation is released, and no money
// moves.
func TestRefundRefusedByAlipayFails(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	no := paidPayment(t, st, tn, "r7001", 990)
	if r := do(t, http.MethodPost, env.simURL+"/_sim/trades/"+no+"/finish", nil, nil); r.status != http.StatusOK {
		t.Fatalf("finish the trade: HTTP %d %s", r.status, r.body)
	}
	r := st.postRefund(t, tn, no, "refund-refused-"+randHex(4), map[string]any{"amount_fen": 300, "refund_no": "refused-1"})
	if r.status != http.StatusCreated {
		t.Fatalf("refund: HTTP %d %s", r.status, r.body)
	}
	got := waitRefund(t, tn.id, "refused-1", payment.RefundFailed, 90*time.Second)
	if !strings.Contains(got.FailReason, "TRADE_HAS_FINISHED") {
		t.Fatalf("fail reason %q, want Alipay's refusal", got.FailReason)
	}
	if sim := simRefunds(t, no); len(sim) != 0 {
		t.Fatalf("simulator refunds = %+v, want none", sim)
	}
	if p, _ := env.store.GetPayment(context.Background(), no); p.Refunded != 0 {
		t.Fatalf("refunded_fen = %d after a refused refund, want 0", p.Refunded)
	}
}

// TestRefundFundChangeNWhileProcessing: Alipay answers the first refund call success
// with fund_change "N" while it is still processing the refund, and its query lags.
// paykit does not take "N" as success: it confirms by the refund query once Alipay has
// settled, and only then marks the refund succeeded. When the processing refund fails
// instead, the query finds nothing, the request is sent again with the same
// out_request_no, and that one moves the money: one refund at Alipay either way.
func TestRefundFundChangeNWhileProcessing(t *testing.T) {
	resetFaults(t)
	st := shared(t)
	tn := newTenant(t)
	for _, tc := range []struct {
		refundNo string
		fail     bool
	}{{"processing-1", false}, {"processing-fail-1", true}} {
		no := paidPayment(t, st, tn, "r8001-"+tc.refundNo, 990)
		simFault(t, "/refunds", map[string]any{"processing_next": 1, "settle_ms": 2000, "fail": tc.fail, "query_lag_ms": 500})
		r := st.postRefund(t, tn, no, "refund-n-"+randHex(4), map[string]any{"amount_fen": 400, "refund_no": tc.refundNo})
		if r.status != http.StatusCreated {
			t.Fatalf("%s: HTTP %d %s", tc.refundNo, r.status, r.body)
		}
		// Still processing at Alipay: the refund must not be succeeded yet.
		time.Sleep(time.Second)
		if got, err := env.store.GetRefund(context.Background(), tn.id, tc.refundNo); err != nil || got.Status != payment.RefundPending {
			t.Fatalf("%s while Alipay processes it: %+v %v, want PENDING", tc.refundNo, got.Status, err)
		}
		waitRefund(t, tn.id, tc.refundNo, payment.RefundSucceeded, 150*time.Second)
		wf := waitRefundWorkflow(t, payment.RefundWorkflowID(tn.id, tc.refundNo))
		sim := simRefunds(t, no)
		var moved []simRefund
		for _, s := range sim {
			if s.State == "succeeded" {
				moved = append(moved, s)
			}
		}
		if len(moved) != 1 || moved[0].RefundFen != 400 {
			t.Fatalf("%s: simulator refunds %+v, want one of 400 fen that moved money", tc.refundNo, sim)
		}
		if p, _ := env.store.GetPayment(context.Background(), no); p.Refunded != 400 {
			t.Fatalf("%s: refunded_fen %d, want 400", tc.refundNo, p.Refunded)
		}
		wantBy := "query"
		if tc.fail {
			wantBy = "refund" // the request sent again moved the money (fund_change Y)
		}
		if wf.ConfirmedBy != wantBy {
			t.Fatalf("%s: confirmed by %q, want %q (workflow %+v)", tc.refundNo, wf.ConfirmedBy, wantBy, wf)
		}
		t.Logf("%s: fund_change N answered while processing (fail=%v); succeeded after %d rounds and %d queries, confirmed by %s",
			tc.refundNo, tc.fail, wf.Rounds, wf.Queries, wf.ConfirmedBy)
	}
}
