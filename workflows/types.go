// Package workflows holds the deterministic Temporal workflow code: one PaymentWorkflow
// per (tenant, order), the scheduled maintenance workflows and the scheduled audit. It
// never talks to MySQL, Redis or HTTP itself; activities do.
package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/payment"
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

// Timing holds every interval of a payment's life. It travels in the workflow input so
// a run keeps the timing it started with, and tests can shrink it to seconds.
type Timing struct {
	// PaymentTTL is how long the buyer has to pay, from creation.
	PaymentTTL time.Duration `json:"payment_ttl"`
	// ReconcileInterval is how often Alipay is queried while the payment is pending.
	ReconcileInterval time.Duration `json:"reconcile_interval"`
	// WebhookInitialInterval and WebhookMaxInterval bound the merchant webhook backoff.
	WebhookInitialInterval time.Duration `json:"webhook_initial_interval"`
	WebhookMaxInterval     time.Duration `json:"webhook_max_interval"`
	// WebhookMaxAttempts bounds delivery attempts inside the workflow; the sweeper
	// redelivers what is still undelivered afterwards.
	WebhookMaxAttempts int32 `json:"webhook_max_attempts"`
}

// DefaultTiming is the production timing.
func DefaultTiming() Timing {
	return Timing{
		PaymentTTL:             15 * time.Minute,
		ReconcileInterval:      time.Minute,
		WebhookInitialInterval: time.Second,
		WebhookMaxInterval:     5 * time.Minute,
		WebhookMaxAttempts:     20,
	}
}

