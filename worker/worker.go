// Package worker wires the Temporal worker: it registers the workflows and activities,
// keeps the maintenance Schedules in place, and runs until its context is cancelled.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/workflows"
)

// SweeperScheduleID names the sweeper's schedule of a task queue, as shown in the
// Temporal UI under Schedules. Each task queue (deployment) owns its own set of schedules
// (this one, PurgeScheduleID and AuditScheduleID), so a schedule never points at a queue
// that no worker polls.
func SweeperScheduleID(taskQueue string) string { return "paykit-sweeper-" + taskQueue }

// PurgeScheduleID names the idempotency-key purge schedule of a task queue.
func PurgeScheduleID(taskQueue string) string { return "paykit-purge-idempotency-keys-" + taskQueue }

// ReconcilerScheduleID names the scheduled reconciler of a task queue.
func ReconcilerScheduleID(taskQueue string) string { return "paykit-reconcile-" + taskQueue }

// AuditScheduleID names the audit schedule of a task queue.
func AuditScheduleID(taskQueue string) string { return "paykit-audit-" + taskQueue }

// Config tunes the worker and its schedules.
type Config struct {
	TaskQueue string
	// SweepEvery is how often the sweeper runs; SweepStaleAfter is how old a pending
	// payment must be before the sweeper checks its workflow.
	SweepEvery      time.Duration
	SweepStaleAfter time.Duration
	// SweepGrantGrace is how long after MarkPaid the sweeper grants a benefit the
	// payment's workflow did not (zero: the activity's default).
	SweepGrantGrace time.Duration
	// ReconcilerEvery is how often the scheduled reconciler runs; ReconcileInterval is the
	// first step of the payments' query schedule (payment.NextQueryAt), which it follows.
	ReconcilerEvery   time.Duration
	ReconcileInterval time.Duration
	PurgeEvery        time.Duration
	// AuditEvery is how often the audit runs, over the payments of the previous
	// AuditEvery; AuditLag is how long before a run its window ends, so that every
	// payment in it is past the audit's SLAs.
	AuditEvery time.Duration
	AuditLag   time.Duration
	// MaxConcurrentActivities and MaxConcurrentLocalActivities bound work in flight.
	MaxConcurrentActivities      int
	MaxConcurrentLocalActivities int
	// WorkflowTaskPollers and ActivityTaskPollers set how many long polls each task queue
	// keeps open; every payment step is a round trip, so a few more than the default two
	// keep a burst of checkouts from queueing on the server.
	WorkflowTaskPollers int
	ActivityTaskPollers int
	// WorkflowCacheSize is how many workflow executions the worker process keeps in its
	// sticky cache; 0 (the default) turns sticky execution off. The SDK's pollers serve
	// both the task queue and the worker's sticky queue, and once a sticky poll reports a
	// backlog every poll goes to the sticky queue until one comes back empty, up to a
	// long-poll timeout later: after a burst of notifications the first workflow tasks
	// of new checkouts, which only the task queue carries, then waited with one poller
	// for them, and checkouts timed out with 503. Without the cache every poll serves the
	// task queue, and a payment's later workflow tasks replay its short history instead.
	WorkflowCacheSize int
	// EachPaymentChange makes new payment runs record each change's own version marker
	// instead of the one payment-changes-1 stands for (PaymentVersions). Set it while
	// workers built before payment-changes-1 still poll the task queue: such a worker
	// reads a run without the old markers as one from before every change, takes the old
	// steps, and leaves a history no new worker can replay.
	EachPaymentChange bool
	// ShutdownGrace is how long running activities get to finish on shutdown.
	ShutdownGrace time.Duration
	// Versioning, when its BuildID is set, makes the worker poll as a Worker Deployment
	// Version: payment and refund runs are pinned to the build that started them, and
	// new runs go to the deployment's current version (docs/operate/upgrades.md).
	Versioning Versioning
	// Statements schedules the daily statement reconciliation (statement.go).
	Statements StatementConfig
}

// Versioning names the Worker Deployment Version a worker polls as. The zero value is
// a worker without versioning, which takes any task of its task queue.
type Versioning struct {
	// DeploymentName is the Worker Deployment (one per paykit deployment and task queue);
	// BuildID is this build's identifier within it.
	DeploymentName string
	BuildID        string
}

// On reports whether the worker polls as a Worker Deployment Version.
func (v Versioning) On() bool { return v.BuildID != "" }

