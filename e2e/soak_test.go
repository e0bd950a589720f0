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
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paykit/paykit/payment"
)

// TestSoak holds mixed load on one stack for PAYKIT_SOAK_DURATION (90 s in the test
// command; `scripts/soak.sh` runs 30 minutes at production intervals), as a real checkout
// page sees it: most checkouts are never paid (half of them open the cashier first), some
// are paid at the simulator and notified, some are repeated with their Idempotency-Key,
// paid ones are refunded (some of the refunds twice), one tenant's merchant answers slowly, and the sweeper runs on its schedule. It then requires:
//   - no 5xx and no transport error from the API, at any point of the run;
//   - checkout p99 within PAYKIT_SOAK_CHECKOUT_P99 (2 s);
//   - every payment settled exactly once: paid ones PAID with one grant and their webhook
//     delivered, abandoned ones CLOSED, one payment per order, refunds SUCCEEDED;
//   - an abandoned payment cost Alipay at most 5 queries;
//   - the worker's and the API's goroutines and resident memory flat: the last third of the
//     run at most 30% (plus a small allowance) above the middle third, once every payment
//     of the first TTL has reached its end.
func TestSoak(t *testing.T) {
	cfg := soakConfig{
		duration:    envDuration(t, "PAYKIT_SOAK_DURATION", 90*time.Second),
		ttl:         envDuration(t, "PAYKIT_SOAK_TTL", 20*time.Second),
		reconcile:   envDuration(t, "PAYKIT_SOAK_RECONCILE_INTERVAL", 2*time.Second),
		sweepEvery:  envDuration(t, "PAYKIT_SOAK_SWEEP_EVERY", 5*time.Second),
		p99:         envDuration(t, "PAYKIT_SOAK_CHECKOUT_P99", 2*time.Second),
		abandonRate: perfInt("PAYKIT_SOAK_ABANDON_RATE", 6),
		payRate:     perfInt("PAYKIT_SOAK_PAY_RATE", 2),
	}
	if cfg.duration < 3*cfg.ttl {
		t.Fatalf("PAYKIT_SOAK_DURATION (%v) must be at least 3 × PAYKIT_SOAK_TTL (%v) to reach a steady state", cfg.duration, cfg.ttl)
	}
	extra := []string{
		"PAYKIT_RECONCILE_INTERVAL=" + cfg.reconcile.String(),
		"PAYKIT_SWEEP_EVERY=" + cfg.sweepEvery.String(),
		"PAYKIT_SWEEP_STALE_AFTER=" + (cfg.ttl + 10*cfg.reconcile).String(),
		"PAYKIT_LOG_LEVEL=" + envOr("PAYKIT_SOAK_LOG_LEVEL", "warn"),
		// The slow merchant's events that outlast the workflow's attempts are the
		// sweeper's to redeliver, within the run.
		"PAYKIT_WEBHOOK_SWEEP_INITIAL_INTERVAL=" + envOr("PAYKIT_SOAK_WEBHOOK_SWEEP_INITIAL_INTERVAL", "1s"),
		"PAYKIT_WEBHOOK_SWEEP_MAX_INTERVAL=" + envOr("PAYKIT_SOAK_WEBHOOK_SWEEP_MAX_INTERVAL", "5s"),
	}
	// PAYKIT_SOAK_STALL_DIR: the first checkout slower than the p99 bound captures where
	// the API and the worker wait (goroutine dumps) and every Temporal and worker metric.
	stallDir := os.Getenv("PAYKIT_SOAK_STALL_DIR")
	st := newStack(t, stackOptions{paymentTTL: cfg.ttl, extraEnv: extra})
	apiPprof, workerPprof := hostOf(st.apiAdminURL), hostOf(st.workerAdminURL)
	fast := newTenant(t)
	slow := newTenant(t)
	sm := newSlowMerchant(t)
	if _, err := env.db.Exec("UPDATE tenants SET notify_url = ? WHERE id = ?", sm.url, slow.id); err != nil {
		t.Fatal(err)
	}
	s := &soak{t: t, cfg: cfg, st: st, tenants: []tenant{fast, slow}, stallDir: stallDir, apiPprof: apiPprof, workerPprof: workerPprof}
	s.run()
	s.settle()
	s.check()
}

