package activities

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"go.temporal.io/sdk/temporal"

	"github.com/paykit/paykit/payment"
)

// Webhook headers. Merchants verify SignatureHeader and dedupe on EventIDHeader.
const (
	EventIDHeader   = "Paykit-Event-Id"
	EventTypeHeader = "Paykit-Event-Type"
	SignatureHeader = "Paykit-Signature"
	AttemptHeader   = "Paykit-Delivery-Attempt"
)

// SignWebhook returns the signature header value for a webhook body: "sha256=" followed by
// the hex HMAC-SHA256 of the exact body bytes under the tenant's secret.
func SignWebhook(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// VerifyWebhook checks a signature header in constant time.
func VerifyWebhook(secret string, body []byte, header string) bool {
	return hmac.Equal([]byte(SignWebhook(secret, body)), []byte(header))
}

// DeliverWebhook posts one outbox event to the merchant. It runs after the payment's
// transaction committed, so a merchant that is down delays only this step. A delivered
// event is not sent again; the event id lets merchants drop duplicates anyway.
func (a *Activities) DeliverWebhook(ctx context.Context, eventID string) error {
	ev, err := a.Store.GetEvent(ctx, eventID)
	if err != nil {
		if errors.Is(err, payment.ErrNotFound) {
			return temporal.NewNonRetryableApplicationError("deliver webhook: no such event "+eventID, ErrTypeInvalid, err)
		}
		return fmt.Errorf("deliver webhook: %w", err)
	}
	if ev.Delivered {
		return nil
	}
	return a.deliver(ctx, ev)
}

func (a *Activities) deliver(ctx context.Context, ev payment.Event) error {
	tenant, err := a.Store.GetTenant(ctx, ev.TenantID)
	if err != nil {
		return fmt.Errorf("deliver webhook: tenant: %w", err)
	}
	if tenant.NotifyURL == "" {
		// Nothing to deliver to; the event stays in the outbox for the merchant to poll.
		return a.Store.MarkEventDelivered(ctx, ev.EventID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tenant.NotifyURL, bytes.NewReader(ev.Payload))
	if err != nil {
		return temporal.NewNonRetryableApplicationError("deliver webhook: bad notify_url", ErrTypeInvalid, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(EventIDHeader, ev.EventID)
	req.Header.Set(EventTypeHeader, ev.Type)
	req.Header.Set(SignatureHeader, SignWebhook(tenant.WebhookSecret, ev.Payload))
	req.Header.Set(AttemptHeader, strconv.Itoa(ev.Attempts+1))
	client := a.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		a.Metrics.webhook("unreachable")
		_ = a.Store.MarkEventAttempt(ctx, ev.EventID, err.Error())
		return fmt.Errorf("deliver webhook %s: %w", ev.EventID, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		a.Metrics.webhook("rejected")
		msg := fmt.Sprintf("merchant answered HTTP %d", resp.StatusCode)
		_ = a.Store.MarkEventAttempt(ctx, ev.EventID, msg)
		return fmt.Errorf("deliver webhook %s: %s", ev.EventID, msg)
	}
	if err := a.Store.MarkEventDelivered(ctx, ev.EventID); err != nil {
		return fmt.Errorf("deliver webhook %s: mark delivered: %w", ev.EventID, err)
	}
	a.Metrics.webhook("delivered")
	a.log().InfoContext(ctx, "webhook delivered", "event_id", ev.EventID, "tenant_id", ev.TenantID, "payment_no", ev.PaymentNo)
	return nil
}
