package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/paykit/paykit/payment"
)

// TestPerf is the benchmark: in one run, against one Temporal server, it measures
// Temporal's own floors and paykit's paths side by side, each pair alternately for
// several rounds, and prints the medians with their ratios to the floor and the targets.
// It runs only when asked (scripts/bench.sh sets PAYKIT_PERF=1):
//
//	PAYKIT_PERF=1 go test ./e2e -run '^TestPerf$' -v -timeout 60m
//
// Knobs: PAYKIT_PERF_ROUNDS (3), PAYKIT_PERF_CHECKOUTS per round (300),
// PAYKIT_PERF_PAYMENTS per round (150), PAYKIT_PERF_CALLBACK_RATE (200 per second),
// PAYKIT_PERF_CALLBACK_SECONDS (3), PAYKIT_PERF_DUPLICATES (200),
// PAYKIT_PERF_PROFILE_DIR (CPU profiles of the API and worker and Temporal's metrics,
// taken in the last round). After the rounds, once: the checkout's scale curve at
// PAYKIT_PERF_CURVE concurrencies (8,32,128,512; off) and the checkout with
// PAYKIT_PERF_OPEN unpaid payments open (10000; 0 skips it), PAYKIT_PERF_PAID whole payments
// in one run (10000; 0 skips it), perf_scale_test.go. PAYKIT_PERF_WORKERS=2 adds a second
// worker and a second API, and the requests go to the two APIs in turn.
func TestPerf(t *testing.T) {
	if os.Getenv("PAYKIT_PERF") == "" {
		t.Skip("the benchmark runs with PAYKIT_PERF=1 (scripts/bench.sh)")
	}
	cfg := perfConfig{
		rounds:      perfInt("PAYKIT_PERF_ROUNDS", 3),
		checkouts:   perfInt("PAYKIT_PERF_CHECKOUTS", 300),
		payments:    perfInt("PAYKIT_PERF_PAYMENTS", 150),
		rate:        perfInt("PAYKIT_PERF_CALLBACK_RATE", 200),
		seconds:     perfInt("PAYKIT_PERF_CALLBACK_SECONDS", 3),
		duplicates:  perfInt("PAYKIT_PERF_DUPLICATES", 200),
		profileDir:  os.Getenv("PAYKIT_PERF_PROFILE_DIR"),
		checkoutCon: 32,
		paymentCon:  16,
	}
	p := newPerf(t, cfg)
	var res perfResults
	res.dupKey, res.dupOrder = p.duplicateCosts(t)
	for r := 0; r < cfg.rounds; r++ {
		profile := cfg.profileDir != "" && r == cfg.rounds-1
		// Each pair alternates which side runs first, so drift of the shared machine
		// during a round does not favour one side.
		pair := func(floor, sys func() perfSample, fs, ss *[]perfSample) {
			if r%2 == 0 {
				*fs = append(*fs, cpuMeasured(floor))
				*ss = append(*ss, sys())
			} else {
				*ss = append(*ss, sys())
				*fs = append(*fs, cpuMeasured(floor))
			}
		}
		pair(func() perfSample {
			return p.withProfile(t, profile, "floor-checkout", 20, func() perfSample { return p.floorCheckouts(t) })
		},
			func() perfSample {
				return p.withProfile(t, profile, "checkout", 20, func() perfSample { return p.checkouts(t) })
			},
			&res.floorUWS, &res.checkout)
		res.checkoutUpd = append(res.checkoutUpd, p.counted(func() perfSample { return p.updateCheckouts(t) }))
		res.floorStart = append(res.floorStart, cpuMeasured(func() perfSample { return p.floorStarts(t, false) }))
		res.floorEager = append(res.floorEager, cpuMeasured(func() perfSample { return p.floorStarts(t, true) }))
		p.drain(t)
		pair(func() perfSample {
			return p.withProfile(t, profile, "floor-payment", 20, func() perfSample { return p.floorPayments(t) })
		},
			func() perfSample {
				return p.withProfile(t, profile, "payment", 20, func() perfSample { return p.payments(t) })
			},
			&res.floorPay, &res.payment)
		p.drain(t)
		// The same whole payment through WeChat Pay, right after Alipay's on the same stack.
		res.wxPayment = append(res.wxPayment, p.withProfile(t, profile, "wechatpay-payment", 20, func() perfSample { return p.wechatPayments() }))
		p.drain(t)
		ack, toPaid := p.callbacks(t, profile)
		res.callback, res.toPaid = append(res.callback, ack), append(res.toPaid, toPaid)
		p.drain(t)
		t.Logf("round %d: floor UWS %s | checkout %s | checkout by update %s | floor payment %s | payment %s | WeChat Pay payment %s | callbacks %s, to PAID %s", r+1,
			res.floorUWS[r], res.checkout[r], res.checkoutUpd[r], res.floorPay[r], res.payment[r], res.wxPayment[r], res.callback[r], res.toPaid[r])
	}
	res.curve = p.scaleCurve(t, perfLevels(t))
	if n := perfPaid(t); n > 0 {
		res.paid = p.paidRun(t, n)
	}
	if n := perfOpen(t); n > 0 {
		res.open = p.openPayments(t, n)
	}
	table := res.table(cfg) + curveTable(res.curve) + paidTable(res.paid) + openTable(res.open)
	fmt.Println(table)
	if out := os.Getenv("PAYKIT_PERF_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(table+"\n"), 0o644); err != nil {
			t.Error(err)
		}
	}
}

type perfConfig struct {
	rounds, checkouts, payments, rate, seconds, duplicates int
	checkoutCon, paymentCon                                int
	profileDir                                             string
}

func perfInt(k string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(k)); err == nil && n > 0 {
		return n
	}
	return def
}

// perf is the benchmark's own stack: one API and one worker with production intervals,
// a private Redis (so INFO commandstats counts only paykit's commands), a MySQL user of
// its own (so USER_STATISTICS counts only paykit's statements), and the floor worker.
type perf struct {
	cfg       perfConfig
	st        *stack
	tn        tenant
	rdb       *goredis.Client
	dbUser    string
	floorTQ   string
	floorC    client.Client
	seq       atomic.Int64
	apiPprof  string
	workPprof string
	userstat  bool
	// redisAddr and dsn are the benchmark's own Redis and MySQL user, for a second API.
	redisAddr, dsn string
	// updateAPI is an API on the same worker whose checkouts all wait for the workflow's
	// checkout update (PAYKIT_CHECKOUT_DIRECT=false).
	updateAPI string
	// apis are the APIs the measured requests go to, in turn (two with
	// PAYKIT_PERF_WORKERS=2, as behind a balancer); next picks the next one.
	apis []string
	next atomic.Uint64
}

