package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/internal/promql"
	"github.com/paykit/paykit/payment"
)

// sdkOnlyOnFailure are Temporal SDK metrics that a healthy run never emits, so no scrape
// after a payment shows them; each is named with why it is missing.
// TestAllowListedSDKMetricsAreTheSDKs checks that the SDK of go.mod emits each.
var sdkOnlyOnFailure = map[string]string{
	"temporal_workflow_task_execution_failed_total": "only when a workflow task fails (a panic, a non-determinism error)",
}

// afterFirstStatement are paykit metrics a worker exports only once it has reconciled a
// day (e2e/TestStatementDay asserts them on the worker's /metrics).
var afterFirstStatement = map[string]string{
	"paykit_statement_discrepancies": "set by the first reconciled day of an app",
}

// TestDashboardAndAlertsReadExportedMetrics pays one order on a stack of its own, scrapes
// the API's and the worker's /metrics (on their admin addresses: the API's public
// listener answers 404), and requires that every metric an alert of
// deploy/prometheus/alerts.yml or a panel of the Grafana dashboard reads is exported by
// one of them (a histogram by its family name), apart from the short lists above and
// Prometheus's own up. It also checks that the worker's schedule gauges describe the
// schedules it keeps: not paused, the sweeper's last action recent.
func TestDashboardAndAlertsReadExportedMetrics(t *testing.T) {
	st := newStack(t, stackOptions{})
	tn := newTenant(t)
	res := mustCheckout(t, st, tn, "obs-"+randHex(6), order("obs-1", 990))
	openCashier(t, res.PayURL)
	simPayAt(t, env.simURL, res.PaymentNo)
	waitStatus(t, res.PaymentNo, payment.StatusPaid, 30*time.Second)

	sweeper := `paykit_schedule_last_action_timestamp_seconds{schedule="paykit-sweeper-` + st.taskQueue + `"}`
	var workerText string
	deadline := time.Now().Add(75 * time.Second) // the gauges refresh every 30 s
	for {
		workerText = string(do(t, "GET", st.workerAdminURL+"/metrics", nil, nil).body)
		// The gauges' first refresh may run while the worker is still creating its
		// schedules (the audit's comes after the sweeper's): wait for one that saw them all.
		audit := `paykit_schedule_paused{schedule="paykit-audit-` + st.taskQueue + `"}`
		if v, ok := sampleValue(workerText, sweeper); ok && v > 0 && strings.Contains(workerText, audit) {
			if age := float64(time.Now().Unix()) - v; age > 60 {
				t.Errorf("%s = %v: the sweeper (every 2 s) last acted %.0f s ago", sweeper, v, age)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker /metrics has no %s above 0:\n%s", sweeper, grepLines(workerText, "paykit_schedule_"))
		}
		time.Sleep(2 * time.Second)
	}
	for _, want := range []string{
		`paykit_schedule_paused{schedule="paykit-sweeper-` + st.taskQueue + `"} 0`,
		`paykit_schedule_paused{schedule="paykit-audit-` + st.taskQueue + `"} 0`,
		`paykit_schedule_interval_seconds{schedule="paykit-sweeper-` + st.taskQueue + `"} 2`,
		`paykit_gauges_refresh_failures_total{source="mysql"} 0`,
	} {
		if !strings.Contains(workerText, want+"\n") {
			t.Errorf("worker /metrics lacks %s:\n%s", want, grepLines(workerText, "paykit_schedule_", "paykit_gauges_"))
		}
	}
	apiText := string(do(t, "GET", st.apiAdminURL+"/metrics", nil, nil).body)
	for _, path := range []string{"/metrics", "/readyz", "/debug/pprof/"} {
		if r := do(t, "GET", st.apiURL+path, nil, nil); r.status != 404 {
			t.Errorf("the public listener answers GET %s: HTTP %d, want 404 (it is on the admin address)", path, r.status)
		}
	}
	exported := map[string]bool{"up": true}
	for _, text := range []string{apiText, workerText} {
		for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) `).FindAllStringSubmatch(text, -1) {
			exported[m[1]] = true
		}
	}

	reads := map[string][]string{} // metric -> where it is read
	rulesRaw, err := os.ReadFile(filepath.Join(repoRoot(), "deploy/prometheus/alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := promql.Rules(rulesRaw)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		names, err := promql.Metrics(r.Expr)
		if err != nil {
			t.Fatalf("alert %s: %v", r.Alert, err)
		}
		for _, n := range names {
			reads[n] = append(reads[n], "alert "+r.Alert)
		}
	}
	dashRaw, err := os.ReadFile(filepath.Join(repoRoot(), "deploy/grafana/dashboards/paykit.json"))
	if err != nil {
		t.Fatal(err)
	}
	panels, err := promql.DashboardPanels(dashRaw)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range panels {
		for _, q := range p.Targets {
			names, err := promql.Metrics(q.Expr)
			if err != nil {
				t.Fatalf("panel %q: %v", p.Title, err)
			}
			for _, n := range names {
				reads[n] = append(reads[n], "panel "+strconv.Quote(p.Title))
			}
		}
	}
	if len(reads) < 20 {
		t.Fatalf("only %d metrics read by the alerts and the dashboard: %v", len(reads), reads)
	}
	for name, where := range reads {
		if exported[name] || exported[promql.BaseName(name)] {
			continue
		}
		if why, ok := sdkOnlyOnFailure[name]; ok {
			t.Logf("%s is not exported yet: %s", name, why)
			continue
		}
		if why, ok := afterFirstStatement[name]; ok {
			t.Logf("%s is not exported yet: %s", name, why)
			continue
		}
		t.Errorf("%s (read by %s) is exported by neither the API nor the worker", name, strings.Join(where, ", "))
	}
	t.Logf("%d metrics read by %d alert rules and %d panels, all exported or listed", len(reads), len(rules), len(panels))
}

// TestAllowListedSDKMetricsAreTheSDKs checks sdkOnlyOnFailure against the source of the
// Temporal SDK that go.mod requires: each name, without the _total or _seconds suffix
// the exporter adds (internal/temporalmetrics), is one of its metric constants.
func TestAllowListedSDKMetricsAreTheSDKs(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join(repoRoot(), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*go\.temporal\.io/sdk (v\S+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod requires no go.temporal.io/sdk")
	}
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	constants := filepath.Join(strings.TrimSpace(string(out)), "go.temporal.io", "sdk@"+string(m[1]), "internal", "common", "metrics", "constants.go")
	src, err := os.ReadFile(constants)
	if err != nil {
		t.Fatalf("the SDK's metric names (run go mod download): %v", err)
	}
	for name := range sdkOnlyOnFailure {
		base, ok := strings.CutPrefix(name, "temporal_")
		if !ok {
			t.Errorf("%s is not a Temporal SDK name", name)
			continue
		}
		base = strings.TrimSuffix(strings.TrimSuffix(base, "_total"), "_seconds")
		if !strings.Contains(string(src), `TemporalMetricsPrefix + "`+base+`"`) {
			t.Errorf("%s: the SDK %s names no metric temporal_%s in %s", name, m[1], base, constants)
		}
	}
	// The non-determinism alert selects on this failure_reason value.
	if !strings.Contains(string(src), `FailureReasonNonDeterminismError = "NonDeterminismError"`) {
		t.Errorf("the SDK %s has no failure_reason NonDeterminismError", m[1])
	}
}

// sampleValue returns the value of the sample whose name and labels are series.
func sampleValue(text, series string) (float64, bool) {
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

func grepLines(text string, prefixes ...string) string {
	var b strings.Builder
	for _, line := range strings.Split(text, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				b.WriteString(line + "\n")
			}
		}
	}
	return b.String()
}
