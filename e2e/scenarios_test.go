package e2e

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/worker"
	"github.com/paykit/paykit/workflows"
)

var (
	sharedOnce  sync.Once
	sharedStk   *stack
	sharedError error
)

// shared returns the default API + worker pair, started on first use and stopped with the
// system.
func shared(t *testing.T) *stack {
	t.Helper()
	sharedOnce.Do(func() {
		sharedStk, sharedError = startStack("shared", stackOptions{})
	})
	if sharedError != nil {
		t.Fatal(sharedError)
	}
	resetFaults(t)
	return sharedStk
}

func resetFaults(t *testing.T) {
	t.Helper()
	r := do(t, http.MethodDelete, env.simURL+"/_sim/faults", nil, nil)
	if r.status/100 != 2 {
		t.Fatalf("reset faults: HTTP %d %s", r.status, r.body)
	}
	t.Cleanup(func() { do(t, http.MethodDelete, env.simURL+"/_sim/faults", nil, nil) })
}

func mustCheckout(t *testing.T, st *stack, tn tenant, key string, body map[string]any) checkoutResult {
	t.Helper()
	r := st.checkout(t, tn, key, body)
	if r.status != http.StatusCreated {
		t.Fatalf("checkout: HTTP %d %s", r.status, r.body)
	}
	var res checkoutResult
	r.json(t, &res)
	if res.PaymentNo == "" || res.Status != payment.StatusPending {
		t.Fatalf("checkout result %+v", res)
	}
	return res
}

// concurrentCheckouts sends n checkouts of one order at once, the i-th with the
// Idempotency-Key keyFor(i) (none if empty), requires every one to answer 201 with the
// same payment, and returns that payment_no. A copy with a key answered 503 (the
// protocol's "retry later": on a loaded machine Temporal aborts or refuses many of the
// order's concurrent updates) is sent again with its key, as a client would, up to 50
// times 200 ms apart; how many were is logged.
func concurrentCheckouts(t *testing.T, st *stack, tn tenant, n int, body map[string]any, keyFor func(i int) string) string {
	t.Helper()
	return checkoutsAtOnce(t, st, tn, n, body, keyFor, false)
}

