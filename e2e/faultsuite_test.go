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
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/payment"
)

// TestRandomizedFaults runs orders through a random schedule of everything that can go
// wrong at once: duplicate checkouts (same key, other keys, tokens), pays at the
// simulator, dropped, duplicated, delayed and reordered notifications, Alipay gateway
// faults, terminated and cancelled workflows, SIGKILLed workers and APIs, Redis outages,
// races with expiry, duplicated partial refunds of paid payments (keyless ones too, which
// must be refused), refunds Alipay answers fund_change "N" while processing them,
// with a lagging refund query, and refund notifications recorded and acknowledged by an
// API that dies before handing them over, and Alipay throttling every app's calls, or
// the second app's alone (40005). Two tenants share the run's order slots: the first on
// the environment's Alipay app, the second on an app of its own. Then it heals the
// system, waits for every payment and refund to settle and checks the promise for both:
// the simulator's ledger and MySQL agree (refunds to the fen), no order is charged twice
// and no payment refunded above its amount, every PAID payment has one grant and a
// delivered webhook and became PAID within its bound (paidBound), the first app's paid
// while the second alone was throttled included, and `paykit audit` finds nothing.
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
	// The second app's id is drawn apart from the seed: the simulator is shared, and an
	// app is registered once with its keys.
	secondApp := fmt.Sprintf("2021%012d", rand.Uint64N(1e12))
	second, secretsEnv := ownAppTenant(t, secondApp, "2088"+secondApp[4:])
	st := newStack(t, stackOptions{paymentTTL: faultPaymentTTL, redisAddr: proxy.addr(), extraEnv: append([]string{
		"PAYKIT_SWEEP_STALE_AFTER=" + faultSweepStaleAfter.String(), "PAYKIT_WEBHOOK_MAX_ATTEMPTS=3"}, secretsEnv...)})
	pauseOtherSweepers(t, st)
	f := &faultRun{t: t, st: st, tns: []tenant{newTenant(t), second}, secondApp: secondApp, proxy: proxy,
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), started: time.Now(), counts: map[string]int{}}
	for i := range 24 {
		method := payment.MethodPage
		if i%3 == 0 {
			method = payment.MethodQR
		}
		base := fmt.Sprintf("fz%02d", i)
		// Every other slot is the second tenant's, on its own app.
		f.orders = append(f.orders, &faultOrder{base: base, tn: f.tns[i%2], ids: []string{base + "-0"}, fen: int64(100 + i), method: method})
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
	stopWatch := f.watchAlipay()
	deadline := time.Now().Add(dur)
	for time.Now().Before(deadline) {
		work <- f.next()
		time.Sleep(time.Duration(20+f.rng.IntN(60)) * time.Millisecond)
	}
	close(work)
	wg.Wait()
	f.heal()
	stopWatch()
	t.Logf("actions: %v", f.counts)
	f.settle(150 * time.Second)
	f.check()
}

const (
	// faultPaymentTTL is the life of the run's payments, and faultSweepStaleAfter how
	// long a pending payment may go without its run before the sweeper re-drives it.
	faultPaymentTTL      = 8 * time.Second
	faultSweepStaleAfter = 10 * time.Second
	// paidBound is how long a payment paid at Alipay may take to be PAID here once it is
	// due, counting only the time in which no fault held up its app's payments (see
	// faultRun.disturbed; for the second app, its own throttle too, which must not hold
	// up the first app's). It is due when Alipay took the money, or at its expiry if that
	// is later: a lost notification leaves it to the reconciler's queries, and after the
	// last of those the close path asks Alipay at expiry. The bound covers a close path
	// Alipay failed, tried again after up to 8 intervals with calls of up to 10 s that
	// hang; and a run the faults ended, re-driven by the sweeper once stale
	// (faultSweepStaleAfter) on its next sweep.
	paidBound = faultSweepStaleAfter + 20*time.Second
)

