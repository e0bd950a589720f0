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
		_, errs := check([]byte(doc), nil)
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
	if _, errs := check([]byte(rule), want); hasRuleError(errs) {
		t.Fatalf("the file's own groups: %v", errs)
	}
	changed := strings.Replace(rule, "severity: critical", "severity: warning", 1)
	if changed == rule {
		t.Fatal("no critical alert to change")
	}
	if _, errs := check([]byte(changed), want); !hasRuleError(errs) {
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