// checkoutsAtOnce is concurrentCheckouts; with retryInFlight a copy answered 409
// in_flight (its key is held by a concurrent copy, the protocol's answer) is sent again,
// up to 100 times 50 ms apart, before it must end 201.
func checkoutsAtOnce(t *testing.T, st *stack, tn tenant, n int, body map[string]any, keyFor func(i int) string, retryInFlight bool) string {
	t.Helper()
	nos := make([]string, n)
	var wg sync.WaitGroup
	var unavailable atomic.Int64
	defer func() {
		if u := unavailable.Load(); u > 0 {
			t.Logf("%d answers of %d concurrent checkouts were 503 and sent again with their keys", u, n)
		}
	}()
	for i := range n {
		key := keyFor(i)
		wg.Go(func() {
			for attempt := 0; ; attempt++ {
				r := st.checkout(t, tn, key, body)
				if retryInFlight && r.status == http.StatusConflict && strings.Contains(string(r.body), "in_flight") && attempt < 100 {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				if r.status == http.StatusServiceUnavailable && key != "" && attempt < 50 {
					unavailable.Add(1)
					time.Sleep(200 * time.Millisecond)
					continue
				}
				if r.status != http.StatusCreated {
					t.Errorf("checkout %d: HTTP %d %s", i, r.status, r.body)
					return
				}
				var res checkoutResult
				r.json(t, &res)
				nos[i] = res.PaymentNo
				return
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i := range n {
		if nos[i] != nos[0] {
			t.Fatalf("checkout %d got payment %s, first got %s", i, nos[i], nos[0])
		}
	}
	return nos[0]
}

// openCashier opens the page-pay URL as the buyer's browser would; the trade exists at
// Alipay from then on.
func openCashier(t *testing.T, payURL string) string {
	t.Helper()
	r := do(t, http.MethodGet, payURL, nil, nil)
	if r.status != http.StatusOK {
		t.Fatalf("cashier: HTTP %d %s", r.status, r.body)
	}
	return string(r.body)
}

func TestHappyPath(t *testing.T) { happyPath(t, shared(t), env.simURL) }

// happyPath pays one order through the stack st, whose gateway is the simulator at simURL.
func happyPath(t *testing.T, st *stack, simURL string) {
	tn := newTenant(t)
	res := mustCheckout(t, st, tn, "happy-"+randHex(6), order("1001", 990))
	page := openCashier(t, res.PayURL)
	if !strings.Contains(page, "9.90") || !strings.Contains(page, "Test order 1001") {
		t.Fatalf("cashier page lacks amount or subject:\n%s", page)
	}
	simPayAt(t, simURL, res.PaymentNo)
	p := waitStatus(t, res.PaymentNo, payment.StatusPaid, 30*time.Second)
	if p.TradeNo == "" || p.PaidAt.IsZero() {
		t.Fatalf("paid payment lacks trade_no or paid_at: %+v", p)
	}
	final := waitWorkflowClosed(t, payment.WorkflowID(tn.id, "1001"), 30*time.Second)
	if final.Status != payment.StatusPaid || !final.BenefitGranted || !final.WebhookSent {
		t.Fatalf("workflow result %+v", final)
	}
	if n := count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", res.PaymentNo); n != 1 {
		t.Fatalf("grants = %d, want 1", n)
	}
	if n := count(t, "SELECT COUNT(*) FROM orders WHERE tenant_id = ? AND order_id = '1001' AND status = 1", tn.id); n != 1 {
		t.Fatalf("paid orders = %d, want 1", n)
	}
	hooks := env.merchant.received(tn.id)
	if len(hooks) != 1 || !hooks[0].verified || hooks[0].typ != payment.EventPaymentPaid || hooks[0].eventID == "" {
		t.Fatalf("merchant webhooks: %+v", hooks)
	}
	var body map[string]any
	if err := json.Unmarshal(hooks[0].body, &body); err != nil || body["payment_no"] != res.PaymentNo || body["amount_fen"] != float64(990) {
		t.Fatalf("webhook body %s (%v)", hooks[0].body, err)
	}
	got := do(t, http.MethodGet, st.apiURL+"/v1/payments/"+res.PaymentNo, map[string]string{"Authorization": "Bearer " + tn.apiKey}, nil)
	if got.status != http.StatusOK || !strings.Contains(string(got.body), `"status":"PAID"`) {
		t.Fatalf("GET payment: %d %s", got.status, got.body)
	}
	// Ops see it in the metrics of both processes.
	metrics := string(do(t, http.MethodGet, st.workerAdminURL+"/metrics", nil, nil).body)
	for _, want := range []string{`paykit_payment_transitions_total{status="PAID"}`, `paykit_webhook_deliveries_total{outcome="delivered"}`, "paykit_benefit_grants_total",
		// The Temporal SDK's worker metrics, on the same endpoint.
		`temporal_workflow_task_schedule_to_start_latency_seconds_bucket{`, `temporal_local_activity_execution_latency_seconds_bucket{`,
		`temporal_workflow_completed_total{`, `workflow_type="PaymentWorkflow"`, `temporal_num_pollers{`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("worker /metrics lacks %s", want)
		}
	}
	// Every workflow task poll serves the task queue: with sticky execution on, a stale
	// sticky backlog hint sent every poll to the sticky queue and new checkouts waited.
	normal, sticky := 0.0, 0.0
	for k, v := range scrape(st.workerAdminURL + "/metrics") {
		switch {
		case !strings.HasPrefix(k, "temporal_num_pollers{"):
		case strings.Contains(k, `poller_type="workflow_sticky_task"`):
			sticky += v
		case strings.Contains(k, `poller_type="workflow_task"`):
			normal += v
		}
	}
	if sticky != 0 || normal == 0 {
		t.Errorf("worker polls: %v on its sticky queue, %v on the task queue; want none and some", sticky, normal)
	}
	apiMetrics := string(do(t, http.MethodGet, st.apiAdminURL+"/metrics", nil, nil).body)
	for _, want := range []string{`paykit_notification_dispatches_total{outcome="signalled"}`, `temporal_request_latency_seconds_bucket{`, `operation="StartWorkflowExecution"`} {
		if !strings.Contains(apiMetrics, want) {
			t.Errorf("api /metrics lacks %s", want)
		}
	}
	// A page checkout is answered by the API's own transaction and a workflow start.
	if n := scrape(st.apiAdminURL + "/metrics")[`paykit_checkout_paths_total{path="direct"}`]; n < 1 {
		t.Errorf("api /metrics: %v checkouts answered by the direct path, want at least this one", n)
	}
	// Another tenant cannot see it.
	other := newTenant(t)
	if r := do(t, http.MethodGet, st.apiURL+"/v1/payments/"+res.PaymentNo, map[string]string{"Authorization": "Bearer " + other.apiKey}, nil); r.status != http.StatusNotFound {
		t.Fatalf("other tenant GET: HTTP %d %s", r.status, r.body)
	}
	// Ops can find it by its search attributes.
	query := fmt.Sprintf(`PaymentNo = %q AND PaymentStatus = "PAID" AND TenantId = %q AND OrderId = "1001" AND AmountFen = 990`, res.PaymentNo, tn.id)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := env.tc.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		if err == nil && len(resp.Executions) == 1 {
			t.Logf("search attribute query %s matched %s", query, resp.Executions[0].Execution.WorkflowId)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow list --query %s: %v, %v", query, resp, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestConcurrentIdenticalCheckouts(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	const n = 200
	key := "same-key-" + randHex(6)
	bodies := make([]string, n)
	statuses := make([]int, n)
	conflicts := 0
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for attempt := 0; attempt < 200; attempt++ {
				r := st.checkout(t, tn, key, order("2001", 1500))
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
		}()
	}
	wg.Wait()
	for i := range n {
		if statuses[i] != http.StatusCreated || bodies[i] != bodies[0] {
			t.Fatalf("response %d: HTTP %d %s\nfirst: %s", i, statuses[i], bodies[i], bodies[0])
		}
	}
	if c := count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND order_id = '2001'", tn.id); c != 1 {
		t.Fatalf("payments = %d, want 1", c)
	}
	t.Logf("%d identical checkouts: 1 payment, %d identical 201 bodies, %d in-flight 409s retried", n, n, conflicts)
}

func TestConcurrentCheckoutsWithDifferentKeys(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	const n = 200
	no := concurrentCheckouts(t, st, tn, n, order("3001", 2500), func(i int) string { return fmt.Sprintf("key-%d-%s", i, randHex(4)) })
	if c := count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND order_id = '3001' AND status = 0", tn.id); c != 1 {
		t.Fatalf("pending payments = %d, want 1", c)
	}
	// A different amount for the order being paid is a conflict, not a second payment.
	if r := st.checkout(t, tn, "", order("3001", 9999)); r.status != http.StatusConflict {
		t.Fatalf("different amount: HTTP %d %s", r.status, r.body)
	}
	t.Logf("%d checkouts with different keys: 1 pending payment %s", n, no)
}

func TestCheckoutTokenReuse(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	auth := map[string]string{"Authorization": "Bearer " + tn.apiKey, "Content-Type": "application/json"}
	r := do(t, http.MethodPost, st.apiURL+"/v1/checkout-tokens", auth, []byte(`{"order_id":"4001"}`))
	if r.status != http.StatusCreated {
		t.Fatalf("token: HTTP %d %s", r.status, r.body)
	}
	var tok struct {
		Token string `json:"checkout_token"`
	}
	r.json(t, &tok)
	body := order("4001", 100)
	body["checkout_token"] = tok.Token
	first := st.checkout(t, tn, "tok-a-"+randHex(4), body)
	if first.status != http.StatusCreated {
		t.Fatalf("first use: HTTP %d %s", first.status, first.body)
	}
	var res checkoutResult
	first.json(t, &res)
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			again := st.checkout(t, tn, fmt.Sprintf("tok-b-%d-%s", i, randHex(4)), body)
			if again.status != http.StatusConflict || !strings.Contains(string(again.body), res.PaymentNo) ||
				!strings.Contains(again.header.Get("Content-Type"), "application/problem+json") {
				t.Errorf("reuse %d: HTTP %d %s", i, again.status, again.body)
			}
		}()
	}
	wg.Wait()
	if c := count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND order_id = '4001'", tn.id); c != 1 {
		t.Fatalf("payments = %d, want 1", c)
	}
	t.Logf("token reused %d times: 409 with payment %s each time, 1 payment", n, res.PaymentNo)
}