const (
	floorCheckoutWF = "PerfFloorCheckout"
	floorStartWF    = "PerfFloorStart"
	floorPaymentWF  = "PerfFloorPayment"
	floorUpdate     = "checkout"
	floorSignal     = "paid"
)

func floorLocal(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second})
}

func floorNoop(context.Context) error { return nil }

// floorCheckout is the floor of a checkout: UpdateWithStart answered after one no-op
// local activity.
func floorCheckout(ctx workflow.Context) error {
	if err := floorStart(ctx); err != nil {
		return err
	}
	return workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}

// floorStart registers the checkout update, which answers once one no-op local activity
// has run, and runs it.
func floorStart(ctx workflow.Context) error {
	ready := false
	if err := workflow.SetUpdateHandler(ctx, floorUpdate, func(ctx workflow.Context) (string, error) {
		err := workflow.Await(ctx, func() bool { return ready })
		return "ok", err
	}); err != nil {
		return err
	}
	if err := workflow.ExecuteLocalActivity(floorLocal(ctx), floorNoop).Get(ctx, nil); err != nil {
		return err
	}
	ready = true
	return nil
}

// floorStarted is the floor of the direct checkout: a start, accepted, of a run whose
// first task runs one no-op local activity (the starter does not wait for it).
func floorStarted(ctx workflow.Context) error {
	return workflow.ExecuteLocalActivity(floorLocal(ctx), floorNoop).Get(ctx, nil)
}

// floorStarts starts floorStarted runs, conc at a time, each measured until Temporal has
// accepted its start; eager asks for eager workflow start, whose first task goes straight
// to the floor worker in this process.
func (p *perf) floorStarts(t *testing.T, eager bool) perfSample {
	prefix := "perf-start-" + randHex(4) + "-"
	return closedLoop(p.cfg.checkouts, p.cfg.checkoutCon, func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_, err := p.floorC.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: prefix + strconv.Itoa(i), TaskQueue: p.floorTQ,
			EnableEagerStart: eager}, floorStartWF)
		return err
	})
}

// floorPayment is the minimal shape of a payment: the checkout floor, then one signal
// and one local activity to finish.
func floorPayment(ctx workflow.Context) error {
	if err := floorStart(ctx); err != nil {
		return err
	}
	workflow.GetSignalChannel(ctx, floorSignal).Receive(ctx, nil)
	if err := workflow.ExecuteLocalActivity(floorLocal(ctx), floorNoop).Get(ctx, nil); err != nil {
		return err
	}
	return workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}

