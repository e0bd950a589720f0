// Package gauges keeps the gauges that alerts on stuck work read, refreshed on a timer
// rather than at scrape time, so that a scrape never waits on MySQL or Temporal: the age
// of the outbox's oldest undelivered event and its dead events, the payments still
// pending past their expiry and a grace, the age of the inbox's oldest unsettled Alipay
// notification, and for each of the worker's schedules whether
// it is paused and when it last started its workflow.
package gauges

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/paykit/paykit/payment"
)

// Defaults of Config.
const (
	DefaultEvery   = 30 * time.Second
	DefaultTimeout = 10 * time.Second
)

// Store reads the database's backlog; *mysql.Store implements it.
type Store interface {
	Backlog(ctx context.Context, expiredBefore time.Time) (payment.Backlog, error)
}

// Schedules describes a Temporal schedule by its ID; ScheduleClient adapts the SDK's.
type Schedules interface {
	Describe(ctx context.Context, id string) (*client.ScheduleDescription, error)
}

// ScheduleClient describes schedules through the SDK's schedule client.
type ScheduleClient struct{ Client client.ScheduleClient }

// Describe implements Schedules.
func (s ScheduleClient) Describe(ctx context.Context, id string) (*client.ScheduleDescription, error) {
	return s.Client.GetHandle(ctx, id).Describe(ctx)
}

// Schedule is one schedule the worker keeps and how often it is due.
type Schedule struct {
	ID    string
	Every time.Duration
}

// Config is what the gauges read and how often.
type Config struct {
	Store     Store
	Schedules Schedules
	List      []Schedule
	// PendingGrace is how long past expire_at a pending payment may stay pending before
	// it is counted.
	PendingGrace time.Duration
	// Every is the refresh interval, Timeout bounds one refresh of each source.
	Every   time.Duration
	Timeout time.Duration
	Now     func() time.Time
	Logger  *slog.Logger
}

// Sources of a refresh, as the source label of the refresh metrics.
const (
	SourceMySQL    = "mysql"
	SourceTemporal = "temporal"
)

// Gauges are the collectors. Their values are those of the last refresh that succeeded.
type Gauges struct {
	oldestAge      prometheus.Gauge
	dead           prometheus.Gauge
	pendingExpired prometheus.Gauge
	unsettledAge   prometheus.Gauge
	paused         *prometheus.GaugeVec
	lastAction     *prometheus.GaugeVec
	interval       *prometheus.GaugeVec
	refreshed      *prometheus.GaugeVec
	failures       *prometheus.CounterVec
}

// New registers the gauges on reg.
func New(reg prometheus.Registerer) *Gauges {
	g := &Gauges{
		oldestAge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "paykit_outbox_oldest_undelivered_age_seconds",
			Help: "Age of the oldest outbox event that is neither delivered nor dead (0 when there is none).",
		}),
		dead: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "paykit_outbox_dead_events", Help: "Outbox events given up on and not delivered since; each needs an operator.",
		}),
		pendingExpired: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "paykit_payments_pending_past_expiry",
			Help: "PENDING payments whose expire_at is more than the grace (5 min) in the past.",
		}),
		unsettledAge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "paykit_inbox_oldest_unsettled_age_seconds",
			Help: "Age of the oldest acknowledged Alipay notification whose effect is not seen yet (0 when there is none).",
		}),
		paused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "paykit_schedule_paused", Help: "1 if the Temporal schedule is paused, 0 if not.",
		}, []string{"schedule"}),
		lastAction: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "paykit_schedule_last_action_timestamp_seconds",
			Help: "Unix time of the schedule's last action (its creation before the first; 0 if it does not exist).",
		}, []string{"schedule"}),
		interval: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "paykit_schedule_interval_seconds", Help: "How often the schedule is due, as the worker configures it.",
		}, []string{"schedule"}),
		refreshed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "paykit_gauges_last_refresh_timestamp_seconds",
			Help: "Unix time of the last refresh of the backlog (mysql) or schedule (temporal) gauges that succeeded.",
		}, []string{"source"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paykit_gauges_refresh_failures_total", Help: "Refreshes of the backlog or schedule gauges that failed, by source.",
		}, []string{"source"}),
	}
	for _, s := range []string{SourceMySQL, SourceTemporal} {
		g.failures.WithLabelValues(s)
	}
	reg.MustRegister(g.oldestAge, g.dead, g.pendingExpired, g.unsettledAge, g.paused, g.lastAction, g.interval, g.refreshed, g.failures)
	return g
}