func TestIdempotencyKeyProtocol(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	key := "proto-" + randHex(6)
	first := st.checkout(t, tn, key, order("5001", 800))
	if first.status != http.StatusCreated {
		t.Fatalf("first: HTTP %d %s", first.status, first.body)
	}
	replay := st.checkout(t, tn, key, order("5001", 800))
	if replay.status != http.StatusCreated || string(replay.body) != string(first.body) || replay.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: HTTP %d %q %s", replay.status, replay.header.Get("Idempotent-Replayed"), replay.body)
	}
	if r := st.checkout(t, tn, key, order("5001", 801)); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("different payload: HTTP %d %s", r.status, r.body)
	}
	if r := st.checkout(t, tn, "bad key with spaces", order("5002", 800)); r.status != http.StatusBadRequest {
		t.Fatalf("malformed key: HTTP %d %s", r.status, r.body)
	}
	// The same key belongs to another tenant independently.
	other := newTenant(t)
	if r := st.checkout(t, other, key, order("5001", 801)); r.status != http.StatusCreated {
		t.Fatalf("other tenant, same key: HTTP %d %s", r.status, r.body)
	}
	bad := []struct {
		name string
		body string
		want int
	}{
		{"float amount", `{"order_id":"x1","amount_fen":9.9,"subject":"s"}`, 400},
		{"negative amount", `{"order_id":"x1","amount_fen":-1,"subject":"s"}`, 400},
		{"unknown field", `{"order_id":"x1","amount":990,"subject":"s"}`, 400},
		{"bad order id", `{"order_id":"a:b","amount_fen":1,"subject":"s"}`, 400},
		{"other currency", `{"order_id":"x1","amount_fen":1,"subject":"s","currency":"USD"}`, 400},
	}
	for _, tc := range bad {
		r := do(t, http.MethodPost, st.apiURL+"/v1/payments", map[string]string{"Authorization": "Bearer " + tn.apiKey, "Content-Type": "application/json"}, []byte(tc.body))
		if r.status != tc.want || !strings.Contains(r.header.Get("Content-Type"), "application/problem+json") {
			t.Errorf("%s: HTTP %d %s", tc.name, r.status, r.body)
		}
	}
	if r := do(t, http.MethodPost, st.apiURL+"/v1/payments", map[string]string{"Authorization": "Bearer " + tn.apiKey, "Content-Type": "text/plain"},
		[]byte(`{"order_id":"x1","amount_fen":1,"subject":"s"}`)); r.status != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain body: HTTP %d %s", r.status, r.body)
	}
	if r := do(t, http.MethodPost, st.apiURL+"/v1/payments", nil, []byte(`{}`)); r.status != http.StatusUnauthorized {
		t.Errorf("no auth: HTTP %d", r.status)
	}
}

