// Package admin serves a paykit process's operational endpoints on a listener of their
// own, apart from the API's public one: liveness, readiness, Prometheus metrics and
// net/http/pprof. Whoever reaches the listener can make the process ping its
// dependencies and take profiles of it, so it belongs on a loopback or private address.
package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/singleflight"
)

// Readiness is the answer of /readyz: whether the process is ready and, for a process
// with optional dependencies, each one's state. It never says why a dependency is down;
// that is for the log.
type Readiness struct {
	Ready  bool              `json:"ready"`
	Checks map[string]string `json:"checks,omitempty"`
}

// Probe checks the process's dependencies within ctx and logs why one is down.
type Probe func(ctx context.Context) Readiness

// Defaults of Options.
const (
	// DefaultReadyFor is how long a probe's result answers /readyz: a burst of probes
	// from balancers, orchestrators and scrapers costs one round of pings.
	DefaultReadyFor = time.Second
	// DefaultProbeTimeout bounds one round of pings.
	DefaultProbeTimeout = 2 * time.Second
)

// Options configure Handler.
type Options struct {
	// Metrics is what /metrics serves.
	Metrics prometheus.Gatherer
	// Probe answers /readyz.
	Probe Probe
	// ReadyFor is how long a probe's result is reused (DefaultReadyFor if zero).
	ReadyFor time.Duration
	// ProbeTimeout bounds one probe (DefaultProbeTimeout if zero).
	ProbeTimeout time.Duration
}

// Handler serves GET /healthz (the process is up), GET /readyz (its dependencies
// answer; 503 if not), GET /metrics (Prometheus) and /debug/pprof/. Concurrent /readyz
// requests share one probe, and its result answers for ReadyFor.
func Handler(o Options) http.Handler {
	if o.ReadyFor <= 0 {
		o.ReadyFor = DefaultReadyFor
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = DefaultProbeTimeout
	}
	rd := &readiness{probe: o.Probe, readyFor: o.ReadyFor, timeout: o.ProbeTimeout}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		res, err := rd.check(r.Context())
		if err != nil || !res.Ready {
			writeJSON(w, http.StatusServiceUnavailable, res)
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.Metrics, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// readiness runs the probe at most once per readyFor, however many ask at once.
type readiness struct {
	probe    Probe
	readyFor time.Duration
	timeout  time.Duration
	flight   singleflight.Group

	mu   sync.Mutex
	last Readiness
	at   time.Time
}

// check answers from the last probe if it is recent, or else from a new one, which
// every caller arriving meanwhile shares. The probe runs apart from the request that
// started it, so that this caller going away does not fail the others.
func (rd *readiness) check(ctx context.Context) (Readiness, error) {
	if res, ok := rd.recent(); ok {
		return res, nil
	}
	ch := rd.flight.DoChan("readyz", func() (any, error) {
		// A caller that found the result stale just before a probe ended joins no
		// flight: it finds the fresh result here instead of probing again.
		if res, ok := rd.recent(); ok {
			return res, nil
		}
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rd.timeout)
		defer cancel()
		res := rd.probe(pctx)
		rd.mu.Lock()
		rd.last, rd.at = res, time.Now()
		rd.mu.Unlock()
		return res, nil
	})
	select {
	case r := <-ch:
		return r.Val.(Readiness), nil
	case <-ctx.Done():
		return Readiness{}, ctx.Err()
	}
}

func (rd *readiness) recent() (Readiness, bool) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if rd.at.IsZero() || time.Since(rd.at) >= rd.readyFor {
		return Readiness{}, false
	}
	return rd.last, true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