func newPerf(t *testing.T, cfg perfConfig) *perf {
	p := &perf{cfg: cfg, floorTQ: "perf-floor-" + randHex(4)}

	// A Redis of its own, so that its command counts are paykit's alone.
	redisAddr := singleRedisAddr()
	if bin, err := exec.LookPath("redis-server"); err == nil {
		addr := freeAddr()
		if _, err := env.start("perf-redis", bin, []string{"--bind", "127.0.0.1", "--port", portOf(addr), "--save", "", "--appendonly", "no"}, nil); err != nil {
			t.Fatal(err)
		}
		if err := waitTCP(addr, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		redisAddr = addr
	} else {
		t.Log("no redis-server binary: Redis command counts are server-wide")
	}
	p.rdb = goredis.NewClient(&goredis.Options{Addr: redisAddr})
	t.Cleanup(func() { _ = p.rdb.Close() })

	// A MySQL user of its own, counted by USER_STATISTICS.
	p.dbUser = "pkperf_" + randHex(3)
	mustExec(t, "CREATE USER '"+p.dbUser+"'@'%'")
	mustExec(t, "GRANT ALL ON "+env.dbName+".* TO '"+p.dbUser+"'@'%'")
	t.Cleanup(func() { _, _ = env.db.Exec("DROP USER IF EXISTS '" + p.dbUser + "'@'%'") })
	var was string
	if err := env.db.QueryRow("SELECT @@GLOBAL.userstat").Scan(&was); err == nil {
		if _, err := env.db.Exec("SET GLOBAL userstat = 1"); err == nil {
			p.userstat = true
			if was == "0" || strings.EqualFold(was, "OFF") {
				t.Cleanup(func() { _, _ = env.db.Exec("SET GLOBAL userstat = 0") })
			}
		}
	}
	base := envOr("PAYKIT_TEST_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/")
	_, hostPart, _ := strings.Cut(base, "@")
	dsn := p.dbUser + "@" + strings.TrimSuffix(hostPart, "/") + "/" + env.dbName

	p.redisAddr, p.dsn = redisAddr, dsn
	st, err := startStack("perf", stackOptions{paymentTTL: 2 * time.Hour, redisAddr: redisAddr, extraEnv: []string{
		"PAYKIT_MYSQL_DSN=" + dsn,
		// Production intervals: nothing in the background during a measurement.
		"PAYKIT_RECONCILE_INTERVAL=1h", "PAYKIT_SWEEP_EVERY=30m", "PAYKIT_SWEEP_STALE_AFTER=3h",
		"PAYKIT_INBOX_SETTLE_BOUND=30s", "PAYKIT_INBOX_SWEEP_INTERVAL=5s",
		"PAYKIT_LOG_LEVEL=warn",
	}})
	if st != nil {
		t.Cleanup(func() {
			st.api.stop()
			st.worker.stop()
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	p.apiPprof, p.workPprof = hostOf(st.apiAdminURL), hostOf(st.workerAdminURL)
	// PAYKIT_PERF_WORKERS=2: a second paykit worker process on the same task queue and
	// database, as in the production topology (its workflow tasks and activities share
	// the load with the first).
	if perfWorkers() > 1 {
		extra, err := startStack("perf-worker2", stackOptions{paymentTTL: 2 * time.Hour, redisAddr: redisAddr, taskQueue: st.taskQueue,
			// Its trades' notify_url is the first stack's API, as behind one balancer.
			extraEnv: []string{"PAYKIT_MYSQL_DSN=" + dsn, "PAYKIT_PUBLIC_URL=" + st.apiURL, "PAYKIT_RECONCILE_INTERVAL=1h", "PAYKIT_SWEEP_EVERY=30m",
				"PAYKIT_SWEEP_STALE_AFTER=3h", "PAYKIT_INBOX_SETTLE_BOUND=30s", "PAYKIT_INBOX_SWEEP_INTERVAL=5s", "PAYKIT_LOG_LEVEL=warn"}})
		if extra != nil {
			t.Cleanup(func() {
				extra.api.stop()
				extra.worker.stop()
			})
		}
		if err != nil {
			t.Fatal(err)
		}
		// Its API takes every other request, as behind a balancer.
		p.apis = append(p.apis, extra.apiURL)
	}
	p.apis = append([]string{st.apiURL}, p.apis...)
	p.st = st
	p.tn = newTenant(t)
	p.updateAPI = p.secondAPI(t, "perf-update", 2*time.Hour, "PAYKIT_CHECKOUT_DIRECT=false", "PAYKIT_RECONCILE_INTERVAL=1h")

	// The floor worker, in this process, with the pollers and slots paykit's worker has.
	if p.floorC, err = client.Dial(client.Options{HostPort: env.temporalAddr, Logger: quietLogger{}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.floorC.Close)
	w := sdkworker.New(p.floorC, p.floorTQ, sdkworker.Options{
		MaxConcurrentActivityExecutionSize: 200, MaxConcurrentLocalActivityExecutionSize: 200,
		MaxConcurrentWorkflowTaskPollers: 16, MaxConcurrentActivityTaskPollers: 8,
	})
	w.RegisterWorkflowWithOptions(floorCheckout, workflow.RegisterOptions{Name: floorCheckoutWF})
	w.RegisterWorkflowWithOptions(floorPayment, workflow.RegisterOptions{Name: floorPaymentWF})
	w.RegisterWorkflowWithOptions(floorStarted, workflow.RegisterOptions{Name: floorStartWF})
	w.RegisterActivity(floorNoop)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	// Warm up both sides so that the first round does not pay for connections and caches.
	p.floor(t, floorCheckoutWF, 32, 64)
	p.checkoutsN(t, 32, 64)
	p.drain(t)
	return p
}

func mustExec(t *testing.T, q string) {
	t.Helper()
	if _, err := env.db.Exec(q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// perfSample is one measurement: successes, errors, wall time and latencies.
type perfSample struct {
	ok, errs int
	elapsed  time.Duration
	lat      []time.Duration
	firstErr string
	// MySQL statements (paykit's user: API and worker) and Redis commands per operation,
	// for paykit's phases.
	mysqlPerOp, redisPerOp float64
	// cpu is the phase's CPU per operation by process group (perf_cpu_test.go).
	cpu cpuCost
}

func (s perfSample) rate() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(s.ok) / s.elapsed.Seconds()
}

func (s perfSample) pct(q float64) time.Duration {
	if len(s.lat) == 0 {
		return 0
	}
	l := append([]time.Duration(nil), s.lat...)
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	i := int(q*float64(len(l))+0.5) - 1
	return l[min(max(i, 0), len(l)-1)]
}

func (s perfSample) String() string {
	e := ""
	if s.errs > 0 {
		e = fmt.Sprintf(" (%d errors: %s)", s.errs, s.firstErr)
	}
	io := ""
	if s.mysqlPerOp > 0 || s.redisPerOp > 0 {
		io = fmt.Sprintf(" [%.1f MySQL statements, %.1f Redis commands per op]", s.mysqlPerOp, s.redisPerOp)
	}
	return fmt.Sprintf("%.1f/s p50 %s p99 %s%s%s", s.rate(), ms(s.pct(.5)), ms(s.pct(.99)), e, io)
}

func ms(d time.Duration) string {
	if d >= time.Second {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.0f ms", float64(d.Microseconds())/1000)
}

// closedLoop runs n calls of fn, conc at a time.
func closedLoop(n, conc int, fn func(i int) error) perfSample {
	var (
		mu  sync.Mutex
		s   perfSample
		wg  sync.WaitGroup
		idx atomic.Int64
	)
	start := time.Now()
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(idx.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				err := fn(i)
				d := time.Since(t0)
				mu.Lock()
				if err != nil {
					s.errs++
					if s.firstErr == "" {
						s.firstErr = err.Error()
					}
				} else {
					s.ok++
					s.lat = append(s.lat, d)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	s.elapsed = time.Since(start)
	return s
}

// floor runs n floor workflows of the given type, conc at a time: UpdateWithStart until
// the update answers and, for the payment floor, the signal and the workflow's end.
func (p *perf) floor(t *testing.T, wf string, conc, n int) perfSample {
	prefix := "perf-" + randHex(4) + "-"
	return closedLoop(n, conc, func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		id := prefix + strconv.Itoa(i)
		op := p.floorC.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
			ID: id, TaskQueue: p.floorTQ, WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		}, wf)
		h, err := p.floorC.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: op,
			UpdateOptions:          client.UpdateWorkflowOptions{UpdateID: "u", UpdateName: floorUpdate, WaitForStage: client.WorkflowUpdateStageCompleted},
		})
		if err != nil {
			return err
		}
		var out string
		if err := h.Get(ctx, &out); err != nil {
			return err
		}
		if wf != floorPaymentWF {
			return nil
		}
		if err := p.floorC.SignalWorkflow(ctx, id, "", floorSignal, nil); err != nil {
			return err
		}
		return p.floorC.GetWorkflow(ctx, id, "").Get(ctx, nil)
	})
}

func (p *perf) floorCheckouts(t *testing.T) perfSample {
	return p.floor(t, floorCheckoutWF, p.cfg.checkoutCon, p.cfg.checkouts)
}

func (p *perf) floorPayments(t *testing.T) perfSample {
	return p.floor(t, floorPaymentWF, p.cfg.paymentCon, p.cfg.payments)
}

// perfCheckout posts one checkout for a new order and returns its answer.
func (p *perf) perfCheckout(id string, key string) (checkoutResult, error) {
	return p.checkoutAt(p.api(), id, key)
}

// api is the API for the next measured request: the benchmark's APIs in turn.
func (p *perf) api() string {
	return p.apis[int(p.next.Add(1)%uint64(len(p.apis)))]
}

// checkoutAt posts one checkout for a new order to the API at apiURL.
func (p *perf) checkoutAt(apiURL, id string, key string) (checkoutResult, error) {
	return p.checkoutBody(apiURL, key, order(id, 990))
}

// checkoutBody posts one checkout of body to the API at apiURL.
func (p *perf) checkoutBody(apiURL, key string, body map[string]any) (checkoutResult, error) {
	b, _ := json.Marshal(body)
	h := map[string]string{"Authorization": "Bearer " + p.tn.apiKey, "Content-Type": "application/json"}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	r, err := perfDo(http.MethodPost, apiURL+"/v1/payments", h, b)
	if err != nil {
		return checkoutResult{}, err
	}
	if r.status != http.StatusCreated {
		return checkoutResult{}, fmt.Errorf("checkout HTTP %d %s", r.status, r.body)
	}
	var res checkoutResult
	return res, json.Unmarshal(r.body, &res)
}

// perfDo sends one request on the benchmark's keep-alive client (try would open a connection
// per request, which is the load generator's cost, not paykit's).
func perfDo(method, url string, headers map[string]string, body []byte) (response, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return response{}, err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := perfClient.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// perfClient is the tests' client without its cap of 256 connections to one host, so
// that the scale curve's 512 callers each have their own.
var perfClient = &http.Client{Timeout: 60 * time.Second,
	Transport: contractChecked(&http.Transport{MaxIdleConnsPerHost: 1024})}

func (p *perf) nextOrder() string { return "pf" + strconv.FormatInt(p.seq.Add(1), 10) }

func (p *perf) checkoutsN(t *testing.T, conc, n int) perfSample {
	return closedLoop(n, conc, func(int) error {
		id := p.nextOrder()
		_, err := p.perfCheckout(id, "perf-"+id)
		return err
	})
}

func (p *perf) checkouts(t *testing.T) perfSample {
	stop := p.stallWatch(t, "checkout")
	defer stop()
	return p.checkoutsN(t, p.cfg.checkoutCon, p.cfg.checkouts)
}

// updateCheckouts are checkouts through the second API, which leaves every checkout to
// the workflow's checkout update (PAYKIT_CHECKOUT_DIRECT=false): the other design, in the
// same round.
func (p *perf) updateCheckouts(t *testing.T) perfSample {
	stop := p.stallWatch(t, "checkout-update")
	defer stop()
	return closedLoop(p.cfg.checkouts, p.cfg.checkoutCon, func(int) error {
		id := p.nextOrder()
		_, err := p.checkoutAt(p.updateAPI, id, "perf-"+id)
		return err
	})
}

// stallWatch captures, once, where the API and the worker wait when a phase runs past
// PAYKIT_PERF_STALL_AFTER (10 s by default; a healthy phase takes a few seconds): full
// goroutine dumps of both and every Temporal server and worker metric, in
// PAYKIT_PERF_STALL_DIR (off when unset).
func (p *perf) stallWatch(t *testing.T, phase string) (stop func()) {
	dir := os.Getenv("PAYKIT_PERF_STALL_DIR")
	if dir == "" {
		return func() {}
	}
	after := time.Duration(perfInt("PAYKIT_PERF_STALL_AFTER", 10)) * time.Second
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
			return
		case <-time.After(after):
		}
		at := filepath.Join(dir, fmt.Sprintf("%s-%s", phase, time.Now().Format("150405")))
		_ = os.MkdirAll(at, 0o755)
		t.Logf("stall: %s phase still running after %v; capturing into %s", phase, after, at)
		for i := 0; i < 3; i++ {
			for who, addr := range map[string]string{"api": p.apiPprof, "worker": p.workPprof} {
				if resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=2"); err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					_ = os.WriteFile(filepath.Join(at, fmt.Sprintf("%s-goroutines-%d.txt", who, i)), b, 0o644)
				}
			}
			for who, u := range map[string]string{"temporal": "http://" + env.temporalMetrics + "/metrics", "worker": p.st.workerAdminURL + "/metrics"} {
				if resp, err := http.Get(u); err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					_ = os.WriteFile(filepath.Join(at, fmt.Sprintf("%s-metrics-%d.txt", who, i)), b, 0o644)
				}
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Second):
			}
		}
	}()
	return func() { close(done) }
}