// faultOrder is one slot of the run, of one tenant. Once its order is paid (and so
// final), the slot moves on to a new order id, so that new payments keep being made for
// the whole run.
type faultOrder struct {
	base   string
	tn     tenant
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
	t  *testing.T
	st *stack
	// tns are the run's tenants: the first on the environment's Alipay app, the second
	// on secondApp, its own.
	tns       []tenant
	secondApp string
	proxy     *tcpProxy
	rng       *rand.Rand // used by the scheduling goroutine only
	started   time.Time
	orders    []*faultOrder
	mu        sync.Mutex
	counts    map[string]int
	// secondThrottled are the spans of time the second app's own throttle was on, and
	// disturbed those of the faults that hold up every app's payments (Alipay failing or
	// throttling every call, a process down or frozen, Redis gone).
	secondThrottled []timeSpan
	disturbed       []timeSpan
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
	r := f.rng.IntN(108)
	switch {
	case r < 30:
		mode, copies := f.rng.IntN(5), 1+f.rng.IntN(6)
		fresh := fmt.Sprintf("%s-k%d", o.base, f.rng.Uint32())
		return func() { f.checkout(o, mode, copies, fresh) }
	case r < 50:
		return func() { f.pay(o) }
	case r < 78:
		return f.nextFault(o, r)
	default:
		return f.nextLater(o, r)
	}
}

// nextFault draws the rest of an action of the schedule's second part (r in [50, 78)):
// notification, gateway and refund faults, disturbed workflows, crashes, Redis outages.
func (f *faultRun) nextFault(o *faultOrder, r int) func() {
	switch {
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
			defer f.disturbance()()
			f.proxy.setDown(true)
			time.Sleep(pause)
			f.proxy.setDown(false)
		}
	default:
		// Redis hangs: connections stay open, nothing is answered.
		pause := time.Duration(500+f.rng.IntN(2500)) * time.Millisecond
		return func() {
			f.count("redis_hang")
			defer f.disturbance()()
			f.proxy.setHung(true)
			time.Sleep(pause)
			f.proxy.setHung(false)
		}
	}
}

// nextLater draws the rest of an action of the schedule's last part (r in [78, 108)):
// races with expiry, refunds, releases, frozen Temporal, lost hand-overs, throttling and
// outages at Alipay.
func (f *faultRun) nextLater(o *faultOrder, r int) func() {
	switch {
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
	case r < 107:
		// Alipay throttling the second app alone, hard: the first app's calls go on.
		body := map[string]any{"app_id": f.secondApp, "rate": 1 + f.rng.IntN(5), "burst": 1 + f.rng.IntN(3)}
		pause := time.Duration(1000+f.rng.IntN(3000)) * time.Millisecond
		return func() { f.throttleSecondApp(body, pause) }
	default:
		// Alipay failing for a long window: every call of the next 20 to 50 answers
		// SYSTEM_ERROR (trades that cannot be opened, queries and closes that fail).
		body := map[string]any{"mode": "system_error", "count": 20 + f.rng.IntN(31)}
		return func() { f.count("gateway_outage"); f.control(http.MethodPost, "/_sim/faults/gateway", body) }
	}
}

// timeSpan is a span of wall-clock time.
type timeSpan struct{ from, to time.Time }

// throttleSecondApp throttles the second app alone (body) for pause, and records the
// span in which it was.
func (f *faultRun) throttleSecondApp(body map[string]any, pause time.Duration) {
	f.count("alipay_throttled_second_app")
	f.control(http.MethodPost, "/_sim/faults/throttle", body)
	from := time.Now()
	time.Sleep(pause)
	to := time.Now()
	f.control(http.MethodPost, "/_sim/faults/throttle", map[string]any{"app_id": f.secondApp, "rate": 0})
	f.mu.Lock()
	f.secondThrottled = append(f.secondThrottled, timeSpan{from, to})
	f.mu.Unlock()
}

// disturbance records a fault that holds up every app's payments from now until the
// function it returns is called.
func (f *faultRun) disturbance() func() {
	from := time.Now()
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.disturbed = append(f.disturbed, timeSpan{from, time.Now()})
	}
}

// watchAlipay records, until the function it returns is called, the spans in which
// Alipay failed calls of every app (gateway faults queued and not yet taken) or throttled
// them all: the faults are taken by whichever calls come first, so only the simulator
// knows when they end.
func (f *faultRun) watchAlipay() (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		var end func()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				if end != nil {
					end()
				}
				return
			case <-tick.C:
			}
			failing := f.alipayFailing()
			if failing && end == nil {
				end = f.disturbance()
			} else if !failing && end != nil {
				end()
				end = nil
			}
		}
	}()
	return func() { close(done); <-exited }
}