type soakConfig struct {
	duration, ttl, reconcile, sweepEvery, p99 time.Duration
	abandonRate, payRate                      int
}

func envDuration(t *testing.T, k string, def time.Duration) time.Duration {
	v := os.Getenv(k)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: %v", k, err)
	}
	return d
}

type soakPayment struct {
	tenant    tenant
	orderID   string
	key       string
	paymentNo string
	paid      bool
}

type soak struct {
	t       *testing.T
	cfg     soakConfig
	st      *stack
	tenants []tenant
	seq     atomic.Int64
	wg      sync.WaitGroup
	// inFlight bounds the load generator; a request it could not start counts as shed.
	inFlight chan struct{}
	// stallDir, when set, receives one capture of a slow checkout (captured guards it).
	stallDir, apiPprof, workerPprof string
	captured                        atomic.Bool

	mu        sync.Mutex
	checkouts []time.Duration
	fails     []string // 5xx, transport errors and unexpected answers
	shed      int
	abandoned []*soakPayment
	paid      []*soakPayment
	refunds   int
	samples   []soakSample
}

type soakSample struct {
	at                time.Duration
	workerGor, apiGor float64
	workerRSS, apiRSS float64
}

func (s *soak) fail(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.fails) < 50 {
		s.fails = append(s.fails, fmt.Sprintf(format, args...))
	} else {
		s.fails[49] = fmt.Sprintf("… and more; last: "+format, args...)
	}
}

// api sends one API request; a 5xx or a transport error is a failure of the run.
func (s *soak) api(method, path string, tn tenant, key string, body any) (int, []byte) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.st.apiURL+path, rd)
	req.Header.Set("Authorization", "Bearer "+tn.apiKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		s.fail("%s %s: %v", method, path, err)
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 500 {
		s.fail("%s %s: HTTP %d %s", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode, b
}

func (s *soak) checkout(p *soakPayment) (checkoutResult, bool) {
	t0 := time.Now()
	slow := time.AfterFunc(s.cfg.p99, s.captureStall)
	code, b := s.api(http.MethodPost, "/v1/payments", p.tenant, p.key, order(p.orderID, 990))
	slow.Stop()
	d := time.Since(t0)
	s.mu.Lock()
	s.checkouts = append(s.checkouts, d)
	s.mu.Unlock()
	var res checkoutResult
	if code != http.StatusCreated && code != http.StatusOK {
		if code != 0 && code < 500 {
			s.fail("checkout %s: HTTP %d %s", p.orderID, code, b)
		}
		return res, false
	}
	if err := json.Unmarshal(b, &res); err != nil || res.PaymentNo == "" {
		s.fail("checkout %s: %v %s", p.orderID, err, b)
		return res, false
	}
	if p.paymentNo != "" && p.paymentNo != res.PaymentNo {
		s.fail("checkout %s repeated with its key answered payment %s, first %s", p.orderID, res.PaymentNo, p.paymentNo)
	}
	p.paymentNo = res.PaymentNo
	return res, true
}

// captureStall writes, once, goroutine dumps of the API and the worker and the metrics of
// Temporal and the worker, while a checkout is slower than the bound.
func (s *soak) captureStall() {
	if s.stallDir == "" || !s.captured.CompareAndSwap(false, true) {
		return
	}
	dir := filepath.Join(s.stallDir, time.Now().Format("150405"))
	_ = os.MkdirAll(dir, 0o755)
	s.t.Logf("soak: a checkout is slower than %v; capturing into %s", s.cfg.p99, dir)
	get := func(u, name string) {
		if resp, err := http.Get(u); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			_ = os.WriteFile(filepath.Join(dir, name), b, 0o644)
		}
	}
	get("http://"+s.apiPprof+"/debug/pprof/goroutine?debug=2", "api-goroutines.txt")
	get("http://"+s.workerPprof+"/debug/pprof/goroutine?debug=2", "worker-goroutines.txt")
	get("http://"+env.temporalMetrics+"/metrics", "temporal-metrics.txt")
	get(s.st.workerAdminURL+"/metrics", "worker-metrics.txt")
}

// sim calls the simulator as the buyer would; its failures are the run's too.
func (s *soak) sim(method, u string, body []byte) bool {
	req, _ := http.NewRequest(method, u, bytes.NewReader(body))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		s.fail("%s %s: %v", method, u, err)
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		s.fail("%s %s: HTTP %d", method, u, resp.StatusCode)
		return false
	}
	return true
}

