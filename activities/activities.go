// Package activities holds every side effect of the payment workflows: MySQL writes,
// Alipay calls, merchant webhooks and maintenance. Every activity is idempotent: run any
// number of times, it changes nothing twice.
package activities

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/paykit/paykit/audit"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/secrets"
	"github.com/paykit/paykit/statement"
)

// Error types that workflows branch on.
const (
	ErrTypeChannelRefused = "ChannelRefused"
	ErrTypeInvalid        = "InvalidPayment"
	ErrTypeLockBusy       = "PaymentLockBusy"
	// ErrTypeOrderPaid refuses a payment for an order that is already paid (no re-purchase opt-in).
	ErrTypeOrderPaid = "OrderAlreadyPaid"
	// ErrTypeFinishing answers a checkout that reached a run whose payment has just ended;
	// the run makes way and the caller retries, which starts a new run.
	ErrTypeFinishing = "PaymentFinishing"
	// ErrTypeUnavailable answers a checkout whose run could not set up its payment because
	// a dependency failed for longer than the retries; the request may be retried.
	ErrTypeUnavailable = "PaymentUnavailable"
	ErrTypeEventDead   = "WebhookEventDead"
)

// OrderLocker is the per-order Redis lock of the seed's success path. On contention it
// waits briefly and reports acquired=false, so the caller re-reads the status.
type OrderLocker interface {
	LockOrder(ctx context.Context, tenantID, orderID string) (release func(context.Context), acquired bool, err error)
}

// Redriver starts a workflow for a pending payment whose workflow is not running.
type Redriver interface {
	// Running reports whether the workflow with this id has a running execution.
	Running(ctx context.Context, workflowID string) (bool, error)
	Redrive(ctx context.Context, p payment.Payment) (started bool, err error)
}

// RefundRedriver starts a workflow for a pending refund whose workflow is not running.
type RefundRedriver interface {
	RedriveRefund(ctx context.Context, r payment.Refund) (started bool, err error)
}

// Activities holds the dependencies of every activity. It is built once in the worker.
type Activities struct {
	Store   Stores
	Gateway payment.Gateway
	// Gateways, if set, picks the gateway of each payment: a new one is opened on its
	// tenant's current app (its own Alipay app, or the default one), and everything
	// later goes to the app it was opened on. Gateway is then unused.
	Gateways payment.Gateways
	Locker   OrderLocker // optional; nil or failing means "no lock", the database still holds
	// HTTP posts merchant webhooks; its transport should be NewWebhookTransport's, which
	// applies WebhookPolicy on connect.
	HTTP *http.Client
	// WebhookPolicy says which notify_urls webhooks may be posted to; the zero value
	// allows any.
	WebhookPolicy WebhookPolicy
	// Secrets opens tenants' sealed webhook secrets (PAYKIT_SECRETS_KEYS); nil when no
	// keyring is configured, and then a sealed secret cannot sign and its tenant's
	// webhooks are held back.
	Secrets *secrets.Keyring
	// Temporal is used by the sweeper to see whether a payment's workflow is running.
	Temporal client.Client
	Redriver Redriver
	// RefundRedriver re-drives pending refunds; nil leaves them to the API's retries.
	RefundRedriver RefundRedriver
	Logger         *slog.Logger
	// Benefit is the entitlement granted for a paid payment.
	Benefit string
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// WebhookNow is the clock of a webhook's signed timestamps, which merchants check
	// against their own clocks: the wall clock when nil. Tests set it to send a webhook
	// as if it had been captured earlier and is now replayed.
	WebhookNow func() time.Time
	// Metrics counts business events; nil counts nothing.
	Metrics *Metrics
	// Auditor runs the scheduled audit; nil makes the Audit activity fail. Watermarks
	// keeps where each scheduled audit stands; nil makes a scoped audit fail.
	Auditor    *audit.Auditor
	Watermarks AuditWatermarks
	// AuditRetries keeps the payments the scheduled audit could not verify; nil: it
	// neither keeps nor checks them again.
	AuditRetries AuditRetries
	// Statements reconciles daily bills of the apps StatementApps lists (statement.go);
	// nil makes the ReconcileStatement activity fail. StatementMetrics may be nil.
	Statements       *statement.Reconciler
	StatementApps    StatementApps
	StatementMetrics *StatementMetrics
	// StatementReports says which days an app has a report of, for the catch-up; and
	// EnsureStatementSchedules gives every app listed now its daily schedule (nil: the
	// catch-up leaves the schedules as the worker's start made them).
	StatementReports         StatementReportDates
	EnsureStatementSchedules func(ctx context.Context, appIDs []string) error
	// EventRetry spaces the failed deliveries of an outbox event, by the workflow and by
	// the sweeper alike, and says when the event is dead; zero fields take
	// payment.DefaultEventRetry.
	EventRetry payment.EventRetry
	// EventRetention is how long a delivered event is kept (PAYKIT_EVENT_RETENTION);
	// zero is payment.DefaultEventRetention.
	EventRetention time.Duration
	// AnomalyRetention is how long a resolved anomaly is kept after its resolution
	// (PAYKIT_ANOMALY_RETENTION); zero is payment.DefaultAnomalyRetention.
	AnomalyRetention time.Duration

	// paymentApps caches payment_no → tenant and app for appOf; knownPayments counts it.
	paymentApps   sync.Map
	knownPayments atomic.Int64
}

func (a *Activities) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// benefit is the entitlement granted for a paid payment, "order_fulfilment" unless set.
func (a *Activities) benefit() string {
	if a.Benefit != "" {
		return a.Benefit
	}
	return "order_fulfilment"
}

// heartbeat records progress when ctx is an activity's; tests may call an activity
// directly, outside Temporal.
func heartbeat(ctx context.Context, details ...any) {
	if !activity.IsActivity(ctx) {
		return
	}
	if p, ok := ctx.Value(pulseKey{}).(*pulse); ok {
		// keepAlive's beats repeat these details.
		p.mu.Lock()
		p.details = details
		p.mu.Unlock()
	}
	activity.RecordHeartbeat(ctx, details...)
}

func (a *Activities) log() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

// classify turns a domain or channel error into what Temporal should do with it: a
// business refusal is non-retryable, everything else is retried.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	var ce *payment.ChannelError
	if errors.As(err, &ce) && !ce.Retryable {
		return temporal.NewNonRetryableApplicationError(op+": "+ce.Error(), ErrTypeChannelRefused, err)
	}
	switch payment.ErrorCode(err) {
	case payment.EORDERPAID:
		return temporal.NewNonRetryableApplicationError(op+": "+payment.ErrorMessage(err), ErrTypeOrderPaid, err)
	case payment.EINVALID, payment.EUNPROCESSABLE, payment.EILLEGALSTATE:
		return temporal.NewNonRetryableApplicationError(op+": "+err.Error(), ErrTypeInvalid, err)
	}
	return err
}