// alipayFailing reports whether the simulator has gateway faults queued or throttles
// every app (an unanswered question counts as failing).
func (f *faultRun) alipayFailing() bool {
	r, err := try(http.MethodGet, env.simURL+"/_sim/faults", nil, nil)
	if err != nil {
		return true
	}
	var fs alipaysim.FaultState
	if err := json.Unmarshal(r.body, &fs); err != nil {
		return true
	}
	return len(fs.Gateway) > 0 || fs.Throttle.Rate > 0
}

// pauseTemporal freezes the Temporal server (SIGSTOP) for pause: notifications are still
// acknowledged on their record, and handed over once it is back.
func (f *faultRun) pauseTemporal(pause time.Duration) {
	f.procMu.Lock()
	defer f.procMu.Unlock()
	f.count("temporal_paused")
	defer f.disturbance()()
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
	defer f.disturbance()()
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
	h := map[string]string{"Authorization": "Bearer " + o.tn.apiKey, "Content-Type": "application/json"}
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
	if _, paid, err := env.store.OrderPaidPayment(context.Background(), o.tn.id, id); err != nil || !paid {
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
	ps, err := env.store.ListOrderPayments(context.Background(), o.tn.id, o.current())
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
// payments (pick chooses which), all with the same Idempotency-Key (or none), as the
// payment's tenant.
func (f *faultRun) refund(pick uint32, fen int64, copies int, key string) {
	type paidOf struct {
		no string
		tn tenant
	}
	var paid []paidOf
	for _, o := range f.orders {
		o.mu.Lock()
		ids := append([]string(nil), o.ids...)
		o.mu.Unlock()
		for _, id := range ids {
			if p, ok, err := env.store.OrderPaidPayment(context.Background(), o.tn.id, id); err == nil && ok {
				paid = append(paid, paidOf{p.PaymentNo, o.tn})
			}
		}
	}
	if len(paid) == 0 {
		return
	}
	picked := paid[int(pick)%len(paid)]
	p := payment.Payment{PaymentNo: picked.no}
	f.count("refund")
	h := map[string]string{"Authorization": "Bearer " + picked.tn.apiKey, "Content-Type": "application/json"}
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
	wid := payment.WorkflowID(o.tn.id, o.current())
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
	defer f.disturbance()()
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

// tenantIn is the SQL condition that col names one of the run's tenants, whose ids
// (tenantArgs) are its arguments.
func (f *faultRun) tenantIn(col string) string {
	return col + " IN (?" + strings.Repeat(", ?", len(f.tns)-1) + ")"
}

func (f *faultRun) tenantArgs(more ...any) []any {
	args := make([]any, 0, len(f.tns)+len(more))
	for _, tn := range f.tns {
		args = append(args, tn.id)
	}
	return append(args, more...)
}

// settle waits until no payment of the run is pending and every PAID one has its grant
// and a delivered payment.paid event.
func (f *faultRun) settle(d time.Duration) {
	deadline := time.Now().Add(d)
	in, args := f.tenantIn("tenant_id"), f.tenantArgs()
	for {
		pending := count(f.t, "SELECT COUNT(*) FROM payments WHERE "+in+" AND status = 0", args...)
		ungranted := count(f.t, `SELECT COUNT(*) FROM payments p WHERE `+f.tenantIn("p.tenant_id")+` AND p.status = 1
			AND NOT EXISTS (SELECT 1 FROM benefit_grants g WHERE g.tenant_id = p.tenant_id AND g.payment_no = p.payment_no)`, args...)
		undelivered := count(f.t, `SELECT COUNT(*) FROM payment_events WHERE `+in+` AND delivered = 0`, args...)
		refunding := count(f.t, "SELECT COUNT(*) FROM refunds WHERE "+in+" AND status = 0", args...)
		// Every notification acknowledged to Alipay has had its effect.
		unsettled := count(f.t, `SELECT COUNT(*) FROM channel_notifications n JOIN payments p ON p.payment_no = n.payment_no
			WHERE `+f.tenantIn("p.tenant_id")+` AND n.dispatch_due_at IS NOT NULL`, args...)
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

// check compares the simulator's ledger with MySQL for both tenants, checks that every
// paid payment was PAID within its bound, and runs the auditor.
func (f *faultRun) check() {
	t := f.t
	var ledger []alipaysim.Trade
	do(t, http.MethodGet, env.simURL+"/_sim/trades", nil, nil).json(t, &ledger)
	ps, orderIDs := f.payments()
	localPaid := f.checkPaidAtAlipay(ps, ledger)
	f.checkRefunds(ps, ledger)
	if n := count(t, "SELECT COUNT(*) FROM payment_anomalies WHERE "+f.tenantIn("tenant_id"), f.tenantArgs()...); n != 0 {
		t.Errorf("%d anomalies recorded", n)
		f.logAnomalies()
	}
	grants := f.checkGrantsAndWebhooks(localPaid)
	f.checkPaidInBound(ps, ledger)
	f.audit()
	t.Logf("%d orders, %d payments (%d PAID, each once at Alipay and locally, %d grants), %d checkout answers",
		orderIDs, len(ps), localPaid, grants, f.answered.Load())
	for i, tn := range f.tns {
		n, paid := 0, 0
		for _, p := range ps {
			if p.TenantID == tn.id {
				n++
				if p.Status == payment.StatusPaid {
					paid++
				}
			}
		}
		app := appID
		if i > 0 {
			app = f.secondApp
		}
		t.Logf("tenant %s on app %s: %d payments, %d PAID", tn.id, app, n, paid)
	}
}

// payments reads every payment of every order id the run's slots used, and checks that
// no order has two PAID.
func (f *faultRun) payments() (map[string]payment.Payment, int) {
	ps := map[string]payment.Payment{}
	orderIDs := 0
	for _, o := range f.orders {
		for _, id := range o.ids {
			orderIDs++
			list, err := env.store.ListOrderPayments(context.Background(), o.tn.id, id)
			if err != nil {
				f.t.Fatal(err)
			}
			paid := 0
			for _, p := range list {
				ps[p.PaymentNo] = p
				if p.Status == payment.StatusPaid {
					paid++
				}
			}
			if paid > 1 {
				f.t.Errorf("order %s of tenant %s has %d PAID payments", id, o.tn.id, paid)
			}
		}
	}
	return ps, orderIDs
}

// paidAtAlipay reports whether the ledger holds tr as paid (refunded in full included).
func paidAtAlipay(tr alipaysim.Trade) bool {
	refundedInFull := tr.TradeStatus == "TRADE_CLOSED" && tr.RefundedFen > 0 && tr.RefundedFen == tr.TotalFen
	return tr.TradeStatus == "TRADE_SUCCESS" || tr.TradeStatus == "TRADE_FINISHED" || refundedInFull
}

// checkPaidAtAlipay checks that the payments paid at Alipay are those PAID locally, and
// returns how many are.
func (f *faultRun) checkPaidAtAlipay(ps map[string]payment.Payment, ledger []alipaysim.Trade) int {
	paid := 0
	for _, tr := range ledger {
		p, ours := ps[tr.OutTradeNo]
		if !ours || !paidAtAlipay(tr) {
			continue
		}
		paid++
		if p.Status != payment.StatusPaid || p.TradeNo != tr.TradeNo || int64(p.Amount) != tr.TotalFen {
			f.t.Errorf("paid at Alipay but %s locally: %+v (trade %s, %d fen)", p.Status, p, tr.TradeNo, tr.TotalFen)
		}
	}
	localPaid := 0
	for _, p := range ps {
		if p.Status == payment.StatusPaid {
			localPaid++
		}
	}
	if localPaid != paid {
		f.t.Errorf("%d PAID locally, %d paid at Alipay", localPaid, paid)
	}
	return localPaid
}

// checkRefunds checks that refunds agree to the fen: what Alipay refunded is what MySQL
// holds as SUCCEEDED and as refunded_fen, never more than was paid, and each succeeded
// refund reached its merchant once.
func (f *faultRun) checkRefunds(ps map[string]payment.Payment, ledger []alipaysim.Trade) {
	t := f.t
	refundedFen := f.checkRefundedFen(ps, ledger)
	refunds, failedAtAlipay := f.refundsAtAlipay(ps)
	if n := count(t, "SELECT COUNT(*) FROM refunds WHERE "+f.tenantIn("tenant_id")+" AND status = 1", f.tenantArgs()...); n != refunds {
		t.Errorf("%d refunds SUCCEEDED locally, %d fund changes at Alipay", n, refunds)
	}
	seen := map[string]bool{}
	for _, tn := range f.tns {
		for _, w := range env.merchant.received(tn.id) {
			if w.typ == payment.EventRefundSucceeded {
				seen[w.eventID] = true
			}
		}
	}
	if len(seen) != refunds {
		t.Errorf("merchant received %d distinct refund.succeeded events for %d refunds", len(seen), refunds)
	}
	t.Logf("%d refunds, %d fen refunded, each once at Alipay and locally (%d more answered fund_change N and then failed at Alipay)", refunds, refundedFen, failedAtAlipay)
}

// checkRefundedFen checks each of the run's trades: refunded at Alipay what MySQL holds
// as SUCCEEDED and as refunded_fen, never more than was paid. It returns the fen refunded.
func (f *faultRun) checkRefundedFen(ps map[string]payment.Payment, ledger []alipaysim.Trade) int64 {
	t := f.t
	refundedFen := int64(0)
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
	return refundedFen
}

// refundsAtAlipay counts the run's refunds that succeeded at Alipay, and those that
// answered fund_change "N" and then failed there; any other is still open after the run
// settled, which fails the test.
func (f *faultRun) refundsAtAlipay(ps map[string]payment.Payment) (succeeded, failed int) {
	t := f.t
	var simRefundRows []simRefund
	do(t, http.MethodGet, env.simURL+"/_sim/refunds", nil, nil).json(t, &simRefundRows)
	for _, sr := range simRefundRows {
		if _, ours := ps[sr.OutTradeNo]; ours && sr.State == "succeeded" {
			succeeded++
		} else if ours && sr.State == "failed" {
			failed++
		} else if ours {
			t.Errorf("refund %s of %s is %q at Alipay after the run settled", sr.OutRequestNo, sr.OutTradeNo, sr.State)
		}
	}
	return succeeded, failed
}

// checkGrantsAndWebhooks checks that every PAID payment has one grant and one
// payment.paid event at its merchant, every webhook signed; it returns the grants.
func (f *faultRun) checkGrantsAndWebhooks(localPaid int) int {
	t := f.t
	grants := count(t, "SELECT COUNT(*) FROM benefit_grants WHERE "+f.tenantIn("tenant_id"), f.tenantArgs()...)
	if grants != localPaid {
		t.Errorf("%d grants for %d PAID payments", grants, localPaid)
	}
	seen := map[string]bool{}
	for _, tn := range f.tns {
		for _, w := range env.merchant.received(tn.id) {
			if w.typ == payment.EventPaymentPaid {
				seen[w.eventID] = true
			}
			if !w.verified {
				t.Errorf("webhook %s of tenant %s with a bad signature", w.eventID, tn.id)
			}
		}
	}
	if len(seen) != localPaid {
		t.Errorf("merchant received %d distinct payment.paid events for %d PAID payments", len(seen), localPaid)
	}
	return grants
}

// checkPaidInBound checks that every payment paid at Alipay, of either app, became
// PAID within paidBound of when it was due (the payment.paid event is written with the
// transition), the first app's paid while the second app's own throttle was on
// included: one app's throttling holds up no other app's payments.
func (f *faultRun) checkPaidInBound(ps map[string]payment.Payment, ledger []alipaysim.Trade) {
	t := f.t
	paidHere := f.paidEventTimes()
	f.mu.Lock()
	spans := map[string][]timeSpan{
		f.tns[0].id: mergeSpans(f.disturbed),
		f.tns[1].id: mergeSpans(append(append([]timeSpan(nil), f.disturbed...), f.secondThrottled...)),
	}
	f.mu.Unlock()
	// The most undisturbed time a payment took once due, by tenant, and of the first
	// tenant's paid while the second app's own throttle was on.
	longest := map[string]time.Duration{}
	inThrottle, inThrottleLongest, inThrottleLag := 0, time.Duration(0), time.Duration(0)
	for _, tr := range ledger {
		p, ours := ps[tr.OutTradeNo]
		if !ours || !paidAtAlipay(tr) {
			continue
		}
		at, ok := paidHere[p.PaymentNo]
		if !ok {
			t.Errorf("payment %s (tenant %s) paid at Alipay has no payment.paid event", p.PaymentNo, p.TenantID)
			continue
		}
		due := tr.PaidAt
		if p.ExpireAt.After(due) {
			due = p.ExpireAt
		}
		took := undisturbed(due, at, spans[p.TenantID])
		if took > paidBound {
			t.Errorf("payment %s (tenant %s, order %s) paid at Alipay at %s, due at %s, PAID here at %s: %s of it undisturbed, past its bound (%s)",
				p.PaymentNo, p.TenantID, p.OrderID, stamp(tr.PaidAt), stamp(due), stamp(at), took.Round(time.Millisecond), paidBound)
		}
		longest[p.TenantID] = max(longest[p.TenantID], took)
		if p.TenantID == f.tns[0].id && f.secondThrottledAt(tr.PaidAt) {
			inThrottle++
			inThrottleLongest = max(inThrottleLongest, took)
			inThrottleLag = max(inThrottleLag, at.Sub(tr.PaidAt))
		}
	}
	t.Logf("paid at Alipay to PAID here, undisturbed time after due, at most: %s (first app), %s (second app), bound %s; %d payments of the first app paid while the second app alone was throttled (%d spans), at most %s (%s from Alipay to PAID here)",
		longest[f.tns[0].id].Round(time.Millisecond), longest[f.tns[1].id].Round(time.Millisecond), paidBound,
		inThrottle, len(f.secondThrottled), inThrottleLongest.Round(time.Millisecond), inThrottleLag.Round(time.Millisecond))
}

// paidEventTimes is when each payment of the run's tenants was PAID here: the time of its
// payment.paid event, written in the transition's transaction.
func (f *faultRun) paidEventTimes() map[string]time.Time {
	paid := map[string]time.Time{}
	rows, err := env.db.Query(`SELECT payment_no, MIN(created_at) FROM payment_events WHERE `+f.tenantIn("tenant_id")+
		` AND type = ? GROUP BY payment_no`, f.tenantArgs(payment.EventPaymentPaid)...)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var no string
		var at time.Time
		if err := rows.Scan(&no, &at); err != nil {
			f.t.Fatal(err)
		}
		paid[no] = at
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	return paid
}

func stamp(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// mergeSpans sorts spans and joins those that overlap.
func mergeSpans(spans []timeSpan) []timeSpan {
	sorted := append([]timeSpan(nil), spans...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].from.Before(sorted[j].from) })
	var out []timeSpan
	for _, s := range sorted {
		if n := len(out); n > 0 && !s.from.After(out[n-1].to) {
			if s.to.After(out[n-1].to) {
				out[n-1].to = s.to
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

// undisturbed is how much of [from, to) none of the merged spans covers.
func undisturbed(from, to time.Time, merged []timeSpan) time.Duration {
	if !to.After(from) {
		return 0
	}
	d := to.Sub(from)
	for _, s := range merged {
		lo, hi := s.from, s.to
		if lo.Before(from) {
			lo = from
		}
		if hi.After(to) {
			hi = to
		}
		if hi.After(lo) {
			d -= hi.Sub(lo)
		}
	}
	return d
}

// secondThrottledAt reports whether the second app's own throttle was on at at.
func (f *faultRun) secondThrottledAt(at time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.secondThrottled {
		if !at.Before(s.from) && !at.After(s.to) {
			return true
		}
	}
	return false
}

// logAnomalies prints each anomaly of the run's tenants, with the history of its payment's
// status, so that a failing run says what was found without its database, which the stack
// drops.
func (f *faultRun) logAnomalies() {
	rows, err := env.db.Query(`SELECT kind, payment_no, subject, trade_no, detail, created_at FROM payment_anomalies
		WHERE `+f.tenantIn("tenant_id")+` ORDER BY id`, f.tenantArgs()...)
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
// Temporal, for each of the run's tenants; it must exit 0 with no findings.
func (f *faultRun) audit() {
	ids := make([]string, len(f.tns))
	for i, tn := range f.tns {
		ids[i] = tn.id
	}
	auditClean(f.t, f.st, f.started, ids...)
}

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
