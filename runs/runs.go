// Package runs holds the messages between the API side and the payment runs: a run's
// input and timing, what a checkout answers, and a verified notification handed to a
// run. It imports no workflow or activity code, so that the API's side of the house
// (api, checkout, inbox) depends on the messages only; the workflows package names them
// too, as aliases.
package runs

import (
	"time"

	"github.com/paykit/paykit/payment"
)

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

// WithDefaults fills in the intervals an older input left unset.
func (t Timing) WithDefaults() Timing {
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
	// Payer is what a WeChat Pay method needs of the buyer (openid, IP address), which
	// the run sends with the trade it opens.
	Payer  payment.Payer `json:"payer,omitzero"`
	Timing Timing        `json:"timing"`
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