// payments runs whole payments: checkout, the buyer opening the cashier and paying at
// the simulator, Alipay's notification to the API, until MySQL says PAID.
func (p *perf) payments(t *testing.T) perfSample {
	return p.paymentsN(p.cfg.paymentCon, p.cfg.payments)
}

// paymentsN makes n whole payments, conc at a time: checkout, the cashier, the buyer's
// payment at the simulator, and PAID in MySQL.
func (p *perf) paymentsN(conc, n int) perfSample {
	w := newPaidWatch()
	defer w.stop()
	return closedLoop(n, conc, func(int) error {
		res, err := p.perfCheckout(p.nextOrder(), "")
		if err != nil {
			return err
		}
		if c, err := perfDo(http.MethodGet, res.PayURL, nil, nil); err != nil || c.status != http.StatusOK {
			return fmt.Errorf("cashier: HTTP %d %v", c.status, err)
		}
		if r, err := perfDo(http.MethodPost, env.simURL+"/_sim/trades/"+res.PaymentNo+"/pay", nil, []byte(`{}`)); err != nil || r.status != http.StatusOK {
			return fmt.Errorf("pay: HTTP %d %v", r.status, err)
		}
		return w.waitPaid(res.PaymentNo)
	})
}

// wechatPayments makes whole WeChat Pay payments as payments makes Alipay's: checkout
// (wechat_native, whose answer carries the code_url), the buyer paying at the WeChat Pay
// simulator, its encrypted and signed notification to the API, and PAID in MySQL. No
// cashier page is fetched: a Native payment's buyer scans the code in WeChat.
func (p *perf) wechatPayments() perfSample {
	w := newPaidWatch()
	defer w.stop()
	return closedLoop(p.cfg.payments, p.cfg.paymentCon, func(int) error {
		body := order(p.nextOrder(), 990)
		body["method"] = "wechat_native"
		res, err := p.checkoutBody(p.api(), "", body)
		if err != nil {
			return err
		}
		if r, err := perfDo(http.MethodPost, env.wxSimURL+"/_sim/orders/"+res.PaymentNo+"/pay",
			map[string]string{"Content-Type": "application/json"}, []byte(`{}`)); err != nil || r.status/100 != 2 {
			return fmt.Errorf("pay at WeChat Pay: HTTP %d %v", r.status, err)
		}
		return w.waitPaid(res.PaymentNo)
	})
}

// paidWatch tells the benchmark's callers when their payments are PAID in MySQL with one
// query every 5 ms for all of them, not one per caller: 16 callers each polling on their
// own would put 3,200 queries a second on the MySQL being measured.
type paidWatch struct {
	mu      sync.Mutex
	waiting map[string]chan struct{}
	done    chan struct{}
	exited  chan struct{}
}

func newPaidWatch() *paidWatch {
	w := &paidWatch{waiting: map[string]chan struct{}{}, done: make(chan struct{}), exited: make(chan struct{})}
	go w.loop()
	return w
}

