package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/paykit/paykit/workflows"
)

// StatementScheduleID names the daily statement schedule of one Alipay app on a task queue.
func StatementScheduleID(taskQueue, appID string) string {
	return "paykit-statement-" + taskQueue + "-" + appID
}

// StatementConfig is the daily statement schedule: one per app, each morning at At
// (China time, as an offset from midnight), for the previous day.
type StatementConfig struct {
	Apps        []string
	At          time.Duration
	RetryEvery  time.Duration
	GiveUpAfter time.Duration
}

// statementCalendar is At China time as a UTC calendar: China keeps no daylight saving,
// so the conversion is exact and the server needs no time zone database.
func statementCalendar(at time.Duration) client.ScheduleCalendarSpec {
	utc := (at - 8*time.Hour) % (24 * time.Hour)
	if utc < 0 {
		utc += 24 * time.Hour
	}
	return client.ScheduleCalendarSpec{
		Hour:   []client.ScheduleRange{{Start: int(utc / time.Hour)}},
		Minute: []client.ScheduleRange{{Start: int(utc % time.Hour / time.Minute)}},
		Second: []client.ScheduleRange{{Start: int(utc % time.Minute / time.Second)}},
	}
}

// EnsureStatementSchedules creates or updates the statement schedule of every app. Runs
// of consecutive days may overlap (one still waiting for its bill), so all are allowed;
// each reconciles its own day.
func EnsureStatementSchedules(ctx context.Context, c client.Client, taskQueue string, cfg StatementConfig) error {
	sc := c.ScheduleClient()
	spec := client.ScheduleSpec{Calendars: []client.ScheduleCalendarSpec{statementCalendar(cfg.At)}}
	for _, app := range cfg.Apps {
		id := StatementScheduleID(taskQueue, app)
		action := &client.ScheduleWorkflowAction{
			ID: "paykit-statement-run-" + taskQueue + "-" + app, Workflow: workflows.StatementWorkflowName, TaskQueue: taskQueue,
			Args: []any{workflows.StatementInput{AppID: app, RetryEvery: cfg.RetryEvery, GiveUpAfter: cfg.GiveUpAfter}},
			// Waiting for a late bill, then reconciling it.
			WorkflowRunTimeout: 4 * 24 * time.Hour,
		}
		_, err := sc.Create(ctx, client.ScheduleOptions{
			ID: id, Spec: spec, Action: action, Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL,
			Note: "Reconciles Alipay's trade bill of the previous day for app " + app + " (paykit statement shows the report).",
		})
		if err == nil {
			continue
		}
		if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
			return fmt.Errorf("create schedule %s: %w", id, err)
		}
		err = sc.GetHandle(ctx, id).Update(ctx, client.ScheduleUpdateOptions{
			DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
				in.Description.Schedule.Spec = &spec
				in.Description.Schedule.Action = action
				in.Description.Schedule.Policy.Overlap = enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL
				return &client.ScheduleUpdate{Schedule: &in.Description.Schedule}, nil
			},
		})
		if err != nil {
			return fmt.Errorf("update schedule %s: %w", id, err)
		}
	}
	return nil
}