func TestDuplicateNotificationsPayOnce(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	simFault(t, "/notifications", map[string]any{"copies": 50})
	res := mustCheckout(t, st, tn, "", order("6001", 990))
	openCashier(t, res.PayURL)
	simPay(t, res.PaymentNo)
	waitStatus(t, res.PaymentNo, payment.StatusPaid, 30*time.Second)
	final := waitWorkflowClosed(t, payment.WorkflowID(tn.id, "6001"), 30*time.Second)
	time.Sleep(500 * time.Millisecond) // let the last copies land
	grants := count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", res.PaymentNo)
	events := count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ?", res.PaymentNo)
	recorded := count(t, "SELECT COUNT(*) FROM channel_notifications WHERE payment_no = ? AND verified = 1", res.PaymentNo)
	hooks := env.merchant.received(tn.id)
	ids := map[string]bool{}
	for _, h := range hooks {
		ids[h.eventID] = true
	}
	attempts := do(t, http.MethodGet, env.simURL+"/_sim/notifications?out_trade_no="+res.PaymentNo, nil, nil)
	var log []map[string]any
	attempts.json(t, &log)
	if final.Status != payment.StatusPaid || grants != 1 || events != 1 || recorded != 1 || len(ids) != 1 || len(hooks) != 1 {
		t.Fatalf("status %s grants=%d events=%d recorded=%d webhooks=%d distinct=%d", final.Status, grants, events, recorded, len(hooks), len(ids))
	}
	t.Logf("%d notification deliveries: paid once, %d grant, %d outbox event, %d webhook, %d notification row", len(log), grants, events, len(hooks), recorded)
}

func TestLostNotificationsReconciled(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	simFault(t, "/notifications", map[string]any{"drop_next": 1000})
	res := mustCheckout(t, st, tn, "", order("7001", 4200))
	openCashier(t, res.PayURL)
	simPay(t, res.PaymentNo)
	waitStatus(t, res.PaymentNo, payment.StatusPaid, 30*time.Second)
	final := waitWorkflowClosed(t, payment.WorkflowID(tn.id, "7001"), 30*time.Second)
	if c := count(t, "SELECT COUNT(*) FROM channel_notifications WHERE payment_no = ?", res.PaymentNo); c != 0 {
		t.Fatalf("a notification got through (%d); the test proves nothing", c)
	}
	if final.Status != payment.StatusPaid || final.Reconciliations < 1 || len(env.merchant.received(tn.id)) != 1 {
		t.Fatalf("final %+v", final)
	}
	if !final.QueryScheduled || final.WokenAt.IsZero() {
		t.Fatalf("paid without the scheduled reconciler's wake: %+v", final)
	}
	t.Logf("every notification dropped: paid by reconciliation after %d queries", final.Reconciliations)
}