// paid returns a channel closed once the payment is PAID.
func (w *paidWatch) paid(paymentNo string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan struct{})
	w.waiting[paymentNo] = ch
	return ch
}

// waitPaid waits up to a minute for the payment to be PAID.
func (w *paidWatch) waitPaid(paymentNo string) error {
	select {
	case <-w.paid(paymentNo):
		return nil
	case <-time.After(60 * time.Second):
		return fmt.Errorf("payment %s not paid after 60s", paymentNo)
	}
}

func (w *paidWatch) stop() {
	close(w.done)
	<-w.exited
}

func (w *paidWatch) loop() {
	defer close(w.exited)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-tick.C:
		}
		w.mu.Lock()
		nos := make([]any, 0, len(w.waiting))
		for no := range w.waiting {
			nos = append(nos, no)
		}
		w.mu.Unlock()
		if len(nos) == 0 {
			continue
		}
		rows, err := env.db.Query("SELECT payment_no FROM payments WHERE status = ? AND payment_no IN (?"+strings.Repeat(",?", len(nos)-1)+")",
			append([]any{int(payment.StatusPaid)}, nos...)...)
		if err != nil {
			continue
		}
		var paid []string
		for rows.Next() {
			var no string
			if rows.Scan(&no) == nil {
				paid = append(paid, no)
			}
		}
		rows.Close()
		w.mu.Lock()
		for _, no := range paid {
			if ch, ok := w.waiting[no]; ok {
				close(ch)
				delete(w.waiting, no)
			}
		}
		w.mu.Unlock()
	}
}

// callbacks offers signed TRADE_SUCCESS notifications for pending payments at a fixed
// rate (open loop: each is sent at its scheduled time whatever the answers before it) and
// measures, from the scheduled time, how long the API takes to answer "success"; then,
// for each payment, the time from that answer to the payment being PAID in MySQL (its
// updated_at, written by the same machine's clock).
func (p *perf) callbacks(t *testing.T, profile bool) (ack, toPaid perfSample) {
	n := p.cfg.rate * p.cfg.seconds
	forms := make([][]byte, n)
	nos := make([]string, n)
	setup := closedLoop(n, p.cfg.checkoutCon, func(i int) error {
		res, err := p.perfCheckout(p.nextOrder(), "")
		if err != nil {
			return err
		}
		now := time.Now().In(time.FixedZone("CST", 8*3600)).Format("2006-01-02 15:04:05")
		f := url.Values{
			"notify_time": {now}, "notify_type": {"trade_status_sync"}, "notify_id": {"perf" + randHex(12)},
			"app_id": {appID}, "charset": {"utf-8"}, "version": {"1.0"}, "sign_type": {"RSA2"},
			"trade_no": {"2026PERF" + randHex(8)}, "out_trade_no": {res.PaymentNo}, "seller_id": {sellerID},
			"buyer_id": {"2088000000000009"}, "trade_status": {"TRADE_SUCCESS"}, "total_amount": {"9.90"},
			"receipt_amount": {"9.90"}, "gmt_create": {now}, "gmt_payment": {now}, "subject": {"x"},
		}
		signForm(t, f, env.keys.AlipayPrivateKeyPEM)
		forms[i], nos[i] = []byte(f.Encode()), res.PaymentNo
		return nil
	})
	if setup.errs > 0 {
		t.Fatalf("callback setup: %s", setup)
	}
	p.drain(t)
	acked := make([]time.Time, n)
	ack = p.withProfile(t, profile, "callback", p.cfg.seconds+1, func() perfSample { return p.offer(t, forms, acked) })
	return ack, paidAfter(nos, acked)
}

// paidAfter waits (at most 2 minutes) for the payments to be PAID and returns, for each
// one acknowledged, the time from its acknowledgement to its transition.
func paidAfter(nos []string, acked []time.Time) perfSample {
	var s perfSample
	start := time.Now()
	deadline := start.Add(2 * time.Minute)
	for i, no := range nos {
		if acked[i].IsZero() {
			continue
		}
		for {
			var status int
			var at time.Time
			err := env.db.QueryRow("SELECT status, updated_at FROM payments WHERE payment_no = ?", no).Scan(&status, &at)
			if err == nil && status == int(payment.StatusPaid) {
				s.ok++
				s.lat = append(s.lat, max(0, at.Sub(acked[i])))
				break
			}
			if time.Now().After(deadline) {
				s.errs++
				if s.firstErr == "" {
					s.firstErr = fmt.Sprintf("payment %s not PAID 2 minutes after the run", no)
				}
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	s.elapsed = time.Since(start)
	return s
}

// offer sends the notifications at the configured rate; acked[i] is set to when the i-th
// was answered success.
func (p *perf) offer(t *testing.T, forms [][]byte, acked []time.Time) perfSample {
	var (
		mu sync.Mutex
		s  perfSample
		wg sync.WaitGroup
	)
	h := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	interval := time.Second / time.Duration(p.cfg.rate)
	start := time.Now()
	for i := range forms {
		due := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(due))
		wg.Add(1)
		go func(i int, body []byte) {
			defer wg.Done()
			r, err := perfDo(http.MethodPost, p.api()+"/callbacks/alipay", h, body)
			answered := time.Now()
			d := answered.Sub(due)
			mu.Lock()
			defer mu.Unlock()
			if err == nil && strings.TrimSpace(string(r.body)) != "success" {
				err = fmt.Errorf("answered %q", r.body)
			}
			if err != nil {
				s.errs++
				if s.firstErr == "" {
					s.firstErr = err.Error()
				}
				return
			}
			s.ok++
			s.lat = append(s.lat, d)
			acked[i] = answered
		}(i, forms[i])
	}
	wg.Wait()
	s.elapsed = time.Since(start)
	return s
}

// drain waits until the worker has nothing left to do for the measurements so far: every
// payment event delivered and no workflow task or activity in flight.
func (p *perf) drain(t *testing.T) {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		var undelivered, pendingPaid int
		_ = env.db.QueryRow("SELECT COUNT(*) FROM payment_events WHERE delivered = 0").Scan(&undelivered)
		_ = env.db.QueryRow(`SELECT COUNT(*) FROM channel_notifications n JOIN payments p ON p.payment_no = n.payment_no
			WHERE p.status = 0 AND n.verified = 1`).Scan(&pendingPaid)
		if undelivered == 0 && pendingPaid == 0 {
			time.Sleep(500 * time.Millisecond)
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Log("drain: the worker still had work after 5 minutes")
}

// withProfile runs fn and, when asked, takes CPU profiles of the API and the worker and
// the Temporal server's metrics around it.
func (p *perf) withProfile(t *testing.T, on bool, name string, seconds int, fn func() perfSample) perfSample {
	if !on {
		return p.counted(fn)
	}
	dir := p.cfg.profileDir
	_ = os.MkdirAll(dir, 0o755)
	before := scrape("http://" + env.temporalMetrics + "/metrics")
	wBefore := scrape(p.st.workerAdminURL + "/metrics")
	var wg sync.WaitGroup
	for who, addr := range map[string]string{"api": p.apiPprof, "worker": p.workPprof} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get("http://" + addr + "/debug/pprof/profile?seconds=" + strconv.Itoa(seconds))
			if err != nil {
				t.Logf("profile %s: %v", who, err)
				return
			}
			defer resp.Body.Close()
			f, err := os.Create(filepath.Join(dir, name+"-"+who+".pprof"))
			if err != nil {
				t.Log(err)
				return
			}
			defer f.Close()
			_, _ = io.Copy(f, resp.Body)
		}()
	}
	// Where the API's goroutines wait, halfway through the phase (off-CPU time that a CPU
	// profile does not show).
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(min(time.Duration(seconds)*time.Second/2, 2*time.Second))
		if resp, err := http.Get("http://" + p.apiPprof + "/debug/pprof/goroutine?debug=1"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			_ = os.WriteFile(filepath.Join(dir, name+"-api-goroutines.txt"), b, 0o644)
		}
	}()
	s := p.counted(fn)
	after := scrape("http://" + env.temporalMetrics + "/metrics")
	wAfter := scrape(p.st.workerAdminURL + "/metrics")
	writeDelta(filepath.Join(dir, name+"-temporal-metrics.txt"), before, after, s.ok)
	writeDelta(filepath.Join(dir, name+"-worker-metrics.txt"), wBefore, wAfter, s.ok)
	wg.Wait()
	return s
}

