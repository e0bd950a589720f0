package buildinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestReadAndExport(t *testing.T) {
	i := Read()
	if i.GoVersion != runtime.Version() || i.Version == "" || i.Commit == "" || i.Release == "" {
		t.Fatalf("build %+v: want the Go version %s and a release, version and commit (or unknown)", i, runtime.Version())
	}
	if s := i.String(); !strings.Contains(s, i.Release) || !strings.Contains(s, i.Version) || !strings.Contains(s, i.Commit) || !strings.Contains(s, runtime.Version()) {
		t.Fatalf("String() = %q", s)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(Info{Release: "v0.2.0", Version: "v1.2.3", Commit: "abc123-dirty", GoVersion: "go1.26"}.Collector())
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "paykit_build_info" {
		t.Fatalf("gathered %v, %v", mfs, err)
	}
	m := mfs[0].GetMetric()[0]
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if m.GetGauge().GetValue() != 1 || labels["release"] != "v0.2.0" || labels["version"] != "v1.2.3" || labels["commit"] != "abc123-dirty" || labels["go_version"] != "go1.26" {
		t.Fatalf("paykit_build_info %v = %v", labels, m.GetGauge().GetValue())
	}
}

// A build that names no release reads as unreleased.
func TestReleaseDefault(t *testing.T) {
	for given, want := range map[string]string{"": "unreleased", "v0.2.0": "v0.2.0", "v0.2.0-3-gabcdef1": "v0.2.0-3-gabcdef1"} {
		if got := read(given).Release; got != want {
			t.Errorf("release %q read as %q, want %q", given, got, want)
		}
	}
}

// `paykit version` prints the release the build sets with -ldflags -X, as the Dockerfile
// does.
func TestVersionPrintsTheReleaseTheBuildSets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/paykit")
	}
	bin := filepath.Join(t.TempDir(), "paykit")
	build := exec.Command("go", "build", "-ldflags", "-X github.com/paykit/paykit/internal/buildinfo.release=v9.8.7-1-gabcdef1", "-o", bin, "../../cmd/paykit")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "paykit v9.8.7-1-gabcdef1 (module ") {
		t.Fatalf("paykit version: %v %q", err, out)
	}
	raw, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "-X github.com/paykit/paykit/internal/buildinfo.release=${PAYKIT_RELEASE}") {
		t.Fatal("the Dockerfile does not set the release from PAYKIT_RELEASE")
	}
}