// positiveOr returns v, or def when v is not positive (unset in an older input).
func positiveOr[T int | int32 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

func (t Timing) withDefaults() Timing {
	d := DefaultTiming()
	t.PaymentTTL = positiveOr(t.PaymentTTL, d.PaymentTTL)
	t.ReconcileInterval = positiveOr(t.ReconcileInterval, d.ReconcileInterval)
	t.WebhookInitialInterval = positiveOr(t.WebhookInitialInterval, d.WebhookInitialInterval)
	t.WebhookMaxInterval = positiveOr(t.WebhookMaxInterval, d.WebhookMaxInterval)
	t.WebhookMaxAttempts = positiveOr(t.WebhookMaxAttempts, d.WebhookMaxAttempts)
	return t
}

// PaymentInput starts (or resumes) the payment workflow of one order.
type PaymentInput struct {
	TenantID  string         `json:"tenant_id"`
	OrderID   string         `json:"order_id"`
	Amount    payment.Amount `json:"amount_fen"`
	Currency  string         `json:"currency"`
	Subject   string         `json:"subject"`
	Method    payment.Method `json:"method"`
	ReturnURL string         `json:"return_url,omitempty"`
	// QuitURL is where a wap cashier sends a buyer who gives up (wap only).
	QuitURL string `json:"quit_url,omitempty"`
	Timing  Timing `json:"timing"`
	// Repurchase opts in to paying an order that an earlier payment already paid.
	Repurchase bool `json:"repurchase,omitempty"`
	// PaymentNo is set when an existing pending payment is re-driven (by the sweeper or a
	// late callback): the run adopts it instead of creating a new one.
	PaymentNo string `json:"payment_no,omitempty"`
	// Opened is set when the API has already created the pending payment PaymentNo and
	// opened its trade (kept its pay link) in its own transaction: the run starts from
	// that, with no activity in its first workflow task.
	Opened *OpenedPayment `json:"opened,omitempty"`
	// State is carried across continue-as-new.
	State *PaymentState `json:"state,omitempty"`
}

// OpenedPayment is what the API committed for a payment it created and opened: its
// expiry and its pay link, one of a cashier URL or an app order string.
type OpenedPayment struct {
	ExpireAt    time.Time `json:"expire_at"`
	PayURL      string    `json:"pay_url,omitempty"`
	QRCode      string    `json:"qr_code,omitempty"`
	OrderString string    `json:"order_string,omitempty"`
	// QueryScheduled is true when the payment's row has its first query by the scheduled
	// reconciler: a run on payment-changes-1 version 4 then keeps no reconciliation timer.
	QueryScheduled bool `json:"query_scheduled,omitempty"`
}

// PaymentState is the workflow's view of the payment, returned by the state query and as
// the workflow result.
type PaymentState struct {
	PaymentNo string         `json:"payment_no"`
	TenantID  string         `json:"tenant_id"`
	OrderID   string         `json:"order_id"`
	Amount    payment.Amount `json:"amount_fen"`
	Currency  string         `json:"currency"`
	Status    payment.Status `json:"status"`
	// Method is how the payment is paid; a checkout of another method does not join it.
	Method payment.Method `json:"method,omitempty"`
	PayURL string         `json:"pay_url,omitempty"`
	QRCode string         `json:"qr_code,omitempty"`
	// OrderString is the signed alipay.trade.app.pay order string of an app payment.
	OrderString string    `json:"order_string,omitempty"`
	ExpireAt    time.Time `json:"expire_at"`
	TradeNo     string    `json:"trade_no,omitempty"`
	PaidAt      time.Time `json:"paid_at,omitzero"`
	// Initialized is true once the payment row and the Alipay trade exist.
	Initialized bool `json:"initialized"`
	// OpenedConfirmed is true once a run for a payment the API opened has read the row
	// and found it pending (confirmOpened).
	OpenedConfirmed bool `json:"opened_confirmed,omitempty"`
	// InitError is set if the payment could not be created at all; InitErrorType is its
	// Temporal error type (e.g. OrderAlreadyPaid).
	InitError     string `json:"init_error,omitempty"`
	InitErrorType string `json:"init_error_type,omitempty"`
	// OpenRefused is Alipay's refusal to open the trade. The payment is then closed, but
	// only once Alipay confirms that the trade cannot be paid.
	OpenRefused string `json:"open_refused,omitempty"`
	// PayLinkIssued is true once a way to pay this payment (a page or wap cashier URL, a
	// QR code or an app order string) may be in a buyer's hands. Alipay creates a page or
	// wap trade only when the URL is opened and an app trade only when the buyer's Alipay
	// app submits the order string, and a precreated QR trade may be created only when it
	// is scanned, so until expiry (time_expire, never later than ExpireAt) "trade not
	// exist" does not prove that the payment can no longer be paid.
	PayLinkIssued bool `json:"pay_link_issued,omitempty"`
	// Adopted is true when the run took over a payment that existed before it (a re-drive,
	// or a new checkout after a run that ended with the payment pending).
	Adopted bool `json:"adopted,omitempty"`
	// CancelRequested is set when an operator cancelled the run: from then on the run
	// closes the payment as soon as Alipay confirms it, and keeps trying until it does.
	CancelRequested bool `json:"cancel_requested,omitempty"`
	// SeenNotifyIDs are the most recent notify_ids applied, for signal dedupe.
	SeenNotifyIDs   []string `json:"seen_notify_ids,omitempty"`
	Reconciliations int      `json:"reconciliations"`
	// Queries and CloseAttempts count the backoff schedule's queries before expiry and its
	// close paths that left the payment pending (reconcile.go); NextReconcileAt is when the
	// schedule next wakes the run (zero: the expiry timer comes first).
	Queries         int       `json:"queries,omitempty"`
	CloseAttempts   int       `json:"close_attempts,omitempty"`
	NextReconcileAt time.Time `json:"next_reconcile_at,omitzero"`
	// QueryScheduled is true for a run on version 4 whose payment the scheduled
	// reconciler queries: no reconciliation timer before expiry, and ReconcileSignal
	// wakes it to query Alipay itself. WokenAt is when a wake last made it query.
	QueryScheduled bool      `json:"query_scheduled,omitempty"`
	WokenAt        time.Time `json:"woken_at,omitzero"`
	BenefitGranted bool      `json:"benefit_granted"`
	EventID        string    `json:"event_id,omitempty"`
	WebhookSent    bool      `json:"webhook_sent"`
	// Anomaly describes a case recorded for an operator (e.g. paid after close).
	Anomaly string `json:"anomaly,omitempty"`
}

// CheckoutRequest is the argument of the checkout update.
type CheckoutRequest struct {
	Amount   payment.Amount `json:"amount_fen"`
	Currency string         `json:"currency"`
	Subject  string         `json:"subject"`
	Method   payment.Method `json:"method"`
	// Repurchase is the checkout's opt-in to paying an already paid order again.
	Repurchase bool `json:"repurchase,omitempty"`
}

// CheckoutResult is what POST /v1/payments answers.
type CheckoutResult struct {
	PaymentNo string         `json:"payment_no"`
	TenantID  string         `json:"tenant_id"`
	OrderID   string         `json:"order_id"`
	Status    payment.Status `json:"status"`
	Amount    payment.Amount `json:"amount_fen"`
	Currency  string         `json:"currency"`
	Subject   string         `json:"subject"`
	PayURL    string         `json:"pay_url,omitempty"`
	QRCode    string         `json:"qr_code,omitempty"`
	// OrderString is what an app payment's app passes to the Alipay app SDK.
	OrderString string    `json:"order_string,omitempty"`
	ExpireAt    time.Time `json:"expire_at"`
}

// NotificationPayload is the callback signal: a notification the API has verified
// (signature, app_id, seller_id, out_trade_no, amount) and recorded.
type NotificationPayload struct {
	NotifyID    string             `json:"notify_id"`
	TradeNo     string             `json:"trade_no"`
	PaymentNo   string             `json:"payment_no"`
	TradeStatus string             `json:"trade_status"`
	State       payment.TradeState `json:"state"`
	Amount      payment.Amount     `json:"amount_fen"`
	PaidAt      time.Time          `json:"paid_at,omitzero"`
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
