package promql_test

import (
	"slices"
	"testing"

	"github.com/paykit/paykit/internal/promql"
)

func TestMetrics(t *testing.T) {
	for _, tc := range []struct {
		name, expr string
		want       []string
	}{
		{"bare name", "up", []string{"up"}},
		{"matchers and range", `rate(paykit_http_requests_total{route="/v1/payments",status=~"5.."}[5m])`, []string{"paykit_http_requests_total"}},
		{"aggregation with a label list", `sum by (kind, app_id) (increase(a_total[1h])) > 0`, []string{"a_total"}},
		{"binary with on and group_left", `a / on (instance) group_left (job) b`, []string{"a", "b"}},
		{"histogram", `histogram_quantile(0.99, sum by (le) (rate(x_seconds_bucket{method="POST"}[$__rate_interval])))`, []string{"x_seconds_bucket"}},
		{"numbers and durations", `time() - last_seconds > 1.5 * interval_seconds offset 5m or vector(2e3)`, []string{"interval_seconds", "last_seconds"}},
		{"strings with braces and quotes", `label_replace(sum(a) > 0, "kind", "call{back}\"", "", "")`, []string{"a"}},
		{"keywords are not names", `x unless on (app_id) y and bool z`, []string{"x", "y", "z"}},
		{"grafana variable", `sum(rate(c_total{instance=~"$instance"}[${__range}]))`, []string{"c_total"}},
		{"colons in recording rules", `job:requests:rate5m`, []string{"job:requests:rate5m"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := promql.Metrics(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Metrics(%q) = %v, want %v", tc.expr, got, tc.want)
			}
		})
	}
	for _, bad := range []string{`a{b="c"`, `rate(a[5m)`, `"open`} {
		if _, err := promql.Metrics(bad); err == nil {
			t.Errorf("Metrics(%q): no error", bad)
		}
	}
}

func TestBaseName(t *testing.T) {
	for in, want := range map[string]string{"x_seconds_bucket": "x_seconds", "x_sum": "x", "x_count": "x", "x_total": "x_total"} {
		if got := promql.BaseName(in); got != want {
			t.Errorf("BaseName(%s) = %s, want %s", in, got, want)
		}
	}
}
