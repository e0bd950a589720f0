// Package workflows holds the deterministic Temporal workflow code: one PaymentWorkflow
// per (tenant, order), the scheduled maintenance workflows and the scheduled audit. It
// never talks to MySQL, Redis or HTTP itself; activities do.
package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/runs"
)

// Names under which workflows, signals, queries and updates are registered. They are part
// of the contract with running histories: never rename them.
const (
	PaymentWorkflowName = "PaymentWorkflow"
	SweeperWorkflowName = "SweeperWorkflow"
	PurgeWorkflowName   = "PurgeIdempotencyKeysWorkflow"
	AuditWorkflowName   = "AuditWorkflow"
	RefundWorkflowName  = "RefundWorkflow"
	// ReconcilerWorkflowName is the scheduled reconciler of a task queue (reconciler.go).
	ReconcilerWorkflowName = "ReconcilerWorkflow"

	NotificationSignal = "alipay-notification"
	// ReconcileSignal wakes a payment's run to query Alipay (activities.ReconcileSignal).
	ReconcileSignal  = activities.ReconcileSignal
	StateQuery       = "state"
	CheckoutUpdate   = "checkout"
	RefundStateQuery = "refund-state"
)

// Search attributes that operators filter payments by in the Temporal UI. They must be
// registered on the namespace before the first workflow runs.
var (
	SATenantID      = temporal.NewSearchAttributeKeyKeyword("TenantId")
	SAOrderID       = temporal.NewSearchAttributeKeyKeyword("OrderId")
	SAPaymentNo     = temporal.NewSearchAttributeKeyKeyword("PaymentNo")
	SAPaymentStatus = temporal.NewSearchAttributeKeyKeyword("PaymentStatus")
	SAAmountFen     = temporal.NewSearchAttributeKeyInt64("AmountFen")
	SARefundNo      = temporal.NewSearchAttributeKeyKeyword("RefundNo")
	SARefundStatus  = temporal.NewSearchAttributeKeyKeyword("RefundStatus")
)

// SearchAttributeTypes lists every custom search attribute with its type name, for
// registration (`--search-attribute Name=Type` or the operator API).
func SearchAttributeTypes() map[string]string {
	return map[string]string{
		"TenantId":      "Keyword",
		"OrderId":       "Keyword",
		"PaymentNo":     "Keyword",
		"PaymentStatus": "Keyword",
		"AmountFen":     "Int",
		"RefundNo":      "Keyword",
		"RefundStatus":  "Keyword",
	}
}

// The messages between the API side and the payment runs live in package runs, which
// imports no workflow or activity code; the workflow code names them here.

// Timing is runs.Timing.
type Timing = runs.Timing

// PaymentInput is runs.PaymentInput.
type PaymentInput = runs.PaymentInput

// OpenedPayment is runs.OpenedPayment.
type OpenedPayment = runs.OpenedPayment

// PaymentState is runs.PaymentState.
type PaymentState = runs.PaymentState

// CheckoutRequest is runs.CheckoutRequest.
type CheckoutRequest = runs.CheckoutRequest

// CheckoutResult is runs.CheckoutResult.
type CheckoutResult = runs.CheckoutResult

// NotificationPayload is runs.NotificationPayload.
type NotificationPayload = runs.NotificationPayload

// DefaultTiming is the production timing of a payment.
func DefaultTiming() Timing { return runs.DefaultTiming() }

// positiveOr returns v, or def when v is not positive (unset in an older input).
func positiveOr[T int | int32 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// SweepInput configures one sweeper run. It is the schedule's argument; its JSON shows
// durations as "2m0s" and still reads the nanoseconds and the missing fields of inputs
// written before, and zero durations take the activity's defaults.
type SweepInput struct {
	// StaleAfter is how old a pending payment must be before it is checked.
	StaleAfter time.Duration `json:"stale_after"`
	// Limit bounds how many payments one run looks at; the next run goes on past them.
	Limit int `json:"limit"`
	// GrantGrace is how long after MarkPaid a payment still without its benefit grant is
	// granted by the sweeper (default activities.DefaultGrantGrace).
	GrantGrace time.Duration `json:"grant_grace"`
	// GrantLookback is how far back, by paid_at, lost grants are looked for (default
	// activities.DefaultGrantLookback).
	GrantLookback time.Duration `json:"grant_lookback"`
}

// upsertSearchAttributes writes a run's search attributes, which the Temporal UI's
// filters read; a failure is logged, never fatal to the run.
func upsertSearchAttributes(ctx workflow.Context, logger interface{ Error(string, ...any) }, attrs ...temporal.SearchAttributeUpdate) {
	if err := workflow.UpsertTypedSearchAttributes(ctx, attrs...); err != nil {
		logger.Error("upsert search attributes", "err", err)
	}
}