// counted runs fn and records the MySQL statements of paykit's user (API and worker), the
// Redis commands and the CPU by process group per completed operation.
func (p *perf) counted(fn func() perfSample) perfSample {
	u0, r0 := p.userStats(), p.redisCalls()
	s := cpuMeasured(fn)
	u1, r1 := p.userStats(), p.redisCalls()
	ops := float64(max(s.ok, 1))
	s.mysqlPerOp = (u1[0] + u1[1] - u0[0] - u0[1]) / ops
	var calls float64
	for cmd, v := range r1 {
		if cmd != "info" {
			calls += v - r0[cmd]
		}
	}
	s.redisPerOp = calls / ops
	return s
}

// scrape reads a Prometheus text endpoint into series -> value (counters and histogram
// counts and sums only).
func scrape(u string) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get(u)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || strings.Contains(line, "_bucket{") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out
}

// writeDelta writes every series that changed during a phase, with its change per
// operation, largest first.
func writeDelta(path string, before, after map[string]float64, ops int) {
	type row struct {
		k string
		d float64
	}
	var rows []row
	for k, v := range after {
		if d := v - before[k]; d > 0 && (strings.HasSuffix(strings.SplitN(k, "{", 2)[0], "_count") ||
			strings.HasSuffix(strings.SplitN(k, "{", 2)[0], "_sum") || strings.HasSuffix(strings.SplitN(k, "{", 2)[0], "_total") ||
			!strings.Contains(k, "latency")) {
			rows = append(rows, row{k, d})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].d > rows[j].d })
	var b strings.Builder
	fmt.Fprintf(&b, "# change during the phase, and per completed operation (%d)\n", ops)
	for _, r := range rows {
		fmt.Fprintf(&b, "%14.1f %10.2f %s\n", r.d, r.d/float64(max(ops, 1)), r.k)
	}
	_ = os.WriteFile(path, []byte(b.String()), 0o644)
}

// dupCost is what one duplicate checkout costs, averaged over the requests.
// dupStatementNoise is the write statements per duplicate request below which they are the
// API's periodic statements landing in the window, not the duplicate's own.
const dupStatementNoise = 0.05

type dupCost struct {
	requests           int
	statements, writes float64 // paykit's own MySQL user: statements that write, rows written
	selects            float64
	global             float64 // server-wide Com_insert+Com_update+Com_delete+Com_replace, minus an idle window
	handlerWrites      float64 // server-wide Handler_write+Handler_update+Handler_delete, minus an idle window
	redis              float64 // commands, those scripts run included (INFO commandstats)
	redisByCmd         string
	roundTrips         float64 // commands paykit sent (MONITOR), each a round trip
	roundTripsByCmd    string
	userstat           bool
}

// duplicateCosts measures a checkout repeated with the same Idempotency-Key, and one
// repeated for the same order without a key, after the first one has been answered.
func (p *perf) duplicateCosts(t *testing.T) (byKey, byOrder dupCost) {
	id := p.nextOrder()
	if _, err := p.perfCheckout(id, "perf-dup-"+id); err != nil {
		t.Fatal(err)
	}
	p.drain(t)
	byKey = p.measureDup(t, func() error { _, err := p.perfCheckout(id, "perf-dup-"+id); return err })
	id2 := p.nextOrder()
	if _, err := p.perfCheckout(id2, ""); err != nil {
		t.Fatal(err)
	}
	p.drain(t)
	byOrder = p.measureDup(t, func() error { _, err := p.perfCheckout(id2, ""); return err })
	return byKey, byOrder
}

func (p *perf) measureDup(t *testing.T, fn func() error) dupCost {
	n := p.cfg.duplicates
	mon := p.monitorRedis(t)
	defer mon.stop()
	// An idle window as long as the measured one, to subtract the server's background.
	u0, g0, r0, m0 := p.userStats(), globalWrites(), p.redisCalls(), mon.calls()
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if err := fn(); err != nil {
			t.Fatalf("duplicate checkout: %v", err)
		}
	}
	busy := time.Since(t0)
	u1, g1, r1, m1 := p.userStats(), globalWrites(), p.redisCalls(), mon.calls()
	time.Sleep(busy)
	u2, g2, r2, m2 := p.userStats(), globalWrites(), p.redisCalls(), mon.calls()
	per := func(d float64) float64 { return max(d, 0) / float64(n) }
	c := dupCost{requests: n, userstat: p.userstat}
	c.statements = per((u1[1] - u0[1]) - (u2[1] - u1[1]))
	c.writes = per((u1[2] - u0[2]) - (u2[2] - u1[2]))
	c.selects = per((u1[0] - u0[0]) - (u2[0] - u1[0]))
	c.global = per((g1[0] - g0[0]) - (g2[0] - g1[0]))
	c.handlerWrites = per((g1[1] - g0[1]) - (g2[1] - g1[1]))
	c.redis, c.redisByCmd = perRequest(r0, r1, r2, n)
	c.roundTrips, c.roundTripsByCmd = perRequest(m0, m1, m2, n)
	return c
}

