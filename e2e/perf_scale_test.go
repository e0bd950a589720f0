package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The benchmark's two phases that run once, after the rounds: the checkout's scale curve
// (the checkout and the UpdateWithStart floor at rising concurrency) and the checkout
// with thousands of open payments whose reconciliation timers are firing.

// perfLevels is PAYKIT_PERF_CURVE: the concurrencies of the scale curve ("8,32,128,512"
// by default; "off" skips it).
func perfLevels(t *testing.T) []int {
	v := envOr("PAYKIT_PERF_CURVE", "8,32,128,512")
	if v == "off" {
		return nil
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			t.Fatalf("PAYKIT_PERF_CURVE=%q: want comma-separated positive concurrencies, or off", v)
		}
		out = append(out, n)
	}
	return out
}

// perfOpen is PAYKIT_PERF_OPEN: how many unpaid payments the open-payments phase leaves
// open (10000 by default; 0 skips it).
func perfOpen(t *testing.T) int { return perfCount(t, "PAYKIT_PERF_OPEN", "10000") }

// perfPaid is PAYKIT_PERF_PAID: how many whole payments the long payment run makes
// (10000 by default; 0 skips it).
func perfPaid(t *testing.T) int { return perfCount(t, "PAYKIT_PERF_PAID", "10000") }

// perfCount reads a phase's count of payments from the environment; 0 skips the phase.
func perfCount(t *testing.T, key, def string) int {
	v := envOr(key, def)
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a count of payments, or 0 to skip the phase", key, v)
	}
	return n
}

// paidPhase is the long payment run: n whole payments in tenths, each measured with the
// processes' memory and goroutines after it.
type paidPhase struct {
	n, conc int
	tenths  []paidTenth
	start   procStats
	// undelivered is the payment events not yet delivered right after the last payment.
	undelivered int
}

type paidTenth struct {
	done  int
	s     perfSample
	stats procStats
}

// procStats is what the benchmark's worker and API hold at one moment.
type procStats struct {
	workerRSS, workerGor, apiRSS, apiGor float64
}

func (p *perf) procStats() procStats {
	w, a := scrape(p.st.workerAdminURL+"/metrics"), scrape(p.st.apiAdminURL+"/metrics")
	return procStats{workerRSS: w["process_resident_memory_bytes"], workerGor: w["go_goroutines"],
		apiRSS: a["process_resident_memory_bytes"], apiGor: a["go_goroutines"]}
}

// paidRun makes n whole payments (the rounds' concurrency), a tenth at a time, and records each
// tenth's rate, latency and cost and the processes' memory and goroutines after it: a
// figure that grows from tenth to tenth is something held per payment.
func (p *perf) paidRun(t *testing.T, n int) paidPhase {
	p.drain(t)
	ph := paidPhase{n: n, conc: p.cfg.paymentCon, start: p.procStats()}
	step := max(n/10, 1)
	for done := 0; done < n; {
		k := min(step, n-done)
		s := p.counted(func() perfSample { return p.paymentsN(ph.conc, k) })
		done += k
		ph.tenths = append(ph.tenths, paidTenth{done: done, s: s, stats: p.procStats()})
		t.Logf("paid run: %d of %d: %s", done, n, s)
	}
	_ = env.db.QueryRow("SELECT COUNT(*) FROM payment_events WHERE delivered = 0").Scan(&ph.undelivered)
	p.drain(t)
	return ph
}

