package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Where a phase's CPU goes: every process on the machine, read from /proc before and
// after the phase, grouped by what it is. On a machine whose cores are busy for the whole
// phase, an operation's rate is bounded by cores ÷ CPU per operation, so the groups' CPU
// per operation, side by side with the floor's, names what bounds a paykit figure.

// cpuGroups are the columns of the CPU table, in order.
var cpuGroups = []string{"temporal", "postgres", "mysql", "api", "worker", "alipaysim", "redis", "bench", "other"}

// clockTicks is the kernel's USER_HZ, the unit of /proc's CPU times (100 on Linux).
const clockTicks = 100

// cpuSnap is the CPU time (seconds) of each group and of the whole machine at one moment.
type cpuSnap struct {
	at     time.Time
	groups map[string]float64
	busy   float64 // all CPUs, seconds not idle
}

// cpuCost is a phase's CPU per operation (milliseconds) by group, and how many cores
// the machine kept busy on average.
type cpuCost struct {
	perOp map[string]float64
	cores float64
}

func (c cpuCost) total() float64 {
	var s float64
	for _, v := range c.perOp {
		s += v
	}
	return s
}

// groupOf names the group of a process: one the harness started (by its process group,
// which its children share), this test process (the load generator and the floor worker),
// or a server by its command name.
func groupOf(pid, pgrp int, comm string, started map[int]string) string {
	if pid == os.Getpid() {
		return "bench"
	}
	if name, ok := started[pgrp]; ok {
		switch {
		case name == "temporal":
			return "temporal"
		case name == "alipaysim":
			return "alipaysim"
		case strings.HasSuffix(name, "-api") || strings.Contains(name, "-api-"):
			return "api"
		case strings.HasSuffix(name, "-worker"):
			return "worker"
		case strings.HasSuffix(name, "-redis"):
			return "redis"
		}
		return "other"
	}
	switch comm {
	case "mariadbd", "mysqld":
		return "mysql"
	case "postgres", "postmaster":
		return "postgres"
	case "redis-server":
		return "redis"
	}
	return "other"
}

// startedGroups maps the process group of every process the harness runs to its name.
func startedGroups() map[int]string {
	env.mu.Lock()
	defer env.mu.Unlock()
	m := map[int]string{}
	for _, p := range env.procs {
		if p.cmd != nil && p.cmd.Process != nil {
			m[p.cmd.Process.Pid] = p.name
		}
	}
	return m
}

// statFields parses /proc/<pid>/stat: the command name and the fields after it.
func statFields(b []byte) (comm string, rest []string, ok bool) {
	s := string(b)
	i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if i < 0 || j < i {
		return "", nil, false
	}
	return s[i+1 : j], strings.Fields(s[j+1:]), true
}

func takeCPU() cpuSnap {
	snap := cpuSnap{at: time.Now(), groups: map[string]float64{}}
	started := startedGroups()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		comm, f, ok := statFields(b)
		// f[0] is the state (field 3); pgrp is field 5, utime and stime fields 14 and 15.
		if !ok || len(f) < 13 {
			continue
		}
		pgrp, _ := strconv.Atoi(f[2])
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		snap.groups[groupOf(pid, pgrp, comm, started)] += (ut + st) / clockTicks
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
		for i := 1; i < len(f) && i <= 8; i++ {
			if i == 4 || i == 5 {
				continue // idle, iowait
			}
			v, _ := strconv.ParseFloat(f[i], 64)
			snap.busy += v / clockTicks
		}
	}
	return snap
}

// cpuSince is the CPU per operation from before to now. A process that starts or exits
// during the phase counts only for what /proc shows of it at the two moments.
func cpuSince(before cpuSnap, ops int) cpuCost {
	after := takeCPU()
	n := float64(max(ops, 1))
	c := cpuCost{perOp: map[string]float64{}}
	for g, v := range after.groups {
		if d := v - before.groups[g]; d > 0 {
			c.perOp[g] = d * 1000 / n
		}
	}
	if el := after.at.Sub(before.at).Seconds(); el > 0 {
		c.cores = (after.busy - before.busy) / el
	}
	return c
}

// cpuMeasured runs fn and records its CPU per operation.
func cpuMeasured(fn func() perfSample) perfSample {
	before := takeCPU()
	s := fn()
	s.cpu = cpuSince(before, s.ok)
	return s
}

func cpuOf(g string) func(perfSample) float64 {
	return func(s perfSample) float64 { return s.cpu.perOp[g] }
}

func cpuTotalOf(s perfSample) float64 { return s.cpu.total() }
func coresOf(s perfSample) float64    { return s.cpu.cores }

// cpuTable renders the medians of each phase's CPU per operation by group, with the
// rate the machine's cores would allow at that cost (cores ÷ CPU per operation) beside
// the rate measured.
func cpuTable(phases []string, samples [][]perfSample) string {
	var b strings.Builder
	b.WriteString("\nCPU per operation, ms (medians; all processes on the machine, from /proc):\n\n| phase |")
	for _, g := range cpuGroups {
		b.WriteString(" " + g + " |")
	}
	b.WriteString(" total | cores busy | cores ÷ total | measured |\n|---|")
	for range cpuGroups {
		b.WriteString("---|")
	}
	b.WriteString("---|---|---|---|\n")
	for i, name := range phases {
		ss := samples[i]
		if len(ss) == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %s |", name)
		for _, g := range cpuGroups {
			fmt.Fprintf(&b, " %.2f |", median(ss, cpuOf(g)))
		}
		total := median(ss, cpuTotalOf)
		bound := 0.0
		if total > 0 {
			bound = float64(runtime.NumCPU()) * 1000 / total
		}
		fmt.Fprintf(&b, " %.2f | %.2f of %d | %.0f/s | %.1f/s |\n", total, median(ss, coresOf), runtime.NumCPU(), bound, median(ss, rateOf))
	}
	return b.String()
}
