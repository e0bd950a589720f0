package activities

import (
	"context"
	"fmt"
	"time"
)

// SweepResult counts what one sweep did.
type SweepResult struct {
	Checked           int `json:"checked"`
	Redriven          int `json:"redriven"`
	EventsRedelivered int `json:"events_redelivered"`
	EventsFailed      int `json:"events_failed"`
}

// SweepStalePayments re-drives payments still pending in MySQL after staleAfter whose
// workflow is not running (terminated by an operator, say), and redelivers outbox
// events the workflows gave up on. The guarantee then depends on no single callback or
// workflow surviving.
func (a *Activities) SweepStalePayments(ctx context.Context, staleAfter time.Duration, limit int) (SweepResult, error) {
	var res SweepResult
	if limit <= 0 {
		limit = 500
	}
	before := a.now().Add(-staleAfter)
	pending, err := a.Store.PendingPaymentsBefore(ctx, before, limit)
	if err != nil {
		return res, fmt.Errorf("sweep: list pending: %w", err)
	}
	for _, p := range pending {
		res.Checked++
		started, err := a.Redriver.Redrive(ctx, p)
		if err != nil {
			a.log().ErrorContext(ctx, "sweep: re-drive failed", "payment_no", p.PaymentNo, "workflow_id", p.WorkflowID, "err", err)
			continue
		}
		if started {
			res.Redriven++
			a.Metrics.redrive()
			a.log().WarnContext(ctx, "sweep: re-drove pending payment whose workflow was not running",
				"tenant_id", p.TenantID, "order_id", p.OrderID, "payment_no", p.PaymentNo, "workflow_id", p.WorkflowID)
		}
	}
	events, err := a.Store.UndeliveredEvents(ctx, before, limit)
	if err != nil {
		return res, fmt.Errorf("sweep: list undelivered events: %w", err)
	}
	for _, ev := range events {
		if err := a.deliver(ctx, ev); err != nil {
			res.EventsFailed++
			continue
		}
		res.EventsRedelivered++
	}
	return res, nil
}

// PurgeIdempotencyKeys deletes expired Idempotency-Key records.
func (a *Activities) PurgeIdempotencyKeys(ctx context.Context) (int64, error) {
	n, err := a.Store.PurgeExpiredIdempotencyKeys(ctx, a.now())
	if err != nil {
		return 0, fmt.Errorf("purge idempotency keys: %w", err)
	}
	return n, nil
}
