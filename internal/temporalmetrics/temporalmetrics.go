// Package temporalmetrics exports the Temporal SDK's client and worker metrics
// (request latency, task schedule-to-start latency, poller counts, activity and workflow
// outcomes) through a Prometheus registry, so that an operator sees them on the same
// /metrics endpoint as the service's own counters.
//
// The SDK reports a metric with different tag sets from different places (a request
// counter with and without a task queue, say), which Prometheus does not allow within
// one family. Series are therefore kept as they come and exported at scrape time with
// the union of their family's label names, a missing label being empty.
//
// Counters are exported with a _total suffix and timers as histograms in seconds with a
// _seconds suffix: temporal_request_total, temporal_activity_execution_latency_seconds.
package temporalmetrics

import (
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
)

// Buckets are the histogram upper bounds, in seconds, for every SDK timer. They span a
// local activity (milliseconds) to a long poll (about a minute).
var Buckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

type kind int

const (
	counterKind kind = iota
	gaugeKind
	histogramKind
)

// New returns a metrics handler for client.Options.MetricsHandler whose series are
// collected by reg.
func New(reg prometheus.Registerer) (client.MetricsHandler, error) {
	c := &collector{families: map[string]*family{}}
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	return &handler{c: c}, nil
}

// handler is one tag set. Its key is computed once, so a metric call on the hot path is
// two map lookups.
type handler struct {
	c      *collector
	labels map[string]string
	key    string
}

func (h *handler) WithTags(tags map[string]string) client.MetricsHandler {
	labels := make(map[string]string, len(h.labels)+len(tags))
	for k, v := range h.labels {
		labels[k] = v
	}
	for k, v := range tags {
		labels[sanitize(k)] = v
	}
	return &handler{c: h.c, labels: labels, key: labelKey(labels)}
}

func (h *handler) Counter(name string) client.MetricsCounter {
	return h.c.series(name+"_total", counterKind, h)
}

func (h *handler) Gauge(name string) client.MetricsGauge {
	return h.c.series(name, gaugeKind, h)
}

func (h *handler) Timer(name string) client.MetricsTimer {
	return h.c.series(name+"_seconds", histogramKind, h)
}

// series is one labelled time series of any kind.
type series struct {
	labels map[string]string
	kind   kind

	count atomic.Int64  // counter value
	gauge atomic.Uint64 // gauge value as float64 bits

	mu      sync.Mutex // histogram state
	buckets []uint64   // non-cumulative counts per bucket; the last is +Inf
	sum     float64
	n       uint64
}

func (s *series) Inc(d int64) { s.count.Add(d) }

func (s *series) Update(v float64) { s.gauge.Store(math.Float64bits(v)) }

func (s *series) Record(d time.Duration) {
	v := d.Seconds()
	i := sort.SearchFloat64s(Buckets, v)
	s.mu.Lock()
	s.buckets[i]++
	s.sum += v
	s.n++
	s.mu.Unlock()
}

type family struct {
	name   string
	kind   kind
	mu     sync.RWMutex
	series map[string]*series
}

type collector struct {
	mu       sync.RWMutex
	families map[string]*family
}

func (c *collector) series(name string, k kind, h *handler) *series {
	name = sanitize(name)
	c.mu.RLock()
	f := c.families[name]
	c.mu.RUnlock()
	if f == nil {
		c.mu.Lock()
		if f = c.families[name]; f == nil {
			f = &family{name: name, kind: k, series: map[string]*series{}}
			c.families[name] = f
		}
		c.mu.Unlock()
	}
	f.mu.RLock()
	s := f.series[h.key]
	f.mu.RUnlock()
	if s != nil {
		return s
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if s = f.series[h.key]; s == nil {
		// A name first used as another kind keeps its first kind; the SDK never does that.
		s = &series{labels: h.labels, kind: f.kind}
		if f.kind == histogramKind {
			s.buckets = make([]uint64, len(Buckets)+1)
		}
		f.series[h.key] = s
	}
	return s
}

// Describe sends nothing: the collector is unchecked because its families appear as the
// SDK first uses them.
func (c *collector) Describe(chan<- *prometheus.Desc) {}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.RLock()
	families := make([]*family, 0, len(c.families))
	for _, f := range c.families {
		families = append(families, f)
	}
	c.mu.RUnlock()
	for _, f := range families {
		f.collect(ch)
	}
}

func (f *family) collect(ch chan<- prometheus.Metric) {
	f.mu.RLock()
	all := make([]*series, 0, len(f.series))
	for _, s := range f.series {
		all = append(all, s)
	}
	f.mu.RUnlock()
	var names []string
	for _, s := range all {
		for k := range s.labels {
			if !slices.Contains(names, k) {
				names = append(names, k)
			}
		}
	}
	slices.Sort(names)
	desc := prometheus.NewDesc(f.name, "Temporal SDK metric "+f.name+".", names, nil)
	for _, s := range all {
		values := make([]string, len(names))
		for i, k := range names {
			values[i] = s.labels[k]
		}
		var (
			m   prometheus.Metric
			err error
		)
		switch f.kind {
		case counterKind:
			m, err = prometheus.NewConstMetric(desc, prometheus.CounterValue, float64(s.count.Load()), values...)
		case gaugeKind:
			m, err = prometheus.NewConstMetric(desc, prometheus.GaugeValue, math.Float64frombits(s.gauge.Load()), values...)
		case histogramKind:
			s.mu.Lock()
			cumulative := make(map[float64]uint64, len(Buckets))
			var acc uint64
			for i, b := range Buckets {
				acc += s.buckets[i]
				cumulative[b] = acc
			}
			n, sum := s.n, s.sum
			s.mu.Unlock()
			m, err = prometheus.NewConstHistogram(desc, n, sum, cumulative, values...)
		}
		if err != nil {
			ch <- prometheus.NewInvalidMetric(desc, err)
			continue
		}
		ch <- m
	}
}

// labelKey is a canonical string for a label set.
func labelKey(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(labels[k])
		b.WriteByte(0)
	}
	return b.String()
}

// sanitize makes a metric or label name valid for Prometheus.
func sanitize(name string) string {
	ok := func(i int, r rune) bool {
		return r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9'
	}
	clean := true
	for i, r := range name {
		if !ok(i, r) {
			clean = false
			break
		}
	}
	if clean && name != "" {
		return name
	}
	var b strings.Builder
	for i, r := range name {
		if ok(i, r) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}