func TestNeverPaidClosesAtExpiry(t *testing.T) {
	resetFaults(t)
	st := newStack(t, stackOptions{paymentTTL: 3 * time.Second})
	tn := newTenant(t)
	res := mustCheckout(t, st, tn, "", order("8001", 300))
	openCashier(t, res.PayURL)
	p := waitStatus(t, res.PaymentNo, payment.StatusClosed, 30*time.Second)
	if n := count(t, "SELECT COUNT(*) FROM orders WHERE tenant_id = ? AND order_id = '8001' AND status = 2", tn.id); n != 1 {
		t.Fatalf("cancelled orders = %d, want 1", n)
	}
	trade := do(t, http.MethodGet, env.simURL+"/_sim/trades/"+res.PaymentNo, nil, nil)
	if !strings.Contains(string(trade.body), `"TRADE_CLOSED"`) {
		t.Fatalf("trade at alipay: %s", trade.body)
	}
	final := waitWorkflowClosed(t, payment.WorkflowID(tn.id, "8001"), 30*time.Second)
	if final.Status != payment.StatusClosed || !final.WebhookSent {
		t.Fatalf("final %+v", final)
	}
	if hooks := env.merchant.received(tn.id); len(hooks) != 1 || hooks[0].typ != payment.EventPaymentClosed || !hooks[0].verified {
		t.Fatalf("merchant webhooks: %+v", hooks)
	}
	// Paying now is refused by Alipay: the trade is closed there first.
	if r := do(t, http.MethodPost, env.simURL+"/_sim/trades/"+res.PaymentNo+"/pay", nil, []byte(`{}`)); r.status == http.StatusOK {
		t.Fatalf("a closed trade was paid: %s", r.body)
	}
	// Re-purchase: the closed row does not block a new pending payment for the order.
	again := mustCheckout(t, st, tn, "", order("8001", 300))
	if again.PaymentNo == res.PaymentNo {
		t.Fatal("re-purchase reused the closed payment")
	}
	t.Logf("never paid: %s closed at %s and order cancelled; re-purchase got %s", p.PaymentNo, p.UpdatedAt.Format(time.RFC3339), again.PaymentNo)
}

func TestPaidAtTheMomentOfClosing(t *testing.T) {
	resetFaults(t)
	// Reconciliation never runs before expiry and every notification is lost, so the
	// payment made just before time_expire is discovered only when the close is refused.
	st := newStack(t, stackOptions{paymentTTL: 4 * time.Second, extraEnv: []string{"PAYKIT_RECONCILE_INTERVAL=1h"}})
	tn := newTenant(t)
	simFault(t, "/notifications", map[string]any{"drop_next": 1000})
	res := mustCheckout(t, st, tn, "", order("9001", 990))
	openCashier(t, res.PayURL)
	time.Sleep(time.Until(res.ExpireAt.Add(-1500 * time.Millisecond)))
	simPay(t, res.PaymentNo)
	waitStatus(t, res.PaymentNo, payment.StatusPaid, 30*time.Second)
	final := waitWorkflowClosed(t, payment.WorkflowID(tn.id, "9001"), 30*time.Second)
	if final.Status != payment.StatusPaid || final.Reconciliations != 0 {
		t.Fatalf("final %+v", final)
	}
	if n := count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ? AND type = 'payment.closed'", res.PaymentNo); n != 0 {
		t.Fatalf("payment was closed before being paid")
	}
	if n := count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", res.PaymentNo); n != 1 {
		t.Fatalf("grants = %d", n)
	}
	t.Log("paid just before expiry with every notification lost: the close was refused (ACQ.TRADE_STATUS_ERROR), the query found it paid, payment ended PAID and never closed")
}

// signForm signs a notification form as Alipay does (everything but sign and sign_type).
func signForm(t *testing.T, form url.Values, privPEM string) {
	t.Helper()
	block, _ := pem.Decode([]byte(privPEM))
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(form))
	for k := range form {
		if k != "sign" && k != "sign_type" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + form.Get(k)
	}
	sum := sha256.Sum256([]byte(strings.Join(parts, "&")))
	sig, err := rsa.SignPKCS1v15(nil, k.(*rsa.PrivateKey), crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	form.Set("sign", base64.StdEncoding.EncodeToString(sig))
}