// Run registers everything, ensures the schedules and polls until ctx is cancelled.
func Run(ctx context.Context, c client.Client, cfg Config, acts *activities.Activities, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.Default()
	}
	sdkworker.SetStickyWorkflowCacheSize(cfg.WorkflowCacheSize)
	w := New(c, cfg, acts)
	acts.StatementMetrics.Expect(cfg.Statements.Apps)
	if err := EnsureSchedules(ctx, c, cfg); err != nil {
		return err
	}
	if err := EnsureStatementSchedules(ctx, c, cfg.TaskQueue, cfg.Statements); err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	if cfg.Versioning.On() {
		logger.Info("worker polling as a worker deployment version; it takes new runs once that version is current",
			"task_queue", cfg.TaskQueue, "deployment", cfg.Versioning.DeploymentName, "build_id", cfg.Versioning.BuildID)
	} else {
		logger.Info("worker polling", "task_queue", cfg.TaskQueue)
	}
	<-ctx.Done()
	logger.Info("worker stopping; letting running tasks finish", "grace", cfg.ShutdownGrace.String())
	w.Stop()
	return nil
}

// New builds a worker with every workflow and activity registered.
func New(c client.Client, cfg Config, acts *activities.Activities) sdkworker.Worker {
	opts := sdkworker.Options{
		MaxConcurrentActivityExecutionSize:      cfg.MaxConcurrentActivities,
		MaxConcurrentLocalActivityExecutionSize: cfg.MaxConcurrentLocalActivities,
		WorkerStopTimeout:                       cfg.ShutdownGrace,
		MaxConcurrentWorkflowTaskPollers:        cfg.WorkflowTaskPollers,
		MaxConcurrentActivityTaskPollers:        cfg.ActivityTaskPollers,
		// Eager activity dispatch saves a round trip per activity on the hot path.
		DisableEagerActivities:   false,
		PreferredVersionProvider: PaymentVersions(cfg.EachPaymentChange),
		// Heartbeats reach Temporal every few seconds, well within the loops' heartbeat
		// timeout (activities.LoopHeartbeatTimeout) even when a send is slow.
		MaxHeartbeatThrottleInterval: activities.HeartbeatThrottle,
	}
	if cfg.Versioning.On() {
		opts.DeploymentOptions = sdkworker.DeploymentOptions{
			UseVersioning: true,
			Version:       sdkworker.WorkerDeploymentVersion{DeploymentName: cfg.Versioning.DeploymentName, BuildID: cfg.Versioning.BuildID},
		}
	}
	w := sdkworker.New(c, cfg.TaskQueue, opts)
	workflows.Register(w)
	w.RegisterActivity(acts)
	return w
}

// PaymentVersions chooses which version a new run records for a change id: the newest
// of each (nil), or with each, DefaultVersion for workflows.PaymentChangesID, so that the
// run asks, and records, each change's own id as a build before it does.
func PaymentVersions(each bool) sdkworker.PreferredVersionProvider {
	if !each {
		return nil
	}
	return func(in sdkworker.PreferredVersionProviderInput) *sdkworker.VersionPreference {
		if in.ChangeID == workflows.PaymentChangesID {
			return &sdkworker.VersionPreference{Version: workflow.DefaultVersion}
		}
		return nil
	}
}

