package activities

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/webhook"
)

// Webhook headers. Merchants verify the Standard Webhooks headers (webhook-id, the
// event id; webhook-timestamp; webhook-signature, one "v1,<base64>" per secret valid
// during a rotation) with a standardwebhooks library and dedupe on webhook-id, or the
// older SignatureHeader (package webhook: "t=<unix>,v1=<hex>") and dedupe on the signed
// body's event_id.
const (
	EventIDHeader   = "Paykit-Event-Id"
	EventTypeHeader = "Paykit-Event-Type"
	SignatureHeader = "Paykit-Signature"
	AttemptHeader   = "Paykit-Delivery-Attempt"
)

// DeliverWebhook posts one outbox event to the merchant. It runs after the payment's
// transaction committed, so a merchant that is down delays only this step. A delivered
// event is not sent again; the event id lets merchants drop duplicates anyway. Each
// failure schedules the event's next attempt for the sweeper, and the one that uses up
// the event's attempts is not retried.
func (a *Activities) DeliverWebhook(ctx context.Context, eventID string) error {
	// The event and its tenant in one read: the tenant is read as it is now, so a
	// rotated secret or a new notify_url applies to the next attempt.
	ev, tenant, err := a.Store.GetEventWithTenant(ctx, eventID)
	if err != nil {
		if errors.Is(err, payment.ErrNotFound) {
			return temporal.NewNonRetryableApplicationError("deliver webhook: no such event "+eventID, ErrTypeInvalid, err)
		}
		return fmt.Errorf("deliver webhook: %w", err)
	}
	if ev.Delivered {
		return nil
	}
	if err := a.deliverTo(ctx, tenant, ev); err != nil {
		if errors.Is(err, errEventDead) {
			return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeEventDead, err)
		}
		return err
	}
	return nil
}