func TestForgedAndMismatchedNotificationsPayNothing(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	res := mustCheckout(t, st, tn, "", order("10001", 990))
	base := func(notifyID string) url.Values {
		now := time.Now().In(time.FixedZone("CST", 8*3600)).Format("2006-01-02 15:04:05")
		return url.Values{
			"notify_time": {now}, "notify_type": {"trade_status_sync"}, "notify_id": {notifyID},
			"app_id": {appID}, "charset": {"utf-8"}, "version": {"1.0"}, "sign_type": {"RSA2"},
			"trade_no": {"2026FORGED" + notifyID}, "out_trade_no": {res.PaymentNo}, "seller_id": {sellerID},
			"buyer_id": {"2088000000000009"}, "trade_status": {"TRADE_SUCCESS"}, "total_amount": {"9.90"},
			"receipt_amount": {"9.90"}, "gmt_create": {now}, "gmt_payment": {now}, "subject": {"x"},
		}
	}
	// Those that do not verify (or are not addressed to this app and seller) are answered
	// failure. Alipay's own word that does not match (the amount, an out_trade_no paykit
	// never made) is acknowledged on its record and settled on an anomaly: delivering it
	// again would change nothing.
	cases := []struct {
		name  string
		acked bool
		form  func() url.Values
	}{
		{"forged signature", false, func() url.Values {
			f := base("forged-" + randHex(4))
			f.Set("sign", base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", 256))))
			return f
		}},
		{"signed with another key", false, func() url.Values {
			f := base("otherkey-" + randHex(4))
			signForm(t, f, env.keys.AppPrivateKeyPEM) // a key that is not Alipay's
			return f
		}},
		{"tampered after signing", false, func() url.Values {
			f := base("tamper-" + randHex(4))
			f.Set("total_amount", "0.01")
			signForm(t, f, env.keys.AlipayPrivateKeyPEM)
			f.Set("total_amount", "9.90")
			f.Set("out_trade_no", res.PaymentNo+"X")
			return f
		}},
		{"wrong amount", true, func() url.Values {
			f := base("amount-" + randHex(4))
			f.Set("total_amount", "0.01")
			f.Set("receipt_amount", "0.01")
			signForm(t, f, env.keys.AlipayPrivateKeyPEM)
			return f
		}},
		{"wrong app_id", false, func() url.Values {
			f := base("appid-" + randHex(4))
			f.Set("app_id", "2021999999999999")
			signForm(t, f, env.keys.AlipayPrivateKeyPEM)
			return f
		}},
		{"wrong seller_id", false, func() url.Values {
			f := base("seller-" + randHex(4))
			f.Set("seller_id", "2088999999999999")
			signForm(t, f, env.keys.AlipayPrivateKeyPEM)
			return f
		}},
		{"unknown out_trade_no", true, func() url.Values {
			f := base("unknown-" + randHex(4))
			f.Set("out_trade_no", "PNOSUCHPAYMENT")
			signForm(t, f, env.keys.AlipayPrivateKeyPEM)
			return f
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.form()
			r := do(t, http.MethodPost, st.apiURL+"/callbacks/alipay", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, []byte(f.Encode()))
			if acked := strings.TrimSpace(string(r.body)) == "success"; acked != tc.acked {
				t.Fatalf("answered %q to %s, want success=%v", r.body, tc.name, tc.acked)
			}
			var outcome string
			var settled bool
			deadline := time.Now().Add(10 * time.Second)
			for {
				if err := env.db.QueryRow("SELECT outcome, settled_at IS NOT NULL FROM channel_notifications WHERE claimed_notify_id = ? ORDER BY id DESC LIMIT 1",
					f.Get("notify_id")).Scan(&outcome, &settled); err != nil {
					t.Fatalf("notification not recorded: %v", err)
				}
				if !tc.acked || settled || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if tc.acked {
				if !settled || !strings.HasPrefix(outcome, "rejected: ") ||
					count(t, "SELECT COUNT(*) FROM payment_anomalies WHERE kind = 'notification_rejected' AND payment_no = ? AND subject = ?",
						f.Get("out_trade_no"), f.Get("notify_id")) != 1 {
					t.Fatalf("%s: outcome %q settled=%v; want settled on a notification_rejected anomaly", tc.name, outcome, settled)
				}
			}
			t.Logf("%s: replied %q, recorded outcome %q", tc.name, r.body, outcome)
		})
	}
	time.Sleep(time.Second)
	p, err := env.store.GetPayment(context.Background(), res.PaymentNo)
	if err != nil || p.Status != payment.StatusPending {
		t.Fatalf("payment after forged notifications: %+v %v", p, err)
	}
	if n := count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", res.PaymentNo); n != 0 {
		t.Fatalf("grants = %d", n)
	}
	// A real payment afterwards still goes through.
	openCashier(t, res.PayURL)
	simPay(t, res.PaymentNo)
	waitStatus(t, res.PaymentNo, payment.StatusPaid, 30*time.Second)
}

func TestWorkerKilledMidPayment(t *testing.T) {
	resetFaults(t)
	st := newStack(t, stackOptions{})
	tn := newTenant(t)
	res := mustCheckout(t, st, tn, "", order("11001", 1234))
	openCashier(t, res.PayURL)
	st.worker.kill()
	simPay(t, res.PaymentNo)
	// The callback is accepted (the signal is durable in Temporal) while no worker runs.
	deadline := time.Now().Add(15 * time.Second)
	for count(t, "SELECT COUNT(*) FROM channel_notifications WHERE payment_no = ? AND outcome = 'signalled'", res.PaymentNo) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("notification was not signalled while the worker was down")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if p, _ := env.store.GetPayment(context.Background(), res.PaymentNo); p.Status != payment.StatusPending {
		t.Fatalf("status %s with no worker running", p.Status)
	}
	st.restartWorker(t)
	waitStatus(t, res.PaymentNo, payment.StatusPaid, 60*time.Second)
	final := waitWorkflowClosed(t, payment.WorkflowID(tn.id, "11001"), 60*time.Second)
	if n := count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", res.PaymentNo); n != 1 || final.Status != payment.StatusPaid {
		t.Fatalf("grants = %d, final %+v", n, final)
	}
	t.Log("worker SIGKILLed after checkout; callback signalled while down; restarted worker completed the payment once")
}