// EnsureSchedules creates the sweeper, purge and audit schedules, or updates them to the
// current configuration if they exist. Several workers may race here; all converge.
func EnsureSchedules(ctx context.Context, c client.Client, cfg Config) error {
	cfg = cfg.withReconcilerDefaults()
	specs := []struct {
		id     string
		every  time.Duration
		action *client.ScheduleWorkflowAction
		note   string
		// overlap is the policy for a start while the last run goes on: skip it, but for
		// the reconciler, whose run ends near the next start and must be followed at once.
		overlap enumspb.ScheduleOverlapPolicy
		// startNow starts a new schedule's first run at once rather than at its period's
		// first mark (the reconciler's period is minutes long).
		startNow bool
	}{
		{
			id: SweeperScheduleID(cfg.TaskQueue), every: cfg.SweepEvery,
			note: "Re-drives payments pending in MySQL whose workflow is not running, grants benefits their workflow lost, and redelivers stuck merchant webhooks.",
			action: &client.ScheduleWorkflowAction{
				ID: "paykit-sweep-" + cfg.TaskQueue, Workflow: workflows.SweeperWorkflowName, TaskQueue: cfg.TaskQueue,
				Args: []any{workflows.SweepInput{
					StaleAfter: cfg.SweepStaleAfter, Limit: 500, GrantGrace: cfg.SweepGrantGrace,
				}},
				WorkflowRunTimeout: 10 * time.Minute,
			},
		},
		{
			id: ReconcilerScheduleID(cfg.TaskQueue), every: ReconcilerSpan(cfg.ReconcilerEvery),
			overlap: enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE, startNow: true,
			note: "Queries Alipay, every PAYKIT_RECONCILER_EVERY, about the pending payments whose next query is due and wakes the runs of those Alipay says are paid; a run makes the passes of one period.",
			action: &client.ScheduleWorkflowAction{
				ID: "paykit-reconcile-run-" + cfg.TaskQueue, Workflow: workflows.ReconcilerWorkflowName, TaskQueue: cfg.TaskQueue,
				Args: []any{workflows.ReconcilerInput{
					Interval: cfg.ReconcileInterval, Page: 500, Parallel: 32, Budget: reconcilerBudget(cfg.ReconcilerEvery),
					Every: cfg.ReconcilerEvery, Span: ReconcilerSpan(cfg.ReconcilerEvery),
				}},
				// The loop, then its retries' last passes, each its budget and two minutes.
				WorkflowRunTimeout: ReconcilerSpan(cfg.ReconcilerEvery) + 8*(reconcilerBudget(cfg.ReconcilerEvery)+2*time.Minute) + time.Minute,
			},
		},
		{
			id: PurgeScheduleID(cfg.TaskQueue), every: cfg.PurgeEvery,
			note: "Deletes expired Idempotency-Key records, then delivered merchant events and resolved anomalies past their retention.",
			action: &client.ScheduleWorkflowAction{
				ID: "paykit-purge-" + cfg.TaskQueue, Workflow: workflows.PurgeWorkflowName, TaskQueue: cfg.TaskQueue,
				// Three purges of up to 5 minutes each, with their retries.
				WorkflowRunTimeout: 30 * time.Minute,
			},
		},
		{
			id: AuditScheduleID(cfg.TaskQueue), every: cfg.AuditEvery,
			note: "Audits the payments of the previous interval against Alipay and records each broken invariant as an audit_* anomaly.",
			action: &client.ScheduleWorkflowAction{
				ID: "paykit-audit-run-" + cfg.TaskQueue, Workflow: workflows.AuditWorkflowName, TaskQueue: cfg.TaskQueue,
				Args:               []any{workflows.AuditInput{Window: cfg.AuditEvery, Lag: cfg.AuditLag}},
				WorkflowRunTimeout: 8 * time.Hour,
			},
		},
	}
	sc := c.ScheduleClient()
	for _, s := range specs {
		spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: s.every}}}
		overlap := s.overlap
		if overlap == enumspb.SCHEDULE_OVERLAP_POLICY_UNSPECIFIED {
			overlap = enumspb.SCHEDULE_OVERLAP_POLICY_SKIP
		}
		_, err := sc.Create(ctx, client.ScheduleOptions{
			ID: s.id, Spec: spec, Action: s.action, Overlap: overlap, Note: s.note,
			TriggerImmediately: s.startNow,
		})
		if err == nil {
			continue
		}
		if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
			return fmt.Errorf("create schedule %s: %w", s.id, err)
		}
		action := s.action
		err = sc.GetHandle(ctx, s.id).Update(ctx, client.ScheduleUpdateOptions{
			DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
				in.Description.Schedule.Spec = &spec
				in.Description.Schedule.Action = action
				in.Description.Schedule.Policy.Overlap = overlap
				return &client.ScheduleUpdate{Schedule: &in.Description.Schedule}, nil
			},
		})
		if err != nil {
			return fmt.Errorf("update schedule %s: %w", s.id, err)
		}
	}
	return nil
}

// withReconcilerDefaults fills in the reconciler's settings the configuration left
// unset: the production query schedule (a one-minute first step) and a quarter of it.
func (cfg Config) withReconcilerDefaults() Config {
	if cfg.ReconcileInterval <= 0 {
		cfg.ReconcileInterval = time.Minute
	}
	if cfg.ReconcilerEvery <= 0 {
		cfg.ReconcilerEvery = DefaultReconcilerEvery(cfg.ReconcileInterval)
	}
	return cfg
}

// DefaultReconcilerEvery is the reconciler's schedule for a query step of interval: a
// quarter of it, from 1 to 15 s, so that a due query waits at most that for its run.
func DefaultReconcilerEvery(interval time.Duration) time.Duration {
	return min(max(interval/4, time.Second), 15*time.Second)
}

// ReconcilerSpan is the reconciler schedule's period, which one run spends making a
// pass every every: twenty passes, from one to five minutes (a run every five minutes at
// the default 15 s, instead of one per pass).
func ReconcilerSpan(every time.Duration) time.Duration {
	return min(max(20*every, time.Minute), 5*time.Minute)
}

// reconcilerBudget is how long a run of the reconciler starts queries: four schedule
// periods, from one to five minutes. A backlog past it (an outage's worth of due queries
// under the app's call limit) is taken up by the next runs, which the schedule skips
// while one is running; the run's timeout covers its activity's three attempts.
func reconcilerBudget(every time.Duration) time.Duration {
	return min(max(4*every, time.Minute), 5*time.Minute)
}
