package buildinfo

import (
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestReadAndExport(t *testing.T) {
	i := Read()
	if i.GoVersion != runtime.Version() || i.Version == "" || i.Commit == "" {
		t.Fatalf("build %+v: want the Go version %s and a version and commit (or unknown)", i, runtime.Version())
	}
	if s := i.String(); !strings.Contains(s, i.Version) || !strings.Contains(s, i.Commit) || !strings.Contains(s, runtime.Version()) {
		t.Fatalf("String() = %q", s)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(Info{Version: "v1.2.3", Commit: "abc123-dirty", GoVersion: "go1.26"}.Collector())
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "paykit_build_info" {
		t.Fatalf("gathered %v, %v", mfs, err)
	}
	m := mfs[0].GetMetric()[0]
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if m.GetGauge().GetValue() != 1 || labels["version"] != "v1.2.3" || labels["commit"] != "abc123-dirty" || labels["go_version"] != "go1.26" {
		t.Fatalf("paykit_build_info %v = %v", labels, m.GetGauge().GetValue())
	}
}