// paidTable renders the long payment run.
func paidTable(ph paidPhase) string {
	if ph.n == 0 {
		return ""
	}
	var b strings.Builder
	var all perfSample
	for _, x := range ph.tenths {
		all.ok, all.errs, all.elapsed = all.ok+x.s.ok, all.errs+x.s.errs, all.elapsed+x.s.elapsed
		all.lat = append(all.lat, x.s.lat...)
	}
	fmt.Fprintf(&b, "\nwhole payments, %d in one run, %d concurrent, in tenths (all: %s):\n\n", ph.n, ph.conc, curveCell(all))
	b.WriteString("| paid so far | this tenth | MySQL statements per payment | Redis commands per payment | worker MiB, goroutines | API MiB, goroutines |\n|---|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| 0 | | | | %.0f, %.0f | %.0f, %.0f |\n", ph.start.workerRSS/(1<<20), ph.start.workerGor, ph.start.apiRSS/(1<<20), ph.start.apiGor)
	for _, x := range ph.tenths {
		fmt.Fprintf(&b, "| %d | %s | %.1f | %.1f | %.0f, %.0f | %.0f, %.0f |\n", x.done, curveCell(x.s), x.s.mysqlPerOp, x.s.redisPerOp,
			x.stats.workerRSS/(1<<20), x.stats.workerGor, x.stats.apiRSS/(1<<20), x.stats.apiGor)
	}
	fmt.Fprintf(&b, "\npayment events not yet delivered right after the last payment: %d\n", ph.undelivered)
	return b.String()
}

// curvePoint is one concurrency of the scale curve.
type curvePoint struct {
	conc            int
	floor, checkout perfSample
}

// scaleCurve measures, at each concurrency, the UpdateWithStart floor and the checkout
// for new orders, each with at least PAYKIT_PERF_CHECKOUTS and twice the concurrency
// requests, so that every level runs several requests per caller.
func (p *perf) scaleCurve(t *testing.T, levels []int) []curvePoint {
	var out []curvePoint
	for i, c := range levels {
		n := max(p.cfg.checkouts, 2*c)
		pt := curvePoint{conc: c}
		// Alternate which side runs first, as in the rounds.
		if i%2 == 0 {
			pt.floor = cpuMeasured(func() perfSample { return p.floor(t, floorCheckoutWF, c, n) })
			pt.checkout = p.counted(func() perfSample { return p.checkoutsN(t, c, n) })
		} else {
			pt.checkout = p.counted(func() perfSample { return p.checkoutsN(t, c, n) })
			pt.floor = cpuMeasured(func() perfSample { return p.floor(t, floorCheckoutWF, c, n) })
		}
		p.drain(t)
		t.Logf("curve %d concurrent: floor UWS %s | checkout %s", c, pt.floor, pt.checkout)
		out = append(out, pt)
	}
	return out
}

// openPhase is the checkout measured before and while thousands of unpaid payments are
// open.
type openPhase struct {
	open         int
	created      perfSample
	before       perfSample
	during       []perfSample
	duringAt     []time.Duration // after the last open payment was created
	queries      float64         // Alipay queries a second during the measurements
	peakQueries  float64         // the most Alipay queries in one second of the phase
	perPayment   float64         // the reconciler's queries per open payment, at the end
	tasks        float64         // workflow tasks per open payment's run, at the end (a sample)
	pendingAtEnd int
	life         *openLife // over the open payments' whole life (PAYKIT_PERF_OPEN_LIFE)
	start, end   procStats
}

// openLife is what the open payments cost over their whole life, counted once every one
// of them has ended.
type openLife struct {
	took                   time.Duration // from the last created to the last ended
	closed, other          int
	queriesAvg, queriesMax float64 // the reconciler's queries per payment
	callsAvg, callsMax     float64 // alipay.trade.query calls per payment at the simulator (a sample), the close path's included
	closes                 float64 // alipay.trade.close calls per payment (the sample)
	tasksAvg, tasksMax     float64 // workflow tasks per run (the sample)
}