func (s *soak) next(tn tenant) *soakPayment {
	n := s.seq.Add(1)
	id := fmt.Sprintf("soak%d", n)
	return &soakPayment{tenant: tn, orderID: id, key: "soak-" + id}
}

// spawn runs fn unless the generator already has its bound in flight.
func (s *soak) spawn(fn func()) {
	select {
	case s.inFlight <- struct{}{}:
	default:
		s.mu.Lock()
		s.shed++
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() { <-s.inFlight }()
		fn()
	}()
}

func (s *soak) run() {
	s.inFlight = make(chan struct{}, 128)
	start := time.Now()
	stop := make(chan struct{})
	var samplerDone sync.WaitGroup
	samplerDone.Add(1)
	go func() {
		defer samplerDone.Done()
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				w, a := scrape(s.st.workerAdminURL+"/metrics"), scrape(s.st.apiAdminURL+"/metrics")
				s.mu.Lock()
				s.samples = append(s.samples, soakSample{at: time.Since(start),
					workerGor: w["go_goroutines"], apiGor: a["go_goroutines"],
					workerRSS: w["process_resident_memory_bytes"], apiRSS: a["process_resident_memory_bytes"]})
				s.mu.Unlock()
			}
		}
	}()
	const step = 100 * time.Millisecond
	var abandonDue, payDue float64
	for i := 0; time.Since(start) < s.cfg.duration; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i) * step)))
		abandonDue += float64(s.cfg.abandonRate) * step.Seconds()
		payDue += float64(s.cfg.payRate) * step.Seconds()
		for ; abandonDue >= 1; abandonDue-- {
			tn := s.tenants[int(s.seq.Load())%len(s.tenants)]
			p := s.next(tn)
			openCashier := s.seq.Load()%2 == 0
			s.spawn(func() { s.abandon(p, openCashier) })
		}
		for ; payDue >= 1; payDue-- {
			tn := s.tenants[int(s.seq.Load())%len(s.tenants)]
			p := s.next(tn)
			s.spawn(func() { s.pay(p) })
		}
	}
	s.wg.Wait()
	close(stop)
	samplerDone.Wait()
}

// abandon is a checkout nobody pays: repeated once with its key (a double click), and for
// half of them the buyer opens the cashier, so Alipay has a trade waiting for payment.
func (s *soak) abandon(p *soakPayment, openCashier bool) {
	res, ok := s.checkout(p)
	if !ok {
		return
	}
	if _, ok := s.checkout(p); !ok {
		return
	}
	if openCashier && res.PayURL != "" {
		s.sim(http.MethodGet, res.PayURL, nil)
	}
	s.mu.Lock()
	s.abandoned = append(s.abandoned, p)
	s.mu.Unlock()
}

