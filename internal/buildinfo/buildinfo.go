// Package buildinfo says which build of paykit is running, from what the Go toolchain
// embeds in the binary (debug.ReadBuildInfo): `paykit version` prints it, and every
// process exports it as the paykit_build_info metric, so a dashboard shows which
// version each API and worker runs during a rolling deploy.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Info is one build.
type Info struct {
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
	i := Info{Version: "unknown", Commit: "unknown", GoVersion: runtime.Version()}
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
	s := fmt.Sprintf("paykit %s, commit %s", i.Version, i.Commit)
	if i.Time != "" {
		s += " (" + i.Time + ")"
	}
	return s + ", " + i.GoVersion
}

// Collector exports i as paykit_build_info{version, commit, go_version} 1.
func (i Info) Collector() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "paykit_build_info",
		Help:        "The build of paykit this process runs: always 1, with the version, commit and Go version as labels.",
		ConstLabels: prometheus.Labels{"version": i.Version, "commit": i.Commit, "go_version": i.GoVersion},
	})
	g.Set(1)
	return g
}