// openPayments leaves n checkouts unpaid, created through a second API whose payments
// have the production reconciliation (PAYKIT_RECONCILE_INTERVAL 1 min on its backoff,
// 15 min TTL; the benchmark worker's scheduled reconciler queries them on that schedule),
// and measures the checkout (32 concurrent, new orders, through the benchmark's API)
// right before, and three times while they are due: right after the last is created,
// and 60 and 120 s later. It also samples the simulator's query count every second, and
// at the end counts the reconciler's queries per open payment and the workflow tasks of
// 50 of their runs.
func (p *perf) openPayments(t *testing.T, n int) openPhase {
	ph := openPhase{open: n, start: p.procStats()}
	openAPI := p.secondAPI(t, "perf-open", 15*time.Minute, "PAYKIT_RECONCILE_INTERVAL=1m")
	ph.before = p.counted(func() perfSample { return p.checkoutsN(t, p.cfg.checkoutCon, p.cfg.checkouts) })
	h := map[string]string{"Authorization": "Bearer " + p.tn.apiKey, "Content-Type": "application/json"}
	creating := time.Now().Add(-time.Second)
	ph.created = closedLoop(n, p.cfg.checkoutCon, func(int) error {
		b, _ := json.Marshal(order(p.nextOrder(), 990))
		r, err := perfDo(http.MethodPost, openAPI+"/v1/payments", h, b)
		if err != nil {
			return err
		}
		if r.status != http.StatusCreated {
			return fmt.Errorf("open checkout HTTP %d %s", r.status, r.body)
		}
		return nil
	})
	t.Logf("open: %d unpaid payments created: %s", n, ph.created)
	createdAt := time.Now()
	q0 := p.simQueries()
	stopPeak := make(chan struct{})
	peakDone := make(chan float64)
	go func() {
		last, peak := q0, 0.0
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stopPeak:
				peakDone <- peak
				return
			case <-tick.C:
				q := p.simQueries()
				peak, last = max(peak, q-last), q
			}
		}
	}()
	for _, at := range []time.Duration{0, 60 * time.Second, 120 * time.Second} {
		time.Sleep(time.Until(createdAt.Add(at)))
		ph.duringAt = append(ph.duringAt, time.Since(createdAt).Round(time.Second))
		s := p.counted(func() perfSample { return p.checkoutsN(t, p.cfg.checkoutCon, p.cfg.checkouts) })
		ph.during = append(ph.during, s)
		t.Logf("open: checkout %v after the last open payment: %s", ph.duringAt[len(ph.duringAt)-1], s)
	}
	ph.queries = (p.simQueries() - q0) / time.Since(createdAt).Seconds()
	_ = env.db.QueryRow(openPaymentsWhere("COALESCE(AVG(queries), 0)")).Scan(&ph.perPayment)
	ph.tasks = p.openRunTasks(t, 50)
	if os.Getenv("PAYKIT_PERF_OPEN_LIFE") != "" {
		ph.life = p.openPaymentsLife(t, creating, createdAt)
	}
	close(stopPeak)
	ph.peakQueries = <-peakDone
	_ = env.db.QueryRow("SELECT COUNT(*) FROM payments WHERE status = 0").Scan(&ph.pendingAtEnd)
	ph.end = p.procStats()
	return ph
}

// openPaymentsLife waits until every payment of the open phase (created from phaseStart
// to createdAt with its 15-minute TTL) has ended, then counts what each cost: the
// reconciler's queries (payments.queries), and for a sample of 50 the simulator's query and
// close calls and their runs' workflow tasks.
func (p *perf) openPaymentsLife(t *testing.T, phaseStart, createdAt time.Time) *openLife {
	const ours = "created_at BETWEEN ? AND ? AND TIMESTAMPDIFF(SECOND, created_at, expire_at) < 1000"
	from, to := phaseStart.UTC(), createdAt.UTC().Add(time.Second)
	deadline := createdAt.Add(20 * time.Minute)
	for {
		var pending int
		if err := env.db.QueryRow("SELECT COUNT(*) FROM payments WHERE status = 0 AND "+ours, from, to).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("open: %d of the open payments still pending 20 minutes after the last was created", pending)
		}
		time.Sleep(10 * time.Second)
	}
	l := &openLife{took: time.Since(createdAt).Round(time.Second)}
	err := env.db.QueryRow("SELECT SUM(status = 2), SUM(status <> 2), AVG(queries), MAX(queries) FROM payments WHERE "+ours, from, to).
		Scan(&l.closed, &l.other, &l.queriesAvg, &l.queriesMax)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := env.db.Query("SELECT payment_no, workflow_id FROM payments WHERE "+ours+" ORDER BY RAND() LIMIT 50", from, to)
	if err != nil {
		t.Fatal(err)
	}
	type sampled struct{ no, wf string }
	var sample []sampled
	for rows.Next() {
		var s sampled
		if err := rows.Scan(&s.no, &s.wf); err != nil {
			t.Fatal(err)
		}
		sample = append(sample, s)
	}
	_ = rows.Close()
	for _, s := range sample {
		r, err := perfDo(http.MethodGet, env.simURL+"/_sim/calls?out_trade_no="+s.no, nil, nil)
		var calls map[string]int
		if err != nil || json.Unmarshal(r.body, &calls) != nil {
			t.Fatalf("calls of %s: %v", s.no, err)
		}
		q, tasks := float64(calls["alipay.trade.query"]), float64(len(workflowTaskWorkers(t, s.wf)))
		l.callsAvg += q / float64(len(sample))
		l.callsMax = max(l.callsMax, q)
		l.closes += float64(calls["alipay.trade.close"]) / float64(len(sample))
		l.tasksAvg += tasks / float64(len(sample))
		l.tasksMax = max(l.tasksMax, tasks)
	}
	t.Logf("open: every open payment ended %s after the last was created: %+v", l.took, *l)
	return l
}

