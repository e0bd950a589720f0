package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paykit/paykit/payment"
)

// TestRandomizedFaults runs orders through a random schedule of everything that can go
// wrong at once: duplicate checkouts (same key, other keys, tokens), pays at the
// simulator, dropped, duplicated, delayed and reordered notifications, Alipay gateway
// faults, terminated and cancelled workflows, SIGKILLed workers and APIs, Redis outages,
// races with expiry, duplicated partial refunds of paid payments (keyless ones too, which
// must be refused), refunds Alipay answers fund_change "N" while processing them,
// with a lagging refund query, and refund notifications recorded and acknowledged by an
// API that dies before handing them over, and Alipay throttling the app's calls (40005).
// Then it heals the
// system, waits for every payment and refund to settle and checks the promise: the
// simulator's ledger and MySQL agree (refunds to the fen), no order is charged twice and
// no payment refunded above its amount, every PAID payment has one grant and a delivered
// webhook, and `paykit audit` finds nothing.
//
// The schedule comes from a seed, printed first; PAYKIT_FAULT_SEED replays it (the
// actions and their order; thread timing still varies) and PAYKIT_FAULT_DURATION sets how
// long faults are injected (default 45s; docs/testing.md gives the long run).
func TestRandomizedFaults(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PAYKIT_FAULT_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("PAYKIT_FAULT_SEED: %v", err)
		}
		seed = v
	}
	dur := 45 * time.Second
	if s := os.Getenv("PAYKIT_FAULT_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("PAYKIT_FAULT_DURATION: %v", err)
		}
		dur = d
	}
	t.Logf("fault suite seed %d, %s of faults; replay with PAYKIT_FAULT_SEED=%d PAYKIT_FAULT_DURATION=%s go test -run TestRandomizedFaults ./e2e",
		seed, dur, seed, dur)

	resetFaults(t)
	proxy := newTCPProxy(t, singleRedisAddr())
	st := newStack(t, stackOptions{paymentTTL: 8 * time.Second, redisAddr: proxy.addr(), extraEnv: []string{
		"PAYKIT_SWEEP_STALE_AFTER=10s", "PAYKIT_WEBHOOK_MAX_ATTEMPTS=3"}})
	pauseOtherSweepers(t, st)
	tn := newTenant(t)
	f := &faultRun{t: t, st: st, tn: tn, proxy: proxy, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		started: time.Now(), counts: map[string]int{}}
	for i := range 24 {
		method := payment.MethodPage
		if i%3 == 0 {
			method = payment.MethodQR
		}
		base := fmt.Sprintf("fz%02d", i)
		f.orders = append(f.orders, &faultOrder{base: base, ids: []string{base + "-0"}, fen: int64(100 + i), method: method})
	}

	var wg sync.WaitGroup
	work := make(chan func(), 8)
	for range 4 {
		wg.Go(func() {
			for fn := range work {
				fn()
			}
		})
	}
	deadline := time.Now().Add(dur)
	for time.Now().Before(deadline) {
		work <- f.next()
		time.Sleep(time.Duration(20+f.rng.IntN(60)) * time.Millisecond)
	}
	close(work)
	wg.Wait()
	f.heal()
	t.Logf("actions: %v", f.counts)
	f.settle(150 * time.Second)
	f.check()
}

// faultOrder is one slot of the run. Once its order is paid (and so final), the slot moves
// on to a new order id, so that new payments keep being made for the whole run.
type faultOrder struct {
	base   string
	fen    int64
	method payment.Method
	mu     sync.Mutex
	ids    []string // every order id the slot has used, the current one last
	// lastKey and lastBody are the last keyed checkout, replayed as it was.
	lastKey  string
	lastBody []byte
	token    string
}

type faultRun struct {
	t       *testing.T
	st      *stack
	tn      tenant
	proxy   *tcpProxy
	rng     *rand.Rand // used by the scheduling goroutine only
	started time.Time
	orders  []*faultOrder
	mu      sync.Mutex
	counts  map[string]int
	// procMu serializes kills and restarts of the processes.
	procMu   sync.Mutex
	answered atomic.Int64
}

