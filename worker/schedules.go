package worker

import (
	"time"

	"github.com/paykit/paykit/gauges"
)

// Schedules lists every schedule EnsureSchedules and EnsureStatementSchedules keep for
// cfg, with how often each is due, for the schedule gauges.
func Schedules(cfg Config) []gauges.Schedule {
	cfg = cfg.withReconcilerDefaults()
	list := []gauges.Schedule{
		{ID: SweeperScheduleID(cfg.TaskQueue), Every: cfg.SweepEvery},
		{ID: ReconcilerScheduleID(cfg.TaskQueue), Every: ReconcilerSpan(cfg.ReconcilerEvery)},
		{ID: PurgeScheduleID(cfg.TaskQueue), Every: cfg.PurgeEvery},
		{ID: AuditScheduleID(cfg.TaskQueue), Every: cfg.AuditEvery},
	}
	for _, app := range cfg.Statements.Apps {
		list = append(list, gauges.Schedule{ID: StatementScheduleID(cfg.TaskQueue, app), Every: 24 * time.Hour})
	}
	return list
}