// openPaymentsWhere selects what of the open phase's payments, the pending ones with its
// 15-minute TTL (the benchmark's own have two hours).
func openPaymentsWhere(what string) string {
	return "SELECT " + what + " FROM payments WHERE status = 0 AND expire_at BETWEEN UTC_TIMESTAMP() AND UTC_TIMESTAMP() + INTERVAL 16 MINUTE"
}

// openRunTasks is the mean number of workflow tasks the runs of n of the open payments
// have completed so far.
func (p *perf) openRunTasks(t *testing.T, n int) float64 {
	rows, err := env.db.Query(openPaymentsWhere("workflow_id")+" ORDER BY id DESC LIMIT ?", n)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	_ = rows.Close()
	total := 0
	for _, id := range ids {
		total += len(workflowTaskWorkers(t, id))
	}
	return float64(total) / float64(max(len(ids), 1))
}

// secondAPI starts an API process (no worker) on the benchmark's task queue, MySQL user
// and Redis, with payments of the given TTL and the extra settings, and returns its URL;
// it is stopped when the test ends.
func (p *perf) secondAPI(t *testing.T, name string, ttl time.Duration, extra ...string) string {
	t.Helper()
	st, err := startStack(name, stackOptions{paymentTTL: ttl, redisAddr: p.redisAddr, taskQueue: p.st.taskQueue, noWorker: true,
		extraEnv: append([]string{"PAYKIT_MYSQL_DSN=" + p.dsn, "PAYKIT_PUBLIC_URL=" + p.st.apiURL,
			"PAYKIT_INBOX_SETTLE_BOUND=30s", "PAYKIT_INBOX_SWEEP_INTERVAL=5s", "PAYKIT_LOG_LEVEL=warn"}, extra...)})
	if st != nil {
		t.Cleanup(func() {
			if st.api != nil {
				st.api.stop()
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return st.apiURL
}

// simQueries is how many alipay.trade.query calls the simulator has answered.
func (p *perf) simQueries() float64 {
	r, err := perfDo(http.MethodGet, env.simURL+"/_sim/calls", nil, nil)
	var calls map[string]int
	if err != nil || json.Unmarshal(r.body, &calls) != nil {
		return 0
	}
	return float64(calls["alipay.trade.query"])
}

// curveTable renders the scale curve.
func curveTable(pts []curvePoint) string {
	if len(pts) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nscale curve (one run each, after the rounds):\n\n")
	b.WriteString("| concurrent | floor: UpdateWithStart | checkout | ratio | MySQL statements per checkout | Redis commands per checkout |\n|---|---|---|---|---|---|\n")
	var names []string
	var samples [][]perfSample
	for _, pt := range pts {
		fmt.Fprintf(&b, "| %d | %s | %s | %.2f× | %.1f | %.1f |\n", pt.conc, curveCell(pt.floor), curveCell(pt.checkout),
			pt.checkout.rate()/max(pt.floor.rate(), 1e-9), pt.checkout.mysqlPerOp, pt.checkout.redisPerOp)
		names = append(names, fmt.Sprintf("floor: UpdateWithStart, %d concurrent", pt.conc), fmt.Sprintf("checkout, %d concurrent", pt.conc))
		samples = append(samples, []perfSample{pt.floor}, []perfSample{pt.checkout})
	}
	b.WriteString(cpuTable(names, samples))
	return b.String()
}

func curveCell(s perfSample) string {
	e := ""
	if s.errs > 0 {
		e = fmt.Sprintf(", %d errors (%s)", s.errs, s.firstErr)
	}
	return fmt.Sprintf("%.1f/s, p50 %s, p99 %s%s", s.rate(), ms(s.pct(.5)), ms(s.pct(.99)), e)
}

// openTable renders the open-payments phase.
func openTable(ph openPhase) string {
	if ph.open == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nopen payments (%d unpaid checkouts with the production reconciliation, created at %s):\n\n", ph.open, curveCell(ph.created))
	b.WriteString("| checkout, new orders, 32 concurrent | rate, latency | ratio to none open | target | |\n|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| none open | %s | 1 | | |\n", curveCell(ph.before))
	worst := 0.0
	for i, s := range ph.during {
		r := s.rate() / max(ph.before.rate(), 1e-9)
		if i == 0 || r < worst {
			worst = r
		}
		fmt.Fprintf(&b, "| %d open, %v after the last was created | %s | %.2f× | ≥ 0.9× | %s |\n", ph.open, ph.duringAt[i], curveCell(s), r, verdict(r >= 0.9))
	}
	fmt.Fprintf(&b, "\nAlipay queries by the reconciler per open payment %.2f after %v (target ≤ 3 over its life: the schedule at 1, 3 and 7 min has made its first), peak %.0f/s (the default limit is 100/s); workflow tasks per open payment's run %.2f (target ≤ 3 over its life: its start, its expiry, the closed webhook)\n",
		ph.perPayment, ph.duringAt[len(ph.duringAt)-1], ph.peakQueries, ph.tasks)
	if l := ph.life; l != nil {
		fmt.Fprintf(&b, "\nover their whole life (every one ended %v after the last was created; %d CLOSED, %d otherwise): the reconciler's queries per payment %.2f, at most %.0f (target ≤ 3); Alipay queries per payment at the simulator, the close path's included, %.2f, at most %.0f, and %.2f closes (50 sampled); workflow tasks per run %.2f, at most %.0f (target ≤ 3; the same sample); the most Alipay queries in one second of the phase %.0f\n",
			l.took, l.closed, l.other, l.queriesAvg, l.queriesMax, l.callsAvg, l.callsMax, l.closes, l.tasksAvg, l.tasksMax, ph.peakQueries)
	}
	fmt.Fprintf(&b, "\nworst ratio %.2f×; Alipay queries during the measurements %.1f/s; payments still pending at the end %d; worker %.0f MiB (%.0f at the phase's start), %.0f goroutines; API %.0f MiB (%.0f), %.0f goroutines\n",
		worst, ph.queries, ph.pendingAtEnd, ph.end.workerRSS/(1<<20), ph.start.workerRSS/(1<<20), ph.end.workerGor, ph.end.apiRSS/(1<<20), ph.start.apiRSS/(1<<20), ph.end.apiGor)
	// The same measurements' CPU: what the open payments' reconciliation adds to each
	// checkout's share of the cores.
	names, samples := []string{"checkout, none open"}, [][]perfSample{{ph.before}}
	for i, s := range ph.during {
		names = append(names, fmt.Sprintf("checkout, %d open, %v after", ph.open, ph.duringAt[i]))
		samples = append(samples, []perfSample{s})
	}
	b.WriteString(cpuTable(names, samples))
	return b.String()
}