func (f *faultRun) count(action string) {
	f.mu.Lock()
	f.counts[action]++
	f.mu.Unlock()
}

// next draws one action from the schedule. Everything random is drawn here, in the
// scheduling goroutine, so a seed gives the same sequence of actions.
func (f *faultRun) next() func() {
	o := f.orders[f.rng.IntN(len(f.orders))]
	r := f.rng.IntN(106)
	switch {
	case r < 30:
		mode, copies := f.rng.IntN(5), 1+f.rng.IntN(6)
		fresh := fmt.Sprintf("%s-k%d", o.base, f.rng.Uint32())
		return func() { f.checkout(o, mode, copies, fresh) }
	case r < 50:
		return func() { f.pay(o) }
	case r < 58:
		var body map[string]any
		switch f.rng.IntN(4) {
		case 0:
			body = map[string]any{"drop_next": 1 + f.rng.IntN(3)}
		case 1:
			body = map[string]any{"copies": 2 + f.rng.IntN(4)}
		case 2:
			body = map[string]any{"delay_ms": 200 + f.rng.IntN(1500)}
		default:
			body = map[string]any{"hold": true}
		}
		release := f.rng.IntN(3) == 0
		return func() {
			f.count("notification_fault")
			f.control(http.MethodPost, "/_sim/faults/notifications", body)
			if release {
				f.control(http.MethodPost, "/_sim/notifications/release", map[string]any{"order": "lifo"})
			}
		}
	case r < 61:
		modes := []string{"system_error", "http_error", "hang"}
		body := map[string]any{"mode": modes[f.rng.IntN(len(modes))], "count": 1 + f.rng.IntN(3)}
		return func() { f.count("gateway_fault"); f.control(http.MethodPost, "/_sim/faults/gateway", body) }
	case r < 64:
		// Alipay answers the next refunds fund_change "N" while it processes them (they
		// then succeed or fail), and its refund query lags.
		body := map[string]any{"processing_next": 1 + f.rng.IntN(2), "settle_ms": 200 + f.rng.IntN(2800),
			"fail": f.rng.IntN(2) == 0, "query_lag_ms": f.rng.IntN(1500)}
		return func() { f.count("refund_fault"); f.control(http.MethodPost, "/_sim/faults/refunds", body) }
	case r < 70:
		terminate := f.rng.IntN(2) == 0
		return func() { f.disturbWorkflow(o, terminate) }
	case r < 74:
		pause := time.Duration(300+f.rng.IntN(1500)) * time.Millisecond
		which := f.rng.IntN(2)
		return func() { f.crash(which, pause) }
	case r < 76:
		pause := time.Duration(500+f.rng.IntN(2500)) * time.Millisecond
		return func() {
			f.count("redis_down")
			f.proxy.setDown(true)
			time.Sleep(pause)
			f.proxy.setDown(false)
		}
	case r < 78:
		// Redis hangs: connections stay open, nothing is answered.
		pause := time.Duration(500+f.rng.IntN(2500)) * time.Millisecond
		return func() {
			f.count("redis_hang")
			f.proxy.setHung(true)
			time.Sleep(pause)
			f.proxy.setHung(false)
		}
	case r < 84:
		return func() { f.payOnClose(o) }
	case r < 90:
		return func() { f.payAtExpiry(o) }
	case r < 96:
		pick, fen, copies := f.rng.Uint32(), int64(1+f.rng.IntN(40)), 1+f.rng.IntN(4)
		key := ""
		if f.rng.IntN(4) != 0 {
			key = fmt.Sprintf("refund-%d", f.rng.Uint32())
		}
		return func() { f.refund(pick, fen, copies, key) }
	case r < 100:
		return func() { f.control(http.MethodPost, "/_sim/notifications/release", map[string]any{"order": "lifo"}) }
	case r < 101:
		pause := time.Duration(300+f.rng.IntN(2000)) * time.Millisecond
		return func() { f.pauseTemporal(pause) }
	case r < 102:
		pause := time.Duration(200+f.rng.IntN(1000)) * time.Millisecond
		return func() { f.apiDiesBeforeHandOver(pause) }
	case r < 103:
		pick, fen := f.rng.Uint32(), int64(1+f.rng.IntN(40))
		pause := time.Duration(200+f.rng.IntN(1000)) * time.Millisecond
		return func() { f.refundNotificationHandOverFails(pick, fen, pause) }
	case r < 105:
		// Alipay throttling the app for a while: its calls past a low rate are answered
		// 40005 (调用频次超限) and not carried out.
		body := map[string]any{"rate": 3 + f.rng.IntN(20), "burst": 1 + f.rng.IntN(5)}
		pause := time.Duration(500+f.rng.IntN(2500)) * time.Millisecond
		return func() {
			f.count("alipay_throttled")
			f.control(http.MethodPost, "/_sim/faults/throttle", body)
			time.Sleep(pause)
			f.control(http.MethodPost, "/_sim/faults/throttle", map[string]any{"rate": 0})
		}
	default:
		// Alipay failing for a long window: every call of the next 20 to 50 answers
		// SYSTEM_ERROR (trades that cannot be opened, queries and closes that fail).
		body := map[string]any{"mode": "system_error", "count": 20 + f.rng.IntN(31)}
		return func() { f.count("gateway_outage"); f.control(http.MethodPost, "/_sim/faults/gateway", body) }
	}
}