func (c Config) withDefaults() Config {
	if c.Every <= 0 {
		c.Every = DefaultEvery
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Run refreshes the gauges now and then every cfg.Every until ctx is cancelled. A
// refresh that fails keeps the previous values, logs a warning and is counted.
func (g *Gauges) Run(ctx context.Context, cfg Config) error {
	cfg = cfg.withDefaults()
	t := time.NewTicker(cfg.Every)
	defer t.Stop()
	for {
		g.Refresh(ctx, cfg)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Refresh reads each source once, each within cfg.Timeout.
func (g *Gauges) Refresh(ctx context.Context, cfg Config) {
	cfg = cfg.withDefaults()
	if cfg.Store != nil {
		g.refresh(ctx, cfg, SourceMySQL, g.backlog)
	}
	if cfg.Schedules != nil {
		g.refresh(ctx, cfg, SourceTemporal, g.schedules)
	}
}

func (g *Gauges) refresh(ctx context.Context, cfg Config, source string, read func(context.Context, Config) error) {
	rctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if err := read(rctx, cfg); err != nil {
		if ctx.Err() != nil {
			return
		}
		g.failures.WithLabelValues(source).Inc()
		cfg.Logger.WarnContext(ctx, "gauges: refresh failed; keeping the previous values", "source", source, "err", err)
		return
	}
	g.refreshed.WithLabelValues(source).Set(float64(cfg.Now().Unix()))
}

func (g *Gauges) backlog(ctx context.Context, cfg Config) error {
	now := cfg.Now()
	b, err := cfg.Store.Backlog(ctx, now.Add(-cfg.PendingGrace))
	if err != nil {
		return err
	}
	age := 0.0
	if !b.OldestUndeliveredAt.IsZero() {
		age = max(0, now.Sub(b.OldestUndeliveredAt).Seconds())
	}
	g.oldestAge.Set(age)
	g.dead.Set(float64(b.DeadEvents))
	g.pendingExpired.Set(float64(b.PendingExpired))
	unsettled := 0.0
	if !b.OldestUnsettledNotificationAt.IsZero() {
		unsettled = max(0, now.Sub(b.OldestUnsettledNotificationAt).Seconds())
	}
	g.unsettledAge.Set(unsettled)
	return nil
}

// schedules describes every schedule; one that cannot be described fails the refresh
// but the others are still set.
func (g *Gauges) schedules(ctx context.Context, cfg Config) error {
	var errs []error
	for _, s := range cfg.List {
		g.interval.WithLabelValues(s.ID).Set(s.Every.Seconds())
		d, err := cfg.Schedules.Describe(ctx, s.ID)
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			// Deleted, or not created yet at the worker's start: it starts nothing.
			g.paused.DeleteLabelValues(s.ID)
			g.lastAction.WithLabelValues(s.ID).Set(0)
			continue
		case err != nil:
			errs = append(errs, err)
			continue
		}
		paused := 0.0
		if d.Schedule.State != nil && d.Schedule.State.Paused {
			paused = 1
		}
		g.paused.WithLabelValues(s.ID).Set(paused)
		last := d.Info.CreatedAt
		for _, a := range d.Info.RecentActions {
			if a.ActualTime.After(last) {
				last = a.ActualTime
			}
		}
		at := 0.0
		if !last.IsZero() {
			at = float64(last.Unix())
		}
		g.lastAction.WithLabelValues(s.ID).Set(at)
	}
	return errors.Join(errs...)
}
