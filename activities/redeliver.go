package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/paykit/paykit/payment"
)

// Error types of RedeliverEvent.
const (
	// ErrTypeEventNotFound: the tenant has no such event.
	ErrTypeEventNotFound = "WebhookEventNotFound"
	// ErrTypeEventBusy: a sweeper or another redelivery is delivering the event now.
	ErrTypeEventBusy = "WebhookEventBusy"
)

// RedeliverInput names the event a merchant asked to have delivered again.
type RedeliverInput struct {
	TenantID string `json:"tenant_id"`
	EventID  string `json:"event_id"`
}

// RedeliverResult is the outcome of one redelivery attempt and the event after it
// (payment.Redelivery, which the HTTP layer answers without importing activities).
type RedeliverResult = payment.Redelivery

// RedeliverEvent delivers one of a tenant's events now, at the merchant's request,
// whatever its state: pending, dead (it is delivered after all), or delivered before
// (the merchant dedupes on the event id). It first claims the event, so that it never
// runs alongside a sweeper's attempt or another redelivery of it (they get
// ErrTypeEventBusy); the payment workflow's own first attempts do not claim, and a
// redelivery may overlap one of those, which the event id makes harmless. A failed
// attempt counts like any other: it schedules the next one, and may make the event dead.
func (a *Activities) RedeliverEvent(ctx context.Context, in RedeliverInput) (RedeliverResult, error) {
	ev, err := a.Store.GetTenantEvent(ctx, in.TenantID, in.EventID)
	if errors.Is(err, payment.ErrNotFound) {
		return RedeliverResult{}, temporal.NewNonRetryableApplicationError("no event "+in.EventID, ErrTypeEventNotFound, err)
	}
	if err != nil {
		return RedeliverResult{}, fmt.Errorf("redeliver: %w", err)
	}
	tenant, err := a.Store.GetTenant(ctx, in.TenantID)
	if err != nil {
		return RedeliverResult{}, fmt.Errorf("redeliver: tenant: %w", err)
	}
	now := a.now()
	until := now.Add(max(time.Minute, 3*a.webhookTimeout()+bookkeepingTimeout))
	claimed, err := a.Store.ClaimEventForRedelivery(ctx, in.TenantID, in.EventID, now, until)
	if err != nil {
		return RedeliverResult{}, fmt.Errorf("redeliver: %w", err)
	}
	if !claimed {
		return RedeliverResult{}, temporal.NewNonRetryableApplicationError(
			"event "+in.EventID+" is being delivered right now; retry shortly", ErrTypeEventBusy, nil)
	}
	derr := a.deliverTo(ctx, tenant, ev)
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	if err := a.Store.ReleaseEventClaim(bctx, in.EventID, until); err != nil {
		// The hold ends by itself at until.
		a.log().WarnContext(ctx, "redeliver: release claim", "event_id", in.EventID, "tenant_id", in.TenantID, "err", err)
	}
	res := RedeliverResult{Delivered: derr == nil}
	if res.Event, err = a.Store.GetTenantEvent(bctx, in.TenantID, in.EventID); err != nil {
		return RedeliverResult{}, fmt.Errorf("redeliver: read back: %w", err)
	}
	if derr != nil {
		// The tenant is shown what the attempt recorded: the failure's class, never the
		// dialer's text with internal names and addresses (that is in the log below).
		res.Error = res.Event.LastError
		if res.Error == "" {
			res.Error = failureClass(derr)
		}
	}
	a.log().InfoContext(ctx, "webhook redelivered on request", "event_id", in.EventID, "tenant_id", in.TenantID,
		"delivered", res.Delivered, "err", derr)
	return res, nil
}