// pauseTemporal freezes the Temporal server (SIGSTOP) for pause: notifications are still
// acknowledged on their record, and handed over once it is back.
func (f *faultRun) pauseTemporal(pause time.Duration) {
	f.procMu.Lock()
	defer f.procMu.Unlock()
	f.count("temporal_paused")
	if err := env.temporal.pause(true); err != nil {
		f.t.Error(err)
		return
	}
	time.Sleep(pause)
	if err := env.temporal.pause(false); err != nil {
		f.t.Error(err)
	}
}

// apiDiesBeforeHandOver freezes Temporal, lets the held notifications reach the API (which
// records and acknowledges them, and cannot hand them over), kills the API, and starts it
// again after pause: the inbox's sweep hands them over.
func (f *faultRun) apiDiesBeforeHandOver(pause time.Duration) {
	f.procMu.Lock()
	defer f.procMu.Unlock()
	f.count("api_dies_before_hand_over")
	if err := env.temporal.pause(true); err != nil {
		f.t.Error(err)
		return
	}
	f.control(http.MethodPost, "/_sim/notifications/release", map[string]any{"order": "lifo"})
	time.Sleep(300 * time.Millisecond)
	f.st.api.kill()
	if err := env.temporal.pause(false); err != nil {
		f.t.Error(err)
	}
	time.Sleep(pause)
	if err := f.st.api.run(); err != nil {
		f.t.Errorf("restart api: %v", err)
	}
}

// refundNotificationHandOverFails holds Alipay's notifications, refunds one of the run's
// PAID payments (Alipay's refund notification is held with the rest), then lets them reach
// an API that records and acknowledges them while Temporal is frozen, and kills it before
// it can hand them over: the restarted API's inbox sweep hands the refund notification to
// its refund, and the run settles only if it is settled by the refund's outcome.
func (f *faultRun) refundNotificationHandOverFails(pick uint32, fen int64, pause time.Duration) {
	f.control(http.MethodPost, "/_sim/faults/notifications", map[string]any{"hold": true})
	f.refund(pick, fen, 1, fmt.Sprintf("refund-lost-%d", pick))
	time.Sleep(300 * time.Millisecond)
	f.count("refund_notification_hand_over_fails")
	f.apiDiesBeforeHandOver(pause)
}

