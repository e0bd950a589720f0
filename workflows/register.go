package workflows

import (
	"go.temporal.io/sdk/workflow"
)

// Registry is the subset of worker.Worker (and of the replayer) used for registration.
type Registry interface {
	RegisterWorkflowWithOptions(w interface{}, options workflow.RegisterOptions)
}

// Register registers every workflow under its stable name.
func Register(r Registry) {
	r.RegisterWorkflowWithOptions(PaymentWorkflow, workflow.RegisterOptions{Name: PaymentWorkflowName})
	r.RegisterWorkflowWithOptions(SweeperWorkflow, workflow.RegisterOptions{Name: SweeperWorkflowName})
	r.RegisterWorkflowWithOptions(PurgeIdempotencyKeysWorkflow, workflow.RegisterOptions{Name: PurgeWorkflowName})
	r.RegisterWorkflowWithOptions(RefundWorkflow, workflow.RegisterOptions{Name: RefundWorkflowName})
	r.RegisterWorkflowWithOptions(AuditWorkflow, workflow.RegisterOptions{Name: AuditWorkflowName})
	r.RegisterWorkflowWithOptions(StatementWorkflow, workflow.RegisterOptions{Name: StatementWorkflowName})
	r.RegisterWorkflowWithOptions(ReconcilerWorkflow, workflow.RegisterOptions{Name: ReconcilerWorkflowName})
	r.RegisterWorkflowWithOptions(RedeliverEventWorkflow, workflow.RegisterOptions{Name: RedeliverEventWorkflowName})
}
