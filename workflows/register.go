package workflows

import (
	"go.temporal.io/sdk/workflow"
)

// Registry is the subset of worker.Worker (and of the replayer) used for registration.
type Registry interface {
	RegisterWorkflowWithOptions(w interface{}, options workflow.RegisterOptions)
}

// Register registers every workflow under its stable name, with its behaviour under
// Worker Versioning (used only by a worker that polls as a Worker Deployment Version):
// a payment and a refund are pinned to the build that started them, since they last
// minutes to hours and a build never replays a history another build wrote; the
// short or long-lived maintenance runs (the schedules' runs, the reconciler, the audit,
// the statements, a redelivery) move to the current build at their next workflow task,
// and keep the patching discipline (workflow.GetVersion) for that.
func Register(r Registry) {
	for _, w := range []struct {
		fn   any
		name string
	}{
		{PaymentWorkflow, PaymentWorkflowName},
		{SweeperWorkflow, SweeperWorkflowName},
		{PurgeIdempotencyKeysWorkflow, PurgeWorkflowName},
		{RefundWorkflow, RefundWorkflowName},
		{AuditWorkflow, AuditWorkflowName},
		{StatementWorkflow, StatementWorkflowName},
		{ReconcilerWorkflow, ReconcilerWorkflowName},
		{RedeliverEventWorkflow, RedeliverEventWorkflowName},
	} {
		r.RegisterWorkflowWithOptions(w.fn, workflow.RegisterOptions{Name: w.name, VersioningBehavior: VersioningBehavior(w.name)})
	}
}

// VersioningBehavior is how a run of the workflow named name is routed under Worker
// Versioning: pinned for payments and refunds, auto-upgrade for every other workflow.
func VersioningBehavior(name string) workflow.VersioningBehavior {
	switch name {
	case PaymentWorkflowName, RefundWorkflowName:
		return workflow.VersioningBehaviorPinned
	}
	return workflow.VersioningBehaviorAutoUpgrade
}