// pay is a checkout paid at the cashier and notified by the simulator; once PAID, every
// other one is refunded, and every fourth refund is sent twice with its key.
func (s *soak) pay(p *soakPayment) {
	res, ok := s.checkout(p)
	if !ok {
		return
	}
	if !s.sim(http.MethodGet, res.PayURL, nil) ||
		!s.sim(http.MethodPost, env.simURL+"/_sim/trades/"+res.PaymentNo+"/pay", []byte(`{}`)) {
		return
	}
	p.paid = true
	s.mu.Lock()
	s.paid = append(s.paid, p)
	n := len(s.paid)
	s.mu.Unlock()
	if n%2 != 0 {
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		pm, err := env.store.GetPayment(context.Background(), p.paymentNo)
		if err == nil && pm.Status == payment.StatusPaid {
			break
		}
		if time.Now().After(deadline) {
			s.fail("payment %s not PAID 30 s after the buyer paid", p.paymentNo)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	key := "soak-refund-" + p.orderID
	tries := 1
	if n%4 == 0 {
		tries = 2
	}
	var first string
	for range tries {
		code, b := s.api(http.MethodPost, "/v1/payments/"+p.paymentNo+"/refunds", p.tenant, key, map[string]any{"amount_fen": 100})
		if code != http.StatusCreated && code != http.StatusOK {
			if code != 0 && code < 500 {
				s.fail("refund of %s: HTTP %d %s", p.paymentNo, code, b)
			}
			return
		}
		var r payment.Refund
		_ = json.Unmarshal(b, &r)
		if first != "" && r.RefundNo != first {
			s.fail("refund of %s repeated with its key made refund %s, first %s", p.paymentNo, r.RefundNo, first)
		}
		first = r.RefundNo
	}
	s.mu.Lock()
	s.refunds++
	s.mu.Unlock()
}

// settle waits until every payment and refund of the run has reached its end: abandoned
// ones close at expiry, paid ones are PAID with their webhook delivered.
func (s *soak) settle() {
	t := s.t
	deadline := time.Now().Add(s.cfg.ttl + 20*s.cfg.reconcile + 90*time.Second)
	ids := s.tenantIDs()
	for {
		pending := count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id IN (?, ?) AND status = 0", ids[0], ids[1])
		refunds := count(t, "SELECT COUNT(*) FROM refunds WHERE tenant_id IN (?, ?) AND status = 0", ids[0], ids[1])
		undelivered := count(t, `SELECT COUNT(*) FROM payment_events WHERE tenant_id IN (?, ?) AND delivered = 0`, ids[0], ids[1])
		if pending == 0 && refunds == 0 && undelivered == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("not settled after the run: %d payments pending, %d refunds pending, %d events undelivered", pending, refunds, undelivered)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (s *soak) tenantIDs() []string { return []string{s.tenants[0].id, s.tenants[1].id} }

func (s *soak) check() {
	t := s.t
	s.mu.Lock()
	defer s.mu.Unlock()
	lat := slices.Clone(s.checkouts)
	slices.Sort(lat)
	p99 := time.Duration(0)
	if len(lat) > 0 {
		p99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	t.Logf("soak: %v, %d checkouts (p50 %v, p99 %v), %d abandoned, %d paid, %d refunded, %d shed, %d failures",
		s.cfg.duration, len(lat), lat[len(lat)/2], p99, len(s.abandoned), len(s.paid), s.refunds, s.shed, len(s.fails))
	for _, f := range s.fails {
		t.Errorf("soak: %s", f)
	}
	if s.shed > 0 {
		t.Errorf("soak: the load generator shed %d requests: the API fell behind the offered load", s.shed)
	}
	if p99 > s.cfg.p99 {
		t.Errorf("soak: checkout p99 %v, want at most %v", p99, s.cfg.p99)
	}
	ids := s.tenantIDs()
	if n := count(t, `SELECT COUNT(*) FROM (SELECT order_id FROM payments WHERE tenant_id IN (?, ?)
		GROUP BY tenant_id, order_id HAVING COUNT(*) > 1) d`, ids[0], ids[1]); n != 0 {
		t.Errorf("soak: %d orders with more than one payment", n)
	}
	for _, p := range s.paid {
		pm, err := env.store.GetPayment(context.Background(), p.paymentNo)
		if err != nil || pm.Status != payment.StatusPaid {
			t.Errorf("soak: paid payment %s is %s (%v)", p.paymentNo, pm.Status, err)
		}
	}
	if n := count(t, `SELECT COUNT(*) FROM payments p WHERE p.tenant_id IN (?, ?) AND p.status = 1 AND
		(SELECT COUNT(*) FROM benefit_grants g WHERE g.payment_no = p.payment_no) <> 1`, ids[0], ids[1]); n != 0 {
		t.Errorf("soak: %d PAID payments without exactly one grant", n)
	}
	if n := count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id IN (?, ?) AND status = 1", ids[0], ids[1]); n != len(s.paid) {
		t.Errorf("soak: %d payments PAID, %d paid by the buyer", n, len(s.paid))
	}
	for _, p := range s.abandoned {
		pm, err := env.store.GetPayment(context.Background(), p.paymentNo)
		if err != nil || pm.Status != payment.StatusClosed {
			t.Errorf("soak: abandoned payment %s is %s (%v)", p.paymentNo, pm.Status, err)
		}
	}
	if n := count(t, "SELECT COUNT(*) FROM refunds WHERE tenant_id IN (?, ?) AND status = 1", ids[0], ids[1]); n != s.refunds {
		t.Errorf("soak: %d refunds SUCCEEDED, %d requested", n, s.refunds)
	}
	// What an abandoned checkout cost Alipay.
	worst, worstNo := 0, ""
	for _, p := range s.abandoned {
		var calls map[string]int
		do(t, http.MethodGet, env.simURL+"/_sim/calls?out_trade_no="+p.paymentNo, nil, nil).json(t, &calls)
		if q := calls["alipay.trade.query"]; q > worst {
			worst, worstNo = q, p.paymentNo
		}
	}
	t.Logf("soak: at most %d Alipay queries for an abandoned payment (%s)", worst, worstNo)
	if worst > 5 {
		t.Errorf("soak: abandoned payment %s cost %d Alipay queries, want at most 5", worstNo, worst)
	}
	s.checkFlat()
}

// checkFlat compares the last third of the run with the middle third: once the first
// TTL's payments have ended, open payments stay level, and so must what the processes
// hold.
func (s *soak) checkFlat() {
	t := s.t
	third := s.cfg.duration / 3
	var mid, last soakSample
	for _, x := range s.samples {
		w := &mid
		switch {
		case x.at < third:
			continue
		case x.at >= 2*third:
			w = &last
		}
		w.workerGor, w.apiGor = max(w.workerGor, x.workerGor), max(w.apiGor, x.apiGor)
		w.workerRSS, w.apiRSS = max(w.workerRSS, x.workerRSS), max(w.apiRSS, x.apiRSS)
	}
	t.Logf("soak: middle third max: worker %.0f goroutines %.0f MiB, api %.0f goroutines %.0f MiB; last third: worker %.0f, %.0f MiB, api %.0f, %.0f MiB",
		mid.workerGor, mid.workerRSS/(1<<20), mid.apiGor, mid.apiRSS/(1<<20), last.workerGor, last.workerRSS/(1<<20), last.apiGor, last.apiRSS/(1<<20))
	if mid.workerGor == 0 || mid.workerRSS == 0 || mid.apiGor == 0 {
		t.Errorf("soak: no samples of the processes' metrics in the middle third")
		return
	}
	for _, c := range []struct {
		name      string
		mid, last float64
		slack     float64
	}{
		{"worker goroutines", mid.workerGor, last.workerGor, 200},
		{"api goroutines", mid.apiGor, last.apiGor, 200},
		{"worker resident memory", mid.workerRSS, last.workerRSS, 48 << 20},
		{"api resident memory", mid.apiRSS, last.apiRSS, 48 << 20},
	} {
		if c.last > 1.3*c.mid+c.slack {
			t.Errorf("soak: %s grew from %.0f in the middle third to %.0f in the last", c.name, c.mid, c.last)
		}
	}
}

// slowMerchant is a merchant whose webhook endpoint answers after a second and a half.
type slowMerchant struct {
	url string
	n   atomic.Int64
}

func newSlowMerchant(t *testing.T) *slowMerchant {
	m := &slowMerchant{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(1500 * time.Millisecond)
		m.n.Add(1)
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	m.url = "http://" + l.Addr().String() + "/webhook"
	return m
}