// try is an HTTP call that may fail: processes are being killed.
func try(method, url string, headers map[string]string, body []byte) (response, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return response{}, err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	c := &http.Client{Timeout: 40 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

func (f *faultRun) control(method, path string, body any) {
	b, _ := json.Marshal(body)
	_, _ = try(method, env.simURL+path, map[string]string{"Content-Type": "application/json"}, b)
}

// acceptable lists the answers a checkout may get while the system is under faults.
// Anything else (a 5xx other than 503, a 4xx the request does not deserve) fails the run.
func acceptableCheckout(r response) bool {
	switch r.status {
	case http.StatusCreated, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case http.StatusConflict:
		var p struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(r.body, &p)
		switch p.Code {
		case payment.EINFLIGHT, payment.ETOKENUSED, payment.EORDERPAID, payment.EFINISHING, payment.ECONFLICT:
			return true
		}
	case http.StatusUnprocessableEntity:
		// Alipay refused the trade (a gateway fault outlasted the retries of its open).
		return bytes.Contains(r.body, []byte(payment.ECHANNEL))
	}
	return false
}

// checkout sends copies concurrent checkouts of o: mode 0 replays the order's last keyed
// request exactly (same key, same body), 1 uses a fresh key, 2 no key, 3 a fresh checkout
// token, 4 the order's last token again under a fresh key.
func (f *faultRun) checkout(o *faultOrder, mode, copies int, fresh string) {
	f.count(fmt.Sprintf("checkout_mode%d", mode))
	h := map[string]string{"Authorization": "Bearer " + f.tn.apiKey, "Content-Type": "application/json"}
	f.rotate(o)
	o.mu.Lock()
	id, key, b, token := o.cur(), o.lastKey, o.lastBody, o.token
	o.mu.Unlock()
	if mode != 0 || key == "" {
		if mode == 3 {
			r, err := try(http.MethodPost, f.st.apiURL+"/v1/checkout-tokens", h, []byte(`{"order_id":"`+id+`"}`))
			if err != nil || r.status != http.StatusCreated {
				return
			}
			var tok struct {
				Token string `json:"checkout_token"`
			}
			_ = json.Unmarshal(r.body, &tok)
			token = tok.Token
		}
		body := map[string]any{"order_id": id, "amount_fen": o.fen, "subject": "Fault order " + id, "method": string(o.method)}
		if (mode == 3 || mode == 4) && token != "" {
			body["checkout_token"] = token
		}
		b, _ = json.Marshal(body)
		key = fresh
		if mode == 2 {
			key = ""
		}
		o.mu.Lock()
		if key != "" {
			o.lastKey, o.lastBody = key, b
		}
		if mode == 3 {
			o.token = token
		}
		o.mu.Unlock()
	}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	var wg sync.WaitGroup
	for range copies {
		wg.Go(func() {
			r, err := try(http.MethodPost, f.st.apiURL+"/v1/payments", h, b)
			if err != nil {
				return // the API was killed under it
			}
			f.answered.Add(1)
			if !acceptableCheckout(r) {
				f.t.Errorf("checkout %s (mode %d): HTTP %d %s", id, mode, r.status, r.body)
			}
		})
	}
	wg.Wait()
}

// cur is the slot's current order id; the caller holds o.mu.
func (o *faultOrder) cur() string { return o.ids[len(o.ids)-1] }

func (o *faultOrder) current() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cur()
}

// rotate moves the slot to a new order once its current order is paid.
func (f *faultRun) rotate(o *faultOrder) {
	id := o.current()
	if _, paid, err := env.store.OrderPaidPayment(context.Background(), f.tn.id, id); err != nil || !paid {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cur() == id {
		o.ids = append(o.ids, fmt.Sprintf("%s-%d", o.base, len(o.ids)))
		o.lastKey, o.lastBody, o.token = "", nil, ""
	}
}

// pending returns the order's pending payment, if any.
func (f *faultRun) pending(o *faultOrder) (payment.Payment, bool) {
	ps, err := env.store.ListOrderPayments(context.Background(), f.tn.id, o.current())
	if err != nil {
		return payment.Payment{}, false
	}
	for _, p := range ps {
		if p.Status == payment.StatusPending {
			return p, true
		}
	}
	return payment.Payment{}, false
}

// pay pays the order's pending payment as the buyer: for a page payment, the cashier is
// opened first (the trade exists at Alipay from then on).
func (f *faultRun) pay(o *faultOrder) {
	p, ok := f.pending(o)
	if !ok {
		return
	}
	f.count("pay")
	if p.Method != payment.MethodQR {
		v, err := env.tc.QueryWorkflow(context.Background(), p.WorkflowID, "", "state")
		if err != nil {
			return
		}
		var state struct {
			PaymentNo string `json:"payment_no"`
			PayURL    string `json:"pay_url"`
		}
		if v.Get(&state) != nil || state.PayURL == "" || state.PaymentNo != p.PaymentNo {
			return
		}
		if _, err := try(http.MethodGet, state.PayURL, nil, nil); err != nil {
			return
		}
	}
	f.control(http.MethodPost, "/_sim/trades/"+p.PaymentNo+"/pay", map[string]any{})
}

// acceptableRefund lists the answers a refund may get while the system is under faults.
// One with neither an Idempotency-Key nor a refund_no is refused, whatever the faults.
func acceptableRefund(r response, keyless bool) bool {
	if keyless {
		return r.status == http.StatusBadRequest
	}
	switch r.status {
	case http.StatusCreated, http.StatusOK, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case http.StatusConflict:
		var p struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(r.body, &p)
		return p.Code == payment.EINFLIGHT || p.Code == payment.EREFUNDEXCEEDS
	}
	return false
}

// refund sends copies concurrent refund requests of fen for one of the run's PAID
// payments (pick chooses which), all with the same Idempotency-Key (or none).
func (f *faultRun) refund(pick uint32, fen int64, copies int, key string) {
	var paid []string
	for _, o := range f.orders {
		o.mu.Lock()
		ids := append([]string(nil), o.ids...)
		o.mu.Unlock()
		for _, id := range ids {
			if p, ok, err := env.store.OrderPaidPayment(context.Background(), f.tn.id, id); err == nil && ok {
				paid = append(paid, p.PaymentNo)
			}
		}
	}
	if len(paid) == 0 {
		return
	}
	p := payment.Payment{PaymentNo: paid[int(pick)%len(paid)]}
	f.count("refund")
	h := map[string]string{"Authorization": "Bearer " + f.tn.apiKey, "Content-Type": "application/json"}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	b, _ := json.Marshal(map[string]any{"amount_fen": fen, "reason": "fault suite"})
	var wg sync.WaitGroup
	for range copies {
		wg.Go(func() {
			r, err := try(http.MethodPost, f.st.apiURL+"/v1/payments/"+p.PaymentNo+"/refunds", h, b)
			if err != nil {
				return
			}
			if !acceptableRefund(r, key == "") {
				f.t.Errorf("refund of %s (%d fen): HTTP %d %s", p.PaymentNo, fen, r.status, r.body)
			}
		})
	}
	wg.Wait()
}

func (f *faultRun) payOnClose(o *faultOrder) {
	if p, ok := f.pending(o); ok {
		f.count("pay_on_close")
		f.control(http.MethodPost, "/_sim/trades/"+p.PaymentNo+"/pay_on_close", map[string]any{})
	}
}

// payAtExpiry waits for the last moment of the payment's life and pays it then.
func (f *faultRun) payAtExpiry(o *faultOrder) {
	p, ok := f.pending(o)
	if !ok {
		return
	}
	f.count("pay_at_expiry")
	if d := time.Until(p.ExpireAt) - 150*time.Millisecond; d > 0 && d < 10*time.Second {
		time.Sleep(d)
	}
	f.pay(o)
}

func (f *faultRun) disturbWorkflow(o *faultOrder, terminate bool) {
	ctx := context.Background()
	wid := payment.WorkflowID(f.tn.id, o.current())
	if terminate {
		f.count("terminate")
		_ = env.tc.TerminateWorkflow(ctx, wid, "", "fault suite")
		return
	}
	f.count("cancel")
	_ = env.tc.CancelWorkflow(ctx, wid, "")
}

// crash SIGKILLs the worker (which=0) or the API (1) and starts it again after pause.
func (f *faultRun) crash(which int, pause time.Duration) {
	f.procMu.Lock()
	defer f.procMu.Unlock()
	p, name := f.st.worker, "worker"
	if which == 1 {
		p, name = f.st.api, "api"
	}
	f.count("kill_" + name)
	p.kill()
	time.Sleep(pause)
	if err := p.run(); err != nil {
		f.t.Errorf("restart %s: %v", name, err)
	}
}

// heal ends every fault: Redis back (and answering), faults cleared, held notifications released, both
// processes running and ready.
func (f *faultRun) heal() {
	f.proxy.setHung(false)
	f.proxy.setDown(false)
	f.control(http.MethodDelete, "/_sim/faults", nil)
	f.control(http.MethodPost, "/_sim/notifications/release", map[string]any{"order": "lifo"})
	if err := waitAPI(f.st.apiURL, f.st.apiAdminURL); err != nil {
		f.t.Fatal(err)
	}
	if err := waitHTTP(f.st.workerAdminURL+"/readyz", 60*time.Second); err != nil {
		f.t.Fatal(err)
	}
}

// settle waits until no payment of the run is pending and every PAID one has its grant
// and a delivered payment.paid event.
func (f *faultRun) settle(d time.Duration) {
	deadline := time.Now().Add(d)
	for {
		pending := count(f.t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND status = 0", f.tn.id)
		ungranted := count(f.t, `SELECT COUNT(*) FROM payments p WHERE p.tenant_id = ? AND p.status = 1
			AND NOT EXISTS (SELECT 1 FROM benefit_grants g WHERE g.tenant_id = p.tenant_id AND g.payment_no = p.payment_no)`, f.tn.id)
		undelivered := count(f.t, `SELECT COUNT(*) FROM payment_events WHERE tenant_id = ? AND delivered = 0`, f.tn.id)
		refunding := count(f.t, "SELECT COUNT(*) FROM refunds WHERE tenant_id = ? AND status = 0", f.tn.id)
		// Every notification acknowledged to Alipay has had its effect.
		unsettled := count(f.t, `SELECT COUNT(*) FROM channel_notifications n JOIN payments p ON p.payment_no = n.payment_no
			WHERE p.tenant_id = ? AND n.dispatch_due_at IS NOT NULL`, f.tn.id)
		if pending == 0 && ungranted == 0 && undelivered == 0 && refunding == 0 && unsettled == 0 {
			f.t.Logf("settled %s after the faults ended", time.Since(deadline.Add(-d)).Round(time.Second))
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("not settled after %s: %d pending, %d PAID without a grant, %d undelivered events, %d pending refunds, %d unsettled notifications",
				d, pending, ungranted, undelivered, refunding, unsettled)
		}
		time.Sleep(time.Second)
	}
}

// check compares the simulator's ledger with MySQL and runs the auditor.
func (f *faultRun) check() {
	t := f.t
	r := do(t, http.MethodGet, env.simURL+"/_sim/trades", nil, nil)
	var ledger []struct {
		OutTradeNo  string `json:"out_trade_no"`
		TradeNo     string `json:"trade_no"`
		TradeStatus string `json:"trade_status"`
		TotalFen    int64  `json:"total_fen"`
		RefundedFen int64  `json:"refunded_fen"`
	}
	if err := json.Unmarshal(r.body, &ledger); err != nil {
		var wrapped struct {
			Trades json.RawMessage `json:"trades"`
		}
		if err2 := json.Unmarshal(r.body, &wrapped); err2 != nil || json.Unmarshal(wrapped.Trades, &ledger) != nil {
			t.Fatalf("ledger: %v %s", err, r.body[:min(len(r.body), 300)])
		}
	}
	ps := map[string]payment.Payment{}
	orderIDs := 0
	for _, o := range f.orders {
		for _, id := range o.ids {
			orderIDs++
			list, err := env.store.ListOrderPayments(context.Background(), f.tn.id, id)
			if err != nil {
				t.Fatal(err)
			}
			paid := 0
			for _, p := range list {
				ps[p.PaymentNo] = p
				if p.Status == payment.StatusPaid {
					paid++
				}
			}
			if paid > 1 {
				t.Errorf("order %s has %d PAID payments", id, paid)
			}
		}
	}
	paidAtAlipay := 0
	for _, tr := range ledger {
		p, ours := ps[tr.OutTradeNo]
		if !ours {
			continue
		}
		refundedInFull := tr.TradeStatus == "TRADE_CLOSED" && tr.RefundedFen > 0 && tr.RefundedFen == tr.TotalFen
		if tr.TradeStatus == "TRADE_SUCCESS" || tr.TradeStatus == "TRADE_FINISHED" || refundedInFull {
			paidAtAlipay++
			if p.Status != payment.StatusPaid || p.TradeNo != tr.TradeNo || int64(p.Amount) != tr.TotalFen {
				t.Errorf("paid at Alipay but %s locally: %+v (trade %s, %d fen)", p.Status, p, tr.TradeNo, tr.TotalFen)
			}
		}
	}
	localPaid := 0
	for _, p := range ps {
		if p.Status == payment.StatusPaid {
			localPaid++
		}
	}
	if localPaid != paidAtAlipay {
		t.Errorf("%d PAID locally, %d paid at Alipay", localPaid, paidAtAlipay)
	}
	// Refunds agree to the fen: what Alipay refunded is what MySQL holds as SUCCEEDED
	// and as refunded_fen, and never more than was paid.
	refunds, refundedFen := 0, int64(0)
	for _, tr := range ledger {
		p, ours := ps[tr.OutTradeNo]
		if !ours {
			continue
		}
		var succeeded int64
		if err := env.db.QueryRow("SELECT COALESCE(SUM(amount_fen), 0) FROM refunds WHERE payment_no = ? AND status = 1",
			p.PaymentNo).Scan(&succeeded); err != nil {
			t.Fatal(err)
		}
		if tr.RefundedFen != succeeded || int64(p.Refunded) != succeeded || tr.RefundedFen > tr.TotalFen {
			t.Errorf("payment %s: refunded %d fen at Alipay, %d SUCCEEDED and refunded_fen %d in MySQL, of %d paid",
				p.PaymentNo, tr.RefundedFen, succeeded, p.Refunded, tr.TotalFen)
		}
		refundedFen += tr.RefundedFen
	}
	var simRefundRows []simRefund
	failedAtAlipay := 0 // processing refunds that failed at Alipay (refund faults)
	do(t, http.MethodGet, env.simURL+"/_sim/refunds", nil, nil).json(t, &simRefundRows)
	for _, sr := range simRefundRows {
		if _, ours := ps[sr.OutTradeNo]; ours && sr.State == "succeeded" {
			refunds++
		} else if ours && sr.State == "failed" {
			failedAtAlipay++
		} else if ours {
			t.Errorf("refund %s of %s is %q at Alipay after the run settled", sr.OutRequestNo, sr.OutTradeNo, sr.State)
		}
	}
	if n := count(t, "SELECT COUNT(*) FROM refunds WHERE tenant_id = ? AND status = 1", f.tn.id); n != refunds {
		t.Errorf("%d refunds SUCCEEDED locally, %d fund changes at Alipay", n, refunds)
	}
	seenRefunds := map[string]bool{}
	for _, w := range env.merchant.received(f.tn.id) {
		if w.typ == payment.EventRefundSucceeded {
			seenRefunds[w.eventID] = true
		}
	}
	if len(seenRefunds) != refunds {
		t.Errorf("merchant received %d distinct refund.succeeded events for %d refunds", len(seenRefunds), refunds)
	}
	t.Logf("%d refunds, %d fen refunded, each once at Alipay and locally (%d more answered fund_change N and then failed at Alipay)", refunds, refundedFen, failedAtAlipay)
	if n := count(t, "SELECT COUNT(*) FROM payment_anomalies WHERE tenant_id = ?", f.tn.id); n != 0 {
		t.Errorf("%d anomalies recorded", n)
		f.logAnomalies()
	}
	grants := count(t, "SELECT COUNT(*) FROM benefit_grants WHERE tenant_id = ?", f.tn.id)
	if grants != localPaid {
		t.Errorf("%d grants for %d PAID payments", grants, localPaid)
	}
	seen := map[string]bool{}
	for _, w := range env.merchant.received(f.tn.id) {
		if w.typ == payment.EventPaymentPaid {
			seen[w.eventID] = true
		}
		if !w.verified {
			t.Errorf("webhook %s with a bad signature", w.eventID)
		}
	}
	if len(seen) != localPaid {
		t.Errorf("merchant received %d distinct payment.paid events for %d PAID payments", len(seen), localPaid)
	}
	f.audit()
	t.Logf("%d orders, %d payments (%d PAID, each once at Alipay and locally, %d grants), %d checkout answers",
		orderIDs, len(ps), localPaid, grants, f.answered.Load())
}

// logAnomalies prints each anomaly of the run's tenant, with the history of its payment's
// status, so that a failing run says what was found without its database, which the stack
// drops.
func (f *faultRun) logAnomalies() {
	rows, err := env.db.Query(`SELECT kind, payment_no, subject, trade_no, detail, created_at FROM payment_anomalies
		WHERE tenant_id = ? ORDER BY id`, f.tn.id)
	if err != nil {
		f.t.Errorf("list anomalies: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var kind, paymentNo, subject, tradeNo, detail, at string
		if err := rows.Scan(&kind, &paymentNo, &subject, &tradeNo, &detail, &at); err != nil {
			f.t.Errorf("list anomalies: %v", err)
			return
		}
		var status, orderID string
		_ = env.db.QueryRow("SELECT status, order_id FROM payments WHERE payment_no = ?", paymentNo).Scan(&status, &orderID)
		f.t.Logf("anomaly %s: payment %s (order %s, status %s), subject %q, trade %s, at %s: %s",
			kind, paymentNo, orderID, status, subject, tradeNo, at, detail)
	}
}

// audit runs `paykit audit` over the run's window against the same database, Alipay and
// Temporal; it must exit 0 with no findings.
func (f *faultRun) audit() { auditClean(f.t, f.st, f.started, f.tn.id) }

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// tcpProxy forwards a local port to Redis and can be switched off, closing every
// connection, to take Redis away from the API and worker without touching the server.
type tcpProxy struct {
	target string
	ln     net.Listener
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]struct{}
	// hung, while set, holds every byte in both directions: connections stay open and
	// commands are taken, but nothing is answered (a Redis that hangs rather than refuses).
	hung    bool
	resumed *sync.Cond
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.resumed = sync.NewCond(&p.mu)
	go p.serve()
	t.Cleanup(func() { _ = ln.Close(); p.setHung(false); p.setDown(true) })
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *tcpProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.hung {
				p.resumed.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// setHung holds, or lets go of, everything the proxy carries: a Redis that hangs.
func (p *tcpProxy) setHung(hung bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hung = hung
	if !hung {
		p.resumed.Broadcast()
	}
}

// setDown switches the proxy off (every connection is closed, new ones are refused) or on.
func (p *tcpProxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			_ = c.Close()
		}
	}
}
