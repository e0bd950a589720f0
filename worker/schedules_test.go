package worker

import (
	"slices"
	"testing"
	"time"

	"github.com/paykit/paykit/gauges"
)

// TestSchedules lists every schedule the worker keeps, by the IDs EnsureSchedules and
// EnsureStatementSchedules give them, with their configured intervals (the reconciler's
// is its span: its passes, unset here, are a quarter of the one-minute query step, 15 s,
// and a run makes twenty, five minutes).
func TestSchedules(t *testing.T) {
	cfg := Config{TaskQueue: "q", SweepEvery: time.Minute, PurgeEvery: time.Hour, AuditEvery: 24 * time.Hour,
		Statements: StatementConfig{Apps: []string{"a1", "a2"}}}
	want := []gauges.Schedule{
		{ID: "paykit-sweeper-q", Every: time.Minute},
		{ID: "paykit-reconcile-q", Every: 5 * time.Minute},
		{ID: "paykit-purge-idempotency-keys-q", Every: time.Hour},
		{ID: "paykit-audit-q", Every: 24 * time.Hour},
		{ID: StatementScheduleID("q", "a1"), Every: 24 * time.Hour},
		{ID: StatementScheduleID("q", "a2"), Every: 24 * time.Hour},
	}
	if got := Schedules(cfg); !slices.Equal(got, want) {
		t.Fatalf("Schedules = %v, want %v", got, want)
	}
}
