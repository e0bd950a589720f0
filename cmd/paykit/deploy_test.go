package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/paykit/paykit/internal/promql"
)

// TestAlertRulesAreDocumented checks deploy/prometheus/alerts.yml as an on-call engineer
// reads it: every alert has a severity, a summary, a description and a runbook, and the
// runbook names a page of its own, docs/operate/runbooks/<alert>.md, whose first heading
// is the alert's name. That the rules read metrics the processes export is
// e2e/TestDashboardAndAlertsReadExportedMetrics.
func TestAlertRulesAreDocumented(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := promql.Rules(raw)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range rules {
		if r.Alert == "" {
			continue
		}
		if seen[r.Alert] {
			t.Errorf("alert %s is defined twice", r.Alert)
		}
		seen[r.Alert] = true
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
		}
		for _, a := range []string{"summary", "description", "runbook"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s has no %s annotation", r.Alert, a)
			}
		}
		if want := "docs/operate/runbooks/" + r.Alert + ".md"; r.Annotations["runbook"] != want {
			t.Errorf("%s: runbook %q, want %q", r.Alert, r.Annotations["runbook"], want)
		} else if page, err := os.ReadFile("../../" + want); err != nil {
			t.Errorf("%s: runbook %s: %v", r.Alert, want, err)
		} else if got := firstHeading.FindSubmatch(page); got == nil || string(got[1]) != r.Alert {
			t.Errorf("%s: the first heading of %s is not %q", r.Alert, want, "# "+r.Alert)
		}
		if names, err := promql.Metrics(r.Expr); err != nil || len(names) == 0 {
			t.Errorf("%s: expression reads no metric (%v): %s", r.Alert, err, r.Expr)
		}
	}
	if len(seen) == 0 {
		t.Fatal("alerts.yml has no alerts")
	}
}

// TestDashboardPanelsQuery checks that every panel of the dashboard has queries and
// each reads a metric.
func TestDashboardPanelsQuery(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/grafana/dashboards/paykit.json")
	if err != nil {
		t.Fatal(err)
	}
	panels, err := promql.DashboardPanels(raw)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range panels {
		if p.Type == "row" {
			continue
		}
		n++
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			if names, err := promql.Metrics(q.Expr); err != nil || len(names) == 0 {
				t.Errorf("panel %q: query %s reads no metric (%v)", p.Title, q.RefID, err)
			}
		}
	}
	if n == 0 {
		t.Fatal("the dashboard has no panels")
	}
}

// firstHeading is a markdown page's first ATX heading.
var firstHeading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