func TestRedisUnavailableStillExactlyOnce(t *testing.T) {
	resetFaults(t)
	st := newStack(t, stackOptions{redisAddr: "127.0.0.1:1"})
	tn := newTenant(t)
	const n = 50
	no := concurrentCheckouts(t, st, tn, n, order("12001", 700), func(i int) string {
		if i%2 == 0 {
			return "redis-down-" + randHex(4)
		}
		return ""
	})
	simFault(t, "/notifications", map[string]any{"copies": 10})
	// A retried checkout joins the running workflow and gets the same payment.
	again := mustCheckout(t, st, tn, "", order("12001", 700))
	if again.PaymentNo != no {
		t.Fatalf("retried checkout got %s, want %s", again.PaymentNo, no)
	}
	res := again
	openCashier(t, again.PayURL)
	simPay(t, res.PaymentNo)
	waitStatus(t, res.PaymentNo, payment.StatusPaid, 30*time.Second)
	waitWorkflowClosed(t, payment.WorkflowID(tn.id, "12001"), 30*time.Second)
	if c := count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND order_id = '12001'", tn.id); c != 1 {
		t.Fatalf("payments = %d", c)
	}
	if c := count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", res.PaymentNo); c != 1 {
		t.Fatalf("grants = %d", c)
	}
	if c := count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ?", res.PaymentNo); c != 1 {
		t.Fatalf("events = %d", c)
	}
	ready := do(t, http.MethodGet, st.apiAdminURL+"/readyz", nil, nil)
	if ready.status != http.StatusOK || !strings.Contains(string(ready.body), "degraded") {
		t.Fatalf("readyz with redis down: %d %s", ready.status, ready.body)
	}
	t.Logf("redis unreachable: %d concurrent checkouts → 1 payment; 10× notifications → 1 grant, 1 event", n)
}

func TestTerminatedWorkflowIsRedrivenBySweeper(t *testing.T) {
	resetFaults(t)
	st := newStack(t, stackOptions{})
	tn := newTenant(t)
	simFault(t, "/notifications", map[string]any{"drop_next": 1000})
	res := mustCheckout(t, st, tn, "", order("13001", 5000))
	openCashier(t, res.PayURL)
	wid := payment.WorkflowID(tn.id, "13001")
	// A QR payment terminated the same way must come back as a QR payment.
	qrOrder := order("13002", 5100)
	qrOrder["method"] = "qr"
	qr := mustCheckout(t, st, tn, "", qrOrder)
	qrWID := payment.WorkflowID(tn.id, "13002")
	for _, id := range []string{wid, qrWID} {
		if err := env.tc.TerminateWorkflow(context.Background(), id, "", "operator terminated it by mistake"); err != nil {
			t.Fatal(err)
		}
	}
	simPay(t, res.PaymentNo)
	qrState := waitRedrivenState(t, qrWID, 60*time.Second)
	if qrState.PaymentNo != qr.PaymentNo || qrState.QRCode == "" || qrState.PayURL != "" {
		t.Fatalf("re-driven QR run: payment_no %s qr_code %q pay_url %q; want %s with a QR code and no cashier URL",
			qrState.PaymentNo, qrState.QRCode, qrState.PayURL, qr.PaymentNo)
	}
	simPay(t, qr.PaymentNo)
	waitStatus(t, qr.PaymentNo, payment.StatusPaid, 60*time.Second)
	p := waitStatus(t, res.PaymentNo, payment.StatusPaid, 60*time.Second)
	final := waitWorkflowClosed(t, wid, 30*time.Second)
	if final.PaymentNo != res.PaymentNo || final.Status != payment.StatusPaid {
		t.Fatalf("re-driven run: %+v", final)
	}
	if c := count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND order_id IN ('13001', '13002')", tn.id); c != 2 {
		t.Fatalf("payments = %d, want 2 (each re-driven run must adopt its payment)", c)
	}
	t.Logf("terminated while pending; sweeper re-drove %s and reconciliation marked it paid (trade %s)", p.PaymentNo, p.TradeNo)
}

