// Package buildinfo says which build of paykit is running, from what the Go toolchain
// embeds in the binary (debug.ReadBuildInfo) and the release the build names:
// `paykit version` prints it, and every process exports it as the paykit_build_info
// metric, so a dashboard shows which release each API and worker runs during a rolling
// deploy.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// release is the release this binary was built as, set by the build with
// `-ldflags -X github.com/paykit/paykit/internal/buildinfo.release=v0.2.0` (the Dockerfile's
// PAYKIT_RELEASE; `go run ./internal/releases/describe` names a commit's from
// CHANGELOG.md). It is a variable only because -X sets nothing else; nothing assigns it.
var release string

// Info is one build.
type Info struct {
	// Release is the release the build was named as (CHANGELOG.md), "unreleased" when
	// the build named none.
	Release string
	// Version is the module version ("(devel)" for a build from a work tree).
	Version string
	// Commit is the VCS revision the binary was built from, with "-dirty" when the work
	// tree had changes; "unknown" when the build recorded none (go run, -buildvcs=false).
	Commit string
	// Time is the commit's time, as the toolchain recorded it.
	Time      string
	GoVersion string
}

// Read returns the running binary's build.
func Read() Info {
	return read(release)
}

func read(release string) Info {
	if release == "" {
		release = "unreleased"
	}
	i := Info{Release: release, Version: "unknown", Commit: "unknown", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return i
	}
	if bi.Main.Version != "" {
		i.Version = bi.Main.Version
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Commit = s.Value
		case "vcs.time":
			i.Time = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && i.Commit != "unknown" {
		i.Commit += "-dirty"
	}
	return i
}

func (i Info) String() string {
	s := fmt.Sprintf("paykit %s (module %s), commit %s", i.Release, i.Version, i.Commit)
	if i.Time != "" {
		s += " (" + i.Time + ")"
	}
	return s + ", " + i.GoVersion
}

// Collector exports i as paykit_build_info{release, version, commit, go_version} 1.
func (i Info) Collector() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "paykit_build_info",
		Help:        "The build of paykit this process runs: always 1, with the release, module version, commit and Go version as labels.",
		ConstLabels: prometheus.Labels{"release": i.Release, "version": i.Version, "commit": i.Commit, "go_version": i.GoVersion},
	})
	g.Set(1)
	return g
}
