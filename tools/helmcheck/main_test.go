package main

import (
	"os"
	"strings"
	"testing"
)

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: x
spec:
  selector:
    matchLabels: {app: x}
  template:
    metadata:
      labels: {app: x}
    spec:
      containers:
        - name: api
          image: paykit
          args: [api]
          %s
`

// An unknown field, a misplaced one, or an unknown kind fails the decoding.
func TestStrictDecodingRefusesUnknownFields(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown field":  strings.Replace(deployment, "%s", "livenesProbe: {httpGet: {path: /healthz, port: admin}}", 1),
		"misplaced":      strings.Replace(deployment, "%s", "terminationGracePeriodSeconds: 40", 1),
		"unknown kind":   "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n",
		"duplicate keys": strings.Replace(deployment, "%s", "image: other", 1),
	} {
		_, errs := check([]byte(doc), nil, intent{})
		found := false
		for _, e := range errs {
			if strings.Contains(e.Error(), "document 1") {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: decoded without a document error: %v", name, errs)
		}
	}
}

// A PrometheusRule whose groups differ from the rules file by one character fails.
func TestPrometheusRuleMustEqualTheAlertsFile(t *testing.T) {
	want, err := readAlerts("../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	rule := "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata: {name: paykit}\nspec:\n" + indent(string(raw))
	if _, errs := check([]byte(rule), want, intent{}); hasRuleError(errs) {
		t.Fatalf("the file's own groups: %v", errs)
	}
	changed := strings.Replace(rule, "severity: critical", "severity: warning", 1)
	if changed == rule {
		t.Fatal("no critical alert to change")
	}
	if _, errs := check([]byte(changed), want, intent{}); !hasRuleError(errs) {
		t.Fatalf("a changed severity passed: %v", errs)
	}
}

func hasRuleError(errs []error) bool {
	for _, e := range errs {
		if strings.Contains(e.Error(), "PrometheusRule") {
			return true
		}
	}
	return false
}

func indent(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString("  " + line)
	}
	return b.String()
}

// A ServiceMonitor must give each Deployment's pods a job the alerts select by: without a
// relabeling the job is the admin Service's name, and PaykitTargetDown
// (up{job=~"paykit-api|paykit-worker"}) could never fire.
func TestServiceMonitorJobsAreTheAlertsJobs(t *testing.T) {
	want, err := readAlerts("../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	pods := func(component string) string {
		return strings.NewReplacer("name: x", "name: "+component, "{app: x}", "{app: x, app.kubernetes.io/component: "+component+"}").
			Replace(strings.Replace(deployment, "%s", "", 1))
	}
	monitor := func(relabelings string) string {
		return "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: paykit}\nspec:\n" +
			"  selector: {matchLabels: {app: x}}\n  endpoints:\n    - port: admin\n" + relabelings
	}
	const relabel = "      relabelings:\n        - sourceLabels: [__meta_kubernetes_pod_label_app_kubernetes_io_component]\n" +
		"          targetLabel: job\n          replacement: %s\n"
	for name, tc := range map[string]struct {
		docs    []string
		wantErr string
	}{
		"relabeled":         {[]string{pods("api"), pods("worker"), monitor(strings.Replace(relabel, "%s", "paykit-$1", 1))}, ""},
		"no relabeling":     {[]string{pods("api"), pods("worker"), monitor("")}, "the Service's name"},
		"another job name":  {[]string{pods("api"), pods("worker"), monitor(strings.Replace(relabel, "%s", "pk-$1", 1))}, "which no alert selects by"},
		"a job with no pod": {[]string{pods("api"), monitor(strings.Replace(relabel, "%s", "paykit-$1", 1))}, "no pod is scraped as a job matching"},
		"no monitor":        {[]string{pods("api"), pods("worker")}, ""},
	} {
		r, _ := check([]byte(strings.Join(tc.docs, "---\n")), want, intent{})
		var got []string
		for _, e := range r.scrapeJobErrors(want) {
			got = append(got, e.Error())
		}
		joined := strings.Join(got, "; ")
		switch {
		case tc.wantErr == "" && len(got) > 0:
			t.Errorf("%s: %s", name, joined)
		case tc.wantErr != "" && !strings.Contains(joined, tc.wantErr):
			t.Errorf("%s: got %q, want an error containing %q", name, joined, tc.wantErr)
		}
	}
}

// A NetworkPolicy keeps the API's port open and the admin port (pprof) to named peers, or
// to none but the kubelet.
func TestNetworkPolicyKeepsTheAdminPortToNamedPeers(t *testing.T) {
	const np = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: paykit}\nspec:\n" +
		"  podSelector: {matchLabels: {app: x}}\n  policyTypes: [Ingress]\n  ingress:\n%s"
	const http = "    - ports: [{port: http}]\n"
	const admin = "    - ports: [{port: admin}]\n      from: [{namespaceSelector: {matchLabels: {name: monitoring}}}]\n"
	for name, tc := range map[string]struct {
		rules   string
		wantErr string
	}{
		"as the chart renders it": {http + admin, ""},
		"admin open to all":       {http + "    - ports: [{port: admin}]\n", "admin port is not restricted"},
		"no admin rule":           {http, ""},
		"admin to every pod":      {http + "    - ports: [{port: admin}]\n      from: [{namespaceSelector: {}}]\n", "admin port is not restricted"},
		"admin to every address":  {http + "    - ports: [{port: admin}]\n      from: [{ipBlock: {cidr: 0.0.0.0/0}}]\n", "admin port is not restricted"},
		"api closed":              {admin, "http port is not open"},
		"every port":              {http + admin + "    - from: [{podSelector: {}}]\n", "opens every port"},
	} {
		r, errs := check([]byte(strings.Replace(np, "%s", tc.rules, 1)), nil, intent{})
		for _, e := range errs {
			if strings.Contains(e.Error(), "document") {
				t.Fatalf("%s: %v", name, e)
			}
		}
		var got []string
		for _, e := range r.promises(nil) {
			if strings.Contains(e.Error(), "NetworkPolicy") {
				got = append(got, e.Error())
			}
		}
		joined := strings.Join(got, "; ")
		if (tc.wantErr == "") != (joined == "") || !strings.Contains(joined, tc.wantErr) {
			t.Errorf("%s: got %q, want %q", name, joined, tc.wantErr)
		}
	}
}