// perRequest is the calls of each command in the measured window (c0 to c1) less those
// of the idle window after it (c1 to c2), per request of n, in all and by command.
func perRequest(c0, c1, c2 map[string]float64, n int) (float64, string) {
	var total float64
	var parts []string
	for cmd, v := range c1 {
		d := (v - c0[cmd]) - (c2[cmd] - v)
		if cmd == "info" || d <= 0 {
			continue
		}
		total += d
		parts = append(parts, fmt.Sprintf("%s %.2f", strings.ToUpper(cmd), d/float64(n)))
	}
	sort.Strings(parts)
	return total / float64(n), strings.Join(parts, ", ")
}

// redisMonitor counts, from Redis's MONITOR, the commands clients send: each is a round
// trip. MONITOR shows a command a script runs as "[0 lua]", which is none (INFO
// commandstats counts both). It reads MONITOR on a plain connection of its own.
type redisMonitor struct {
	conn net.Conn
	mu   sync.Mutex
	seen map[string]float64
}

func (p *perf) monitorRedis(t *testing.T) *redisMonitor {
	conn, err := net.DialTimeout("tcp", p.rdb.Options().Addr, 5*time.Second)
	if err != nil {
		t.Fatalf("redis MONITOR: %v", err)
	}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatalf("redis MONITOR: %v", err)
	}
	m := &redisMonitor{conn: conn, seen: map[string]float64{}}
	go func() {
		rd := bufio.NewReader(conn)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			// +1700000000.123456 [0 127.0.0.1:50000] "EVALSHA" "…" …
			_, rest, ok := strings.Cut(line, "[")
			client, args, ok2 := strings.Cut(rest, "] ")
			if !ok || !ok2 || strings.HasSuffix(client, " lua") {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimPrefix(args, `"`), `"`)
			m.mu.Lock()
			m.seen[strings.ToLower(name)]++
			m.mu.Unlock()
		}
	}()
	// MONITOR starts when Redis has answered it: wait until it shows a command.
	deadline := time.Now().Add(5 * time.Second)
	for p.rdb.Ping(context.Background()).Err() == nil && time.Now().Before(deadline) {
		if m.calls()["ping"] > 0 {
			return m
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("redis MONITOR saw no command")
	return nil
}

func (m *redisMonitor) calls() map[string]float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]float64, len(m.seen))
	for k, v := range m.seen {
		out[k] = v
	}
	return out
}

func (m *redisMonitor) stop() { _ = m.conn.Close() }

// userStats returns SELECT_COMMANDS, UPDATE_COMMANDS and rows inserted+updated+deleted of
// paykit's MySQL user.
func (p *perf) userStats() [3]float64 {
	var s [3]float64
	_ = env.db.QueryRow(`SELECT SELECT_COMMANDS, UPDATE_COMMANDS, ROWS_INSERTED + ROWS_UPDATED + ROWS_DELETED
		FROM information_schema.USER_STATISTICS WHERE USER = ?`, p.dbUser).Scan(&s[0], &s[1], &s[2])
	return s
}

// globalWrites returns the server-wide write statements and handler writes.
func globalWrites() [2]float64 {
	var s [2]float64
	rows, err := env.db.Query(`SHOW GLOBAL STATUS WHERE Variable_name IN
		('Com_insert','Com_update','Com_delete','Com_replace','Com_insert_select','Handler_write','Handler_update','Handler_delete')`)
	if err != nil {
		return s
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var v float64
		if rows.Scan(&k, &v) == nil {
			if strings.HasPrefix(k, "Com_") {
				s[0] += v
			} else {
				s[1] += v
			}
		}
	}
	return s
}

// redisCalls returns the calls of every command from INFO commandstats.
func (p *perf) redisCalls() map[string]float64 {
	out := map[string]float64{}
	info, err := p.rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		return out
	}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				f, _ := strconv.ParseFloat(v, 64)
				out[strings.TrimPrefix(name, "cmdstat_")] = f
			}
		}
	}
	return out
}

type perfResults struct {
	floorUWS, checkout, floorPay, payment, callback, toPaid []perfSample
	wxPayment                                               []perfSample // whole WeChat Pay payments
	checkoutUpd, floorStart, floorEager                     []perfSample
	dupKey, dupOrder                                        dupCost
	curve                                                   []curvePoint
	paid                                                    paidPhase
	open                                                    openPhase
}

// median of f over the samples.
func median(ss []perfSample, f func(perfSample) float64) float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = f(s)
	}
	sort.Float64s(v)
	if len(v) == 0 {
		return 0
	}
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func rateOf(s perfSample) float64  { return s.rate() }
func mysqlOf(s perfSample) float64 { return s.mysqlPerOp }
func redisOf(s perfSample) float64 { return s.redisPerOp }
func p50Of(s perfSample) float64   { return s.pct(.5).Seconds() }
func p99Of(s perfSample) float64   { return s.pct(.99).Seconds() }