// deliverTo posts ev to tenant's notify_url. A failure is recorded on the event, which
// schedules its next attempt by a.EventRetry, so the sweeper's backoff continues from
// the workflow's attempts, and after the last allowed one the event is dead.
func (a *Activities) deliverTo(ctx context.Context, tenant payment.Tenant, ev payment.Event) error {
	if tenant.NotifyURL == "" {
		// Nothing to deliver to; the event stays in the outbox for the merchant to poll.
		return a.Store.MarkEventDelivered(ctx, ev.EventID)
	}
	if err := a.WebhookPolicy.CheckURL(tenant.NotifyURL); err != nil {
		// Counted as an attempt, so that the event dies in the end.
		a.Metrics.webhook("refused")
		return a.recordFailure(ctx, ev, err.Error(),
			temporal.NewNonRetryableApplicationError("deliver webhook: "+err.Error(), ErrTypeInvalid, err))
	}
	// The wall clock, not a.now: the merchant checks the timestamp against its own clock.
	now := a.webhookNow()
	signature, standard, err := a.sign(tenant, ev, now)
	if err != nil {
		// Never sent unsigned: the event stays in the outbox and is retried on its
		// backoff, so it goes out once the tenant's secret can be read.
		a.Metrics.webhook("unsigned")
		a.log().ErrorContext(ctx, "webhook held back: no usable webhook secret to sign it with", "event_id", ev.EventID,
			"tenant_id", ev.TenantID, "payment_no", ev.PaymentNo, "err", err)
		return a.recordFailure(ctx, ev, "not sent: no usable webhook secret to sign it with", fmt.Errorf("deliver webhook %s: %w", ev.EventID, err))
	}
	reqCtx, cancel := context.WithTimeout(ctx, a.webhookTimeout())
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, tenant.NotifyURL, bytes.NewReader(ev.Payload))
	if err != nil {
		// Counted as an attempt all the same, so that the event dies in the end instead
		// of being retried by every sweep.
		return a.recordFailure(ctx, ev, "bad notify_url: "+err.Error(),
			temporal.NewNonRetryableApplicationError("deliver webhook: bad notify_url", ErrTypeInvalid, err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(EventIDHeader, ev.EventID)
	req.Header.Set(EventTypeHeader, ev.Type)
	req.Header.Set(SignatureHeader, signature)
	req.Header.Set(AttemptHeader, strconv.Itoa(ev.Attempts+1))
	req.Header.Set(webhook.StandardIDHeader, ev.EventID)
	req.Header.Set(webhook.StandardTimestampHeader, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(webhook.StandardSignatureHeader, standard)
	resp, err := a.webhookClient().Do(req)
	if err != nil {
		a.Metrics.webhook("unreachable")
		// The tenant sees the class of the failure; the operator's log has the error.
		class := failureClass(err)
		a.log().WarnContext(ctx, "webhook delivery failed", "event_id", ev.EventID, "tenant_id", ev.TenantID,
			"payment_no", ev.PaymentNo, "class", class, "err", err)
		return a.recordFailure(ctx, ev, class, fmt.Errorf("deliver webhook %s: %w", ev.EventID, err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		a.Metrics.webhook("rejected")
		msg := fmt.Sprintf("merchant answered HTTP %d", resp.StatusCode)
		return a.recordFailure(ctx, ev, msg, fmt.Errorf("deliver webhook %s: %s", ev.EventID, msg))
	}
	// The merchant has it: record that even if the request's context ends now.
	bctx, bcancel := bookkeeping(ctx)
	defer bcancel()
	if err := a.Store.MarkEventDelivered(bctx, ev.EventID); err != nil {
		return fmt.Errorf("deliver webhook %s: mark delivered: %w", ev.EventID, err)
	}
	a.Metrics.webhook("delivered")
	a.log().InfoContext(ctx, "webhook delivered", "event_id", ev.EventID, "tenant_id", ev.TenantID, "payment_no", ev.PaymentNo)
	return nil
}

// sign returns ev's Paykit-Signature and webhook-signature headers at now under every
// secret of tenant valid then, or an error if the tenant has no secret or one does not
// open: a webhook is never sent without a signature.
func (a *Activities) sign(tenant payment.Tenant, ev payment.Event, now time.Time) (paykit, standard string, err error) {
	var keys payment.Opener
	if a.Secrets != nil {
		keys = a.Secrets
	}
	secrets, err := tenant.WebhookSecrets(now, keys)
	if err != nil {
		return "", "", err
	}
	if paykit, err = webhook.Signature(ev.Payload, now, secrets...); err != nil {
		return "", "", err
	}
	if standard, err = webhook.StandardSignature(ev.EventID, now, ev.Payload, secrets...); err != nil {
		return "", "", err
	}
	return paykit, standard, nil
}

// webhookNow is the time a webhook is signed as sent at: the wall clock, or WebhookNow.
func (a *Activities) webhookNow() time.Time {
	if a.WebhookNow != nil {
		return a.WebhookNow()
	}
	return time.Now()
}

// webhookClient is a.HTTP (or the default client) that never follows a redirect: a
// notify_url answering 3xx would otherwise send the signed event, and on 307/308 its
// body, to wherever the merchant's server points, including hosts inside paykit's own
// network. A redirect is a failed attempt ("merchant answered HTTP 307").
func (a *Activities) webhookClient() *http.Client {
	c := http.DefaultClient
	if a.HTTP != nil {
		c = a.HTTP
	}
	nc := *c
	nc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &nc
}

// errEventDead marks the failed attempt after which an event is dead.
var errEventDead = errors.New("event is dead: no attempts left")

// recordFailure stores a failed attempt, reports the event dying, and returns the
// delivery error err, joined with errEventDead if this attempt was its last. If the
// store cannot record the attempt, the event keeps its last schedule (or a sweeper's
// lease) and is retried from there.
func (a *Activities) recordFailure(ctx context.Context, ev payment.Event, msg string, err error) error {
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	after, died, merr := a.Store.MarkEventAttempt(bctx, ev.EventID, msg, a.now(), a.eventRetry())
	if merr != nil {
		a.log().WarnContext(ctx, "webhook: could not record failed attempt", "event_id", ev.EventID,
			"tenant_id", ev.TenantID, "payment_no", ev.PaymentNo, "err", merr)
		return err
	}
	if !died {
		return err
	}
	a.Metrics.eventDead()
	a.log().ErrorContext(ctx, "webhook: giving up on event after its last attempt; operator action required",
		"event_id", ev.EventID, "tenant_id", ev.TenantID, "payment_no", ev.PaymentNo, "type", ev.Type,
		"attempts", after.Attempts, "last_error", after.LastError)
	return errors.Join(err, errEventDead)
}

// bookkeeping returns a context for recording a delivery's outcome: a request cut short
// by its deadline must still be able to write that it failed.
func bookkeeping(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), bookkeepingTimeout)
}

// bookkeepingTimeout bounds the write that records a delivery's outcome.
const bookkeepingTimeout = 5 * time.Second

// defaultWebhookTimeout bounds one webhook request when the HTTP client sets no timeout.
const defaultWebhookTimeout = 10 * time.Second

// webhookTimeout is how long one webhook request may take.
func (a *Activities) webhookTimeout() time.Duration {
	if a.HTTP != nil && a.HTTP.Timeout > 0 {
		return a.HTTP.Timeout
	}
	return defaultWebhookTimeout
}

// eventRetry is the outbox's retry policy, a.EventRetry with defaults filled in.
func (a *Activities) eventRetry() payment.EventRetry { return a.EventRetry.WithDefaults() }
