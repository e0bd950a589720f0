package activities

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Defaults of SweepOptions.
const (
	// DefaultGrantGrace leaves a freshly paid payment to its workflow, which grants right
	// after MarkPaid, before the sweeper counts its grant as lost.
	DefaultGrantGrace = 2 * time.Minute
	// DefaultGrantLookback bounds how far back the sweeper looks for lost grants, so that
	// each sweep reads a window of recent payments rather than every paid payment ever.
	// A grant is lost for good only if the sweeper has not run for this long.
	DefaultGrantLookback = 7 * 24 * time.Hour
)

// SweepOptions are the sweeper settings added after its first release. Zero values take
// the defaults, so a sweep scheduled with only the first two arguments still works.
type SweepOptions struct {
	// GrantGrace is how long after MarkPaid a payment without its grant is repaired.
	GrantGrace time.Duration `json:"grant_grace"`
	// GrantLookback is how old (by creation) a paid payment may be and still be repaired.
	GrantLookback time.Duration `json:"grant_lookback"`
}

func (o SweepOptions) withDefaults() SweepOptions {
	if o.GrantGrace <= 0 {
		o.GrantGrace = DefaultGrantGrace
	}
	if o.GrantLookback <= 0 {
		o.GrantLookback = DefaultGrantLookback
	}
	return o
}

// SweepResult counts what one sweep did.
type SweepResult struct {
	Checked           int `json:"checked"`
	Redriven          int `json:"redriven"`
	GrantsRepaired    int `json:"grants_repaired"`
	GrantsFailed      int `json:"grants_failed"`
	EventsRedelivered int `json:"events_redelivered"`
	// EventsFailed counts failed attempts, EventsDead those of them that were the
	// event's last.
	EventsFailed int `json:"events_failed"`
	EventsDead   int `json:"events_dead"`
}

// SweepStalePayments re-drives payments still pending in MySQL after staleAfter whose
// workflow is not running (terminated by an operator, say), grants the benefit of paid
// payments whose workflow never did, and redelivers outbox events the workflows gave up
// on. The guarantee then depends on no single callback or workflow surviving.
func (a *Activities) SweepStalePayments(ctx context.Context, staleAfter time.Duration, limit int, opts SweepOptions) (SweepResult, error) {
	var res SweepResult
	if limit <= 0 {
		limit = 500
	}
	opts = opts.withDefaults()
	now := a.now()
	before := now.Add(-staleAfter)
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
	if err := a.repairGrants(ctx, now, opts, limit, &res); err != nil {
		return res, err
	}
	events, err := a.Store.DueEvents(ctx, now, before, 0, limit)
	if err != nil {
		return res, fmt.Errorf("sweep: list due events: %w", err)
	}
	for _, ev := range events {
		if err := a.deliver(ctx, ev); err != nil {
			res.EventsFailed++
			if errors.Is(err, errEventDead) {
				res.EventsDead++
			}
			continue
		}
		res.EventsRedelivered++
	}
	return res, nil
}

// repairGrants grants the benefit of paid payments whose workflow lost it: the grant
// local activity gave up, or the run was terminated or cancelled between MarkPaid and
// the grant. It goes through GrantBenefit, whose unique row makes a race with a late
// workflow harmless; only grants this sweep created are counted.
func (a *Activities) repairGrants(ctx context.Context, now time.Time, opts SweepOptions, limit int, res *SweepResult) error {
	lost, err := a.Store.PaidWithoutGrant(ctx, a.benefit(), now.Add(-opts.GrantLookback), now.Add(-opts.GrantGrace), limit)
	if err != nil {
		return fmt.Errorf("sweep: list paid payments without grant: %w", err)
	}
	for _, p := range lost {
		created, err := a.GrantBenefit(ctx, GrantBenefitInput{TenantID: p.TenantID, PaymentNo: p.PaymentNo, OrderID: p.OrderID})
		if err != nil {
			res.GrantsFailed++
			a.log().ErrorContext(ctx, "sweep: grant repair failed", "tenant_id", p.TenantID, "payment_no", p.PaymentNo, "err", err)
			continue
		}
		if created {
			res.GrantsRepaired++
			a.Metrics.grantRepaired()
			a.log().WarnContext(ctx, "sweep: granted the benefit of a paid payment whose workflow did not",
				"tenant_id", p.TenantID, "order_id", p.OrderID, "payment_no", p.PaymentNo, "benefit", a.benefit(),
				"paid_for", now.Sub(p.UpdatedAt).Round(time.Second).String())
		}
	}
	return nil
}

// PurgeIdempotencyKeys deletes expired Idempotency-Key records.
func (a *Activities) PurgeIdempotencyKeys(ctx context.Context) (int64, error) {
	n, err := a.Store.PurgeExpiredIdempotencyKeys(ctx, a.now())
	if err != nil {
		return 0, fmt.Errorf("purge idempotency keys: %w", err)
	}
	return n, nil
}