func TestSchedulesExistAndPurgeExpiredKeys(t *testing.T) {
	st := shared(t)
	ctx := context.Background()
	sc := env.tc.ScheduleClient()
	for _, id := range []string{worker.SweeperScheduleID(st.taskQueue), worker.PurgeScheduleID(st.taskQueue), worker.AuditScheduleID(st.taskQueue)} {
		if _, err := sc.GetHandle(ctx, id).Describe(ctx); err != nil {
			t.Fatalf("schedule %s: %v", id, err)
		}
	}
	tn := newTenant(t)
	past := time.Now().Add(-time.Hour)
	for i := range 3 {
		_, _, err := env.store.ReserveIdempotencyKey(ctx, payment.IdempotencyRecord{
			TenantID: tn.id, Key: fmt.Sprintf("expired-%d", i), Fingerprint: "fp", LockedUntil: past, ExpiresAt: past,
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, "SELECT COUNT(*) FROM idempotency_keys WHERE tenant_id = ?", tn.id); n != 3 {
		t.Fatalf("keys = %d", n)
	}
	if err := sc.GetHandle(ctx, worker.PurgeScheduleID(st.taskQueue)).Trigger(ctx, client.ScheduleTriggerOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for count(t, "SELECT COUNT(*) FROM idempotency_keys WHERE tenant_id = ?", tn.id) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("expired idempotency keys were not purged by the schedule")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Log("purge schedule triggered: 3 expired idempotency keys deleted")

	// The audit schedule runs its workflow to the end too (its history is replayed by
	// TestZZReplayOtherHistories).
	before := len(listCompletedOf(t, workflows.AuditWorkflowName))
	if err := sc.GetHandle(ctx, worker.AuditScheduleID(st.taskQueue)).Trigger(ctx, client.ScheduleTriggerOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); len(listCompletedOf(t, workflows.AuditWorkflowName)) <= before; time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the triggered audit schedule completed no audit workflow")
		}
	}
}

func TestQRPaymentThroughAlipayOutages(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	body := order("14001", 8800)
	body["method"] = "qr"
	// Alipay is failing when the checkout precreates the trade: the activity retries.
	simFault(t, "/gateway", map[string]any{"mode": "system_error", "count": 2})
	res := mustCheckout(t, st, tn, "qr-"+randHex(4), body)
	if res.QRCode == "" || res.PayURL != "" {
		t.Fatalf("qr checkout: %+v", res)
	}
	// Every notification is lost and the reconciliation queries hit 5xx and timeouts first.
	simFault(t, "/notifications", map[string]any{"drop_next": 1000})
	simFault(t, "/gateway", map[string]any{"mode": "http_error", "count": 3, "method": "alipay.trade.query"})
	simPay(t, res.PaymentNo)
	p := waitStatus(t, res.PaymentNo, payment.StatusPaid, 60*time.Second)
	final := waitWorkflowClosed(t, payment.WorkflowID(tn.id, "14001"), 30*time.Second)
	if final.Status != payment.StatusPaid || count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", res.PaymentNo) != 1 {
		t.Fatalf("final %+v", final)
	}
	var left struct {
		Gateway []map[string]any `json:"gateway"`
	}
	do(t, http.MethodGet, env.simURL+"/_sim/faults", nil, nil).json(t, &left)
	if len(left.Gateway) != 0 {
		t.Fatalf("injected gateway faults were not all hit: %+v", left.Gateway)
	}
	t.Logf("QR payment %s: precreate retried through 2 ACQ.SYSTEM_ERROR; with 3 HTTP 5xx injected on alipay.trade.query and every notification lost, reconciliation marked it paid (trade %s) after %d ticks",
		p.PaymentNo, p.TradeNo, final.Reconciliations)
}

func TestOperatorCancelClosesThePayment(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	res := mustCheckout(t, st, tn, "", order("15001", 1000))
	openCashier(t, res.PayURL)
	if err := env.tc.CancelWorkflow(context.Background(), payment.WorkflowID(tn.id, "15001"), ""); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, res.PaymentNo, payment.StatusClosed, 30*time.Second)
	if final := waitWorkflowClosed(t, payment.WorkflowID(tn.id, "15001"), 30*time.Second); final.Status != payment.StatusClosed || !final.WebhookSent {
		t.Fatalf("final %+v", final)
	}
	trade := do(t, http.MethodGet, env.simURL+"/_sim/trades/"+res.PaymentNo, nil, nil)
	if !strings.Contains(string(trade.body), `"TRADE_CLOSED"`) {
		t.Fatalf("trade at alipay after cancel: %s", trade.body)
	}
	if n := count(t, "SELECT COUNT(*) FROM orders WHERE tenant_id = ? AND order_id = '15001' AND status = 2", tn.id); n != 1 {
		t.Fatalf("cancelled orders = %d", n)
	}
	t.Log("operator cancel: trade closed at Alipay first, then the payment closed and the order cancelled")
}
