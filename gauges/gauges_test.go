package gauges_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/paykit/paykit/gauges"
	"github.com/paykit/paykit/payment"
)

type fakeStore struct {
	b      payment.Backlog
	err    error
	cutoff time.Time
}

func (f *fakeStore) Backlog(_ context.Context, expiredBefore time.Time) (payment.Backlog, error) {
	f.cutoff = expiredBefore
	return f.b, f.err
}

type fakeSchedules map[string]*client.ScheduleDescription

func (f fakeSchedules) Describe(_ context.Context, id string) (*client.ScheduleDescription, error) {
	d, ok := f[id]
	if !ok {
		return nil, serviceerror.NewNotFound("schedule not found")
	}
	if d == nil {
		return nil, errors.New("temporal unavailable")
	}
	return d, nil
}

func TestRefresh(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	created := now.Add(-48 * time.Hour)
	store := &fakeStore{b: payment.Backlog{OldestUndeliveredAt: now.Add(-90 * time.Second), DeadEvents: 2, PendingExpired: 3,
		OldestUnsettledNotificationAt: now.Add(-45 * time.Second)}}
	scheds := fakeSchedules{
		"sweeper": {
			Schedule: client.Schedule{State: &client.ScheduleState{}},
			Info: client.ScheduleInfo{CreatedAt: created, RecentActions: []client.ScheduleActionResult{
				{ActualTime: now.Add(-2 * time.Minute)}, {ActualTime: now.Add(-time.Minute)},
			}},
		},
		"audit": {Schedule: client.Schedule{State: &client.ScheduleState{Paused: true}}, Info: client.ScheduleInfo{CreatedAt: created}},
		"flaky": nil,
	}
	cfg := gauges.Config{
		Store: store, Schedules: scheds, PendingGrace: 5 * time.Minute, Now: func() time.Time { return now },
		Logger: slog.New(slog.DiscardHandler),
		List:   []gauges.Schedule{{"sweeper", time.Minute}, {"audit", 24 * time.Hour}, {"gone", time.Hour}, {"flaky", time.Hour}},
	}
	reg := prometheus.NewRegistry()
	g := gauges.New(reg)
	g.Refresh(context.Background(), cfg)

	if want := now.Add(-5 * time.Minute); !store.cutoff.Equal(want) {
		t.Errorf("pending cutoff %v, want %v (now - grace)", store.cutoff, want)
	}
	want := map[string]float64{
		"paykit_outbox_dead_events":                                         2,
		"paykit_outbox_oldest_undelivered_age_seconds":                      90,
		"paykit_payments_pending_past_expiry":                               3,
		"paykit_inbox_oldest_unsettled_age_seconds":                         45,
		`paykit_schedule_paused{schedule="audit"}`:                          1,
		`paykit_schedule_paused{schedule="sweeper"}`:                        0,
		`paykit_schedule_last_action_timestamp_seconds{schedule="audit"}`:   float64(created.Unix()),
		`paykit_schedule_last_action_timestamp_seconds{schedule="gone"}`:    0,
		`paykit_schedule_last_action_timestamp_seconds{schedule="sweeper"}`: float64(now.Add(-time.Minute).Unix()),
		`paykit_schedule_interval_seconds{schedule="audit"}`:                86400,
		`paykit_schedule_interval_seconds{schedule="flaky"}`:                3600,
		`paykit_schedule_interval_seconds{schedule="gone"}`:                 3600,
		`paykit_schedule_interval_seconds{schedule="sweeper"}`:              60,
		`paykit_gauges_last_refresh_timestamp_seconds{source="mysql"}`:      float64(now.Unix()),
		`paykit_gauges_refresh_failures_total{source="mysql"}`:              0,
		`paykit_gauges_refresh_failures_total{source="temporal"}`:           1,
	}
	if got := series(t, reg); !maps.Equal(got, want) {
		t.Fatalf("series:\n got %v\nwant %v", got, want)
	}

	// A failing store keeps the last values and counts the failure; an empty outbox is age 0.
	store.err = errors.New("mysql down")
	g.Refresh(context.Background(), cfg)
	if v := value(t, reg, "paykit_outbox_dead_events"); v != 2 {
		t.Errorf("dead events after a failed refresh = %v, want the previous 2", v)
	}
	store.err, store.b = nil, payment.Backlog{}
	delete(scheds, "flaky")
	g.Refresh(context.Background(), cfg)
	if v := value(t, reg, "paykit_outbox_oldest_undelivered_age_seconds"); v != 0 {
		t.Errorf("oldest age with nothing undelivered = %v, want 0", v)
	}
	got := series(t, reg)
	if got[`paykit_gauges_refresh_failures_total{source="mysql"}`] != 1 || got[`paykit_gauges_refresh_failures_total{source="temporal"}`] != 2 {
		t.Errorf("failures after one failed mysql refresh and two failed temporal ones: %v", got)
	}
}

// TestRunStopsWithItsContext runs the loop until cancelled; it refreshes at once.
func TestRunStopsWithItsContext(t *testing.T) {
	store := &fakeStore{b: payment.Backlog{DeadEvents: 7}}
	reg := prometheus.NewRegistry()
	g := gauges.New(reg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx, gauges.Config{Store: store, Every: time.Hour}) }()
	deadline := time.Now().Add(5 * time.Second)
	for value(t, reg, "paykit_outbox_dead_events") != 7 {
		if time.Now().After(deadline) {
			t.Fatal("no refresh at start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
}

// series is every series in reg, as name{label="value",…} (labels in name order).
func series(tb testing.TB, reg *prometheus.Registry) map[string]float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			key := mf.GetName()
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			v := m.GetGauge().GetValue()
			if m.GetCounter() != nil {
				v = m.GetCounter().GetValue()
			}
			out[key] = v
		}
	}
	return out
}

// value is the value of the one series of the family name in reg.
func value(tb testing.TB, reg *prometheus.Registry, name string) float64 {
	tb.Helper()
	v, ok := series(tb, reg)[name]
	if !ok {
		tb.Fatalf("no series %s", name)
	}
	return v
}