func secs(f float64) string { return ms(time.Duration(f * float64(time.Second))) }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// table renders the medians, ratios and targets as a Markdown table.
func (r perfResults) table(cfg perfConfig) string {
	var b strings.Builder
	temporal := "Temporal dev server in memory"
	if os.Getenv("PAYKIT_E2E_TEMPORAL") == "postgres" {
		temporal = "Temporal server on PostgreSQL"
	}
	fmt.Fprintf(&b, "paykit benchmark, %s, %d CPUs (%s), %s/%s, %s; %s; %d paykit worker(s) and %d API(s) (requests go to the APIs in turn); medians of %d rounds\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), cpuModel(), runtime.GOOS, runtime.GOARCH, runtime.Version(), temporal, perfWorkers(), perfWorkers(), cfg.rounds)
	b.WriteString("| figure | median | ratio to floor | target | |\n|---|---|---|---|---|\n")
	// row writes a row's name and figures, followed in the same cell by after (a paykit
	// row's cost); the caller writes the cells that follow.
	row := func(name string, ss []perfSample, after ...string) (rate float64) {
		rate = median(ss, rateOf)
		errs := 0
		for _, s := range ss {
			errs += s.errs
		}
		e := ""
		if errs > 0 {
			e = fmt.Sprintf(", %d errors", errs)
		}
		fmt.Fprintf(&b, "| %s | %.1f/s, p50 %s, p99 %s%s%s |", name, rate, secs(median(ss, p50Of)), secs(median(ss, p99Of)), e, strings.Join(after, ""))
		return rate
	}
	// cost is a paykit row's median cost per operation.
	cost := func(ss []perfSample, what string) string {
		return fmt.Sprintf("; %.1f MySQL statements and %.1f Redis commands per %s", median(ss, mysqlOf), median(ss, redisOf), what)
	}
	fu := row(fmt.Sprintf("floor: UpdateWithStart answered after one no-op local activity, %d concurrent", cfg.checkoutCon), r.floorUWS)
	b.WriteString(" 1 | | |\n")
	co := row(fmt.Sprintf("checkout: POST /v1/payments, new orders, %d concurrent", cfg.checkoutCon), r.checkout, cost(r.checkout, "checkout"))
	coP99 := median(r.checkout, p99Of)
	fmt.Fprintf(&b, " %.2f× | ≥ 1.4×, p99 ≤ 1 s | %s |\n", co/fu, verdict(co/fu >= 1.4 && coP99 <= 1))
	cu := row(fmt.Sprintf("checkout, the other design: every checkout waits for the workflow's update (PAYKIT_CHECKOUT_DIRECT=false), %d concurrent", cfg.checkoutCon), r.checkoutUpd, cost(r.checkoutUpd, "checkout"))
	fmt.Fprintf(&b, " %.2f× | | |\n", cu/fu)
	fs := row(fmt.Sprintf("floor: StartWorkflow accepted (its run then runs one no-op local activity), %d concurrent", cfg.checkoutCon), r.floorStart)
	fmt.Fprintf(&b, " checkout %.2f× of it | | |\n", co/fs)
	fe := row(fmt.Sprintf("floor: the same with eager workflow start (EnableEagerStart, the floor worker in the starter's process), %d concurrent", cfg.checkoutCon), r.floorEager)
	fmt.Fprintf(&b, " checkout %.2f× of it | | |\n", co/fe)
	fp := row(fmt.Sprintf("floor: minimal payment (UpdateWithStart + local activity, signal, local activity), %d concurrent", cfg.paymentCon), r.floorPay)
	b.WriteString(" 1 | | |\n")
	pa := row(fmt.Sprintf("whole payment: checkout, cashier, pay, notification, PAID, %d concurrent", cfg.paymentCon), r.payment, cost(r.payment, "payment"))
	fmt.Fprintf(&b, " %.2f× | ≥ 0.8× | %s |\n", pa/fp, verdict(pa/fp >= 0.8))
	wx := row(fmt.Sprintf("whole WeChat Pay payment: checkout (wechat_native), pay, signed and encrypted notification, PAID, %d concurrent", cfg.paymentCon), r.wxPayment, cost(r.wxPayment, "payment"))
	fmt.Fprintf(&b, " %.2f× of Alipay's whole payment | ≥ 0.9× | %s |\n", wx/pa, verdict(wx/pa >= 0.9))
	cbP99 := median(r.callback, p99Of)
	errs := 0
	for _, s := range r.callback {
		errs += s.errs
	}
	fmt.Fprintf(&b, "| callback acknowledgement, open loop at %d/s for %d s | p50 %s, p99 %s, %d not answered success | | p99 ≤ 25 ms | %s |\n",
		cfg.rate, cfg.seconds, secs(median(r.callback, p50Of)), secs(cbP99), errs, verdict(cbP99 <= 0.025 && errs == 0))
	paidErrs := 0
	for _, s := range r.toPaid {
		paidErrs += s.errs
	}
	fmt.Fprintf(&b, "| callback acknowledgement to PAID, the same notifications | p50 %s, p99 %s, %d not PAID within 2 min | | reported | |\n",
		secs(median(r.toPaid, p50Of)), secs(median(r.toPaid, p99Of)), paidErrs)
	dup := func(name string, c dupCost) {
		mysqlW := "n/a (userstat unavailable)"
		met := c.roundTrips <= 2
		if c.userstat {
			mysqlW = fmt.Sprintf("%.2f write statements, %.2f rows written, %.2f selects", c.statements, c.writes, c.selects)
			// No row written, and fewer write statements than one in 20 requests: a write
			// on the duplicate's path would count 1 per request, while the API's timers
			// (the inbox's settle and purge) land a statement in the window now and then.
			met = met && c.statements < dupStatementNoise && c.writes == 0
		}
		fmt.Fprintf(&b, "| %s, per request (%d) | MySQL: %s; server-wide Com_insert/update/delete/replace %.2f, Handler_write/update/delete %.2f; Redis: %.2f round trips (%s), %.2f commands with those the scripts run (%s) | | 0 rows written (write statements < %.2f, the API timers' noise), ≤ 2 Redis round trips | %s |\n",
			name, c.requests, mysqlW, c.global, c.handlerWrites, c.roundTrips, orNone(c.roundTripsByCmd), c.redis, orNone(c.redisByCmd), dupStatementNoise, verdict(met))
	}
	dup("duplicate checkout, same Idempotency-Key", r.dupKey)
	dup("duplicate checkout, same order, no key", r.dupOrder)
	b.WriteString(cpuTable([]string{"floor: UpdateWithStart", "checkout", "checkout, the other design", "floor: StartWorkflow", "floor: eager start", "floor: minimal payment", "whole payment", "whole WeChat Pay payment"},
		[][]perfSample{r.floorUWS, r.checkout, r.checkoutUpd, r.floorStart, r.floorEager, r.floorPay, r.payment, r.wxPayment}))
	b.WriteString("\nper round (floor | paykit):\n")
	for i := range r.checkout {
		fmt.Fprintf(&b, "  round %d: UWS %s | checkout %s | checkout by update %s | start %s | eager start %s; minimal %s | payment %s | WeChat Pay payment %s; callbacks %s, to PAID %s\n", i+1,
			r.floorUWS[i], r.checkout[i], r.checkoutUpd[i], r.floorStart[i], r.floorEager[i], r.floorPay[i], r.payment[i], r.wxPayment[i], r.callback[i], r.toPaid[i])
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// perfWorkers is how many paykit worker processes the benchmark runs (PAYKIT_PERF_WORKERS,
// 1 by default).
func perfWorkers() int {
	if n, err := strconv.Atoi(os.Getenv("PAYKIT_PERF_WORKERS")); err == nil && n > 1 {
		return 2
	}
	return 1
}
