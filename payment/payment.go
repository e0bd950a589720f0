// Package payment holds the domain of the payment system: payments and their state
// machine, money, tenants, and the small interfaces that adapters implement: Gateway,
// and the store's (store.go). It imports nothing else from this module.
//
// The durable state is one small interface per noun (Payments, PaymentTransitions,
// PayLinks, Refunds, Outbox, Inbox, IdempotencyKeys, Tenants, …), each with the methods
// one concern needs and never more than 12 (internal/house checks it). Every write is
// safe to repeat. mysql.Store implements them all. A consumer declares, next to itself,
// the nouns it uses, so that its signature says what it may touch and a test fake
// implements only those; the API's, for example (api.Stores):
//
//	type Stores struct {
//		payment.Payments        // the checkout and the payment reads
//		payment.Refunds         // refund requests and reads
//		payment.IdempotencyKeys // the Idempotency-Key protocol
//		...
//	}
//
// Its wiring sets each noun to the same *mysql.Store; a handler test sets each to its
// fake, and api.New refuses a Stores with one left nil.
package payment

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"time"
)

// Status is the state of a payment. Its integer values are stored in MySQL, and the
// generated column active_order_id depends on StatusPending being 0.
type Status int8

// The payment statuses; their values are stored.
const (
	StatusPending Status = 0 // created, waiting for the buyer
	StatusPaid    Status = 1 // confirmed paid at Alipay; final
	StatusClosed  Status = 2 // expired or cancelled without payment; final
	StatusFailed  Status = 3 // refused by the channel; final
)

// String returns the status name used in APIs, logs and search attributes.
func (s Status) String() string {
	switch s {
	case StatusPending:
		return "PENDING"
	case StatusPaid:
		return "PAID"
	case StatusClosed:
		return "CLOSED"
	case StatusFailed:
		return "FAILED"
	default:
		return fmt.Sprintf("Status(%d)", int8(s))
	}
}

// MarshalText encodes the status by name.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText decodes a status name.
func (s *Status) UnmarshalText(b []byte) error {
	switch string(b) {
	case "PENDING":
		*s = StatusPending
	case "PAID":
		*s = StatusPaid
	case "CLOSED":
		*s = StatusClosed
	case "FAILED":
		*s = StatusFailed
	default:
		return Errorf(EINVALID, "unknown payment status %q", b)
	}
	return nil
}

// Final reports whether no further transition is possible.
func (s Status) Final() bool { return s != StatusPending }

// CanTransitionTo reports whether the state machine allows s → to. Only a pending
// payment moves, and it moves exactly once.
func (s Status) CanTransitionTo(to Status) bool {
	return s == StatusPending && to != StatusPending && to >= StatusPaid && to <= StatusFailed
}

// Method is how the buyer pays.
type Method string

// The payment methods.
const (
	MethodPage Method = "page" // alipay.trade.page.pay: a cashier URL for the browser
	MethodQR   Method = "qr"   // alipay.trade.precreate: a QR code to scan
	MethodWap  Method = "wap"  // alipay.trade.wap.pay: a cashier URL for a phone's browser
	MethodApp  Method = "app"  // alipay.trade.app.pay: an order string for the Alipay app SDK

	// WeChat Pay's methods, opened by the WeChat Pay adapter (wechatpay/) on the
	// deployment's WeChat Pay merchant.
	MethodWechatNative Method = "wechat_native" // a code_url to show as a QR code
	MethodWechatJSAPI  Method = "wechat_jsapi"  // the paySign parameters for WeixinJSBridge (payer openid required)
	MethodWechatH5     Method = "wechat_h5"     // an h5_url for a phone's browser outside WeChat (payer client IP required)
	MethodWechatApp    Method = "wechat_app"    // the signed parameters for the WeChat app SDK
)

// OrPage is m, or MethodPage for a payment recorded without a method (before 0009).
func (m Method) OrPage() Method {
	if m == "" {
		return MethodPage
	}
	return m
}

// methods are the supported methods, in the order the API documents them.
var methods = []Method{MethodPage, MethodQR, MethodWap, MethodApp, MethodWechatNative, MethodWechatJSAPI, MethodWechatH5, MethodWechatApp}

// Validate reports whether m is a supported method.
func (m Method) Validate() error {
	for _, k := range methods {
		if m == k {
			return nil
		}
	}
	names := make([]string, len(methods))
	for i, k := range methods {
		names[i] = fmt.Sprintf("%q", k)
	}
	return Errorf(EINVALID, "method must be one of %s", strings.Join(names, ", "))
}

// Channel is the channel that opens the trades of m: WeChat Pay for the wechat_*
// methods, Alipay for the others (and for a payment recorded without a method).
func (m Method) Channel() Channel {
	switch m {
	case MethodWechatNative, MethodWechatJSAPI, MethodWechatH5, MethodWechatApp:
		return ChannelWechatPay
	}
	return ChannelAlipay
}

// Payer is what a method needs to know of the buyer: the openid under the merchant's
// appid (WeChat Pay JSAPI) and the buyer's IP address (WeChat Pay H5). Neither is
// stored: they go to the channel with the trade.
type Payer struct {
	OpenID   string `json:"openid,omitempty"`
	ClientIP string `json:"client_ip,omitempty"`
}

// ValidateFor checks that p carries what method m needs, and nothing malformed: an
// openid for wechat_jsapi, an IP address for wechat_h5, neither for another method.
func (p Payer) ValidateFor(m Method) error {
	if len(p.OpenID) > 128 || strings.ContainsFunc(p.OpenID, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return Errorf(EINVALID, "payer.openid must be at most 128 printable ASCII characters")
	}
	if p.ClientIP != "" {
		if _, err := netip.ParseAddr(p.ClientIP); err != nil {
			return Errorf(EINVALID, "payer.client_ip must be an IPv4 or IPv6 address")
		}
	}
	switch {
	case m == MethodWechatJSAPI && p.OpenID == "":
		return Errorf(EINVALID, "method %q needs payer.openid, the buyer's openid under the merchant's appid", m)
	case m == MethodWechatH5 && p.ClientIP == "":
		return Errorf(EINVALID, "method %q needs payer.client_ip, the buyer's IP address", m)
	case p.OpenID != "" && m != MethodWechatJSAPI:
		return Errorf(EINVALID, "payer.openid is only for method %q", MethodWechatJSAPI)
	case p.ClientIP != "" && m != MethodWechatH5:
		return Errorf(EINVALID, "payer.client_ip is only for method %q", MethodWechatH5)
	}
	return nil
}

// Channel is a payment channel: the one a payment's trade is opened at, and every later
// call about it goes to. Its values are stored (payments.channel).
type Channel string

// The channels.
const (
	ChannelAlipay    Channel = "alipay"
	ChannelWechatPay Channel = "wechatpay"
)

// OrAlipay is c, or ChannelAlipay for a payment recorded before its channel was
// (migration 0057: every one of them is Alipay's).
func (c Channel) OrAlipay() Channel {
	if c == "" {
		return ChannelAlipay
	}
	return c
}

// RefundsOffered reports whether paykit refunds a payment at c through the channel:
// Alipay's, not yet WeChat Pay's (refunded in WeChat Pay's merchant platform meanwhile).
// A refund of a payment at a channel without them is refused before anything is
// reserved or asked.
func (c Channel) RefundsOffered() bool { return c.OrAlipay() == ChannelAlipay }

// Name is the channel's name for people: "Alipay", "WeChat Pay".
func (c Channel) Name() string {
	switch c.OrAlipay() {
	case ChannelAlipay:
		return "Alipay"
	case ChannelWechatPay:
		return "WeChat Pay"
	}
	return string(c)
}

// Payment is one attempt to collect money for an order. PaymentNo is its out_trade_no at
// its channel (Alipay's or WeChat Pay's).
type Payment struct {
	ID        int64  `json:"-"`
	PaymentNo string `json:"payment_no"`
	TenantID  string `json:"tenant_id"`
	OrderID   string `json:"order_id"`
	Amount    Amount `json:"amount_fen"`
	// Refunded is the sum of the payment's refunds that have not failed (succeeded or
	// still in progress); it never exceeds Amount.
	Refunded Amount `json:"refunded_fen"`
	// RefundState is RefundStateOf(Amount, Refunded): none, partial or full.
	RefundState string `json:"refund_state,omitempty"`
	Currency    string `json:"currency"`
	Subject     string `json:"subject"`
	Method      Method `json:"method,omitempty"` // empty in payments recorded before it was kept; read as page
	// Repurchase is true for a payment whose checkout opted in to paying an order that an
	// earlier payment already paid.
	Repurchase bool      `json:"repurchase,omitempty"`
	Status     Status    `json:"status"`
	TradeNo    string    `json:"trade_no,omitempty"`
	ExpireAt   time.Time `json:"expire_at"`
	PaidAt     time.Time `json:"paid_at,omitzero"`
	// CloseReason says why a closed payment was closed (expired, cancelled, …).
	CloseReason string `json:"close_reason,omitempty"`
	Version     int64  `json:"version"`
	WorkflowID  string `json:"workflow_id"`
	// Channel is the channel the payment's trade is opened at (Method.Channel when it was
	// created); "" is Alipay, for a payment read from a row of before migration 0057.
	// Internal, like AlipayAppID: the method says it to a merchant.
	Channel Channel `json:"-"`
	// AlipayAppID is the ID of the merchant account the payment was opened on at its
	// channel (App.ID): for Alipay the app_id of its tenant's own app or of the
	// deployment's default app ("" is the default app too, for a payment recorded before
	// its app was, migration 0032); for WeChat Pay the mchid of the merchant. Every later
	// call about the payment goes to that account, wherever its tenant has moved since.
	// The name (and its column, payments.alipay_app_id) is from when Alipay was the only
	// channel. It is internal: answers and workflow payloads do not carry it.
	AlipayAppID string `json:"-"`
	// QueryScheduled is true for a payment the scheduled reconciler queries (it was
	// created with a first query, payments.next_query_at): its run keeps no timer of its
	// own before expiry. Internal, like AlipayAppID.
	QueryScheduled bool      `json:"-"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// NewPayment is what the store needs to insert a pending payment.
type NewPayment struct {
	PaymentNo string
	TenantID  string
	OrderID   string
	Amount    Amount
	Currency  string
	Subject   string
	Method    Method // empty means MethodPage
	// Repurchase allows a new payment for an order that is already paid. Without it the
	// store refuses one with EORDERPAID.
	Repurchase bool
	ExpireAt   time.Time
	WorkflowID string
	// PayLink is the payment's pay link when it is created already opened (a signed
	// cashier URL or app order string); empty when the workflow opens the trade.
	PayLink string
	// AlipayAppID is the App.ID of the merchant account the payment is opened on, its
	// tenant's current one at the method's channel (Gateways.For): an Alipay app_id, or a
	// WeChat Pay mchid (see Payment.AlipayAppID). The payment's channel is
	// Method.Channel, which the store records with it.
	AlipayAppID string
	// QueryInterval, when set, gives the payment its first query at Alipay
	// (next_query_at, NextQueryAt from its creation), which the scheduled reconciler
	// makes; zero leaves it to a run that keeps its own reconciliation timer.
	QueryInterval time.Duration
}

// PaymentNoRandomDigits is how many hex digits follow "P" and the UTC date in the
// payment numbers paykit makes for a payment at c: 24 at Alipay (33 characters; its
// out_trade_no takes 64), 23 at WeChat Pay (32 characters, the most its out_trade_no
// takes). A payment run computes its number from this, so a channel's count never
// changes: a run replayed by a newer build must compute the number it recorded.
func (c Channel) PaymentNoRandomDigits() int {
	if c.OrAlipay() == ChannelWechatPay {
		return 23
	}
	return 24
}

var (
	idPattern        = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	paymentNoPattern = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)
)

// ValidateTenantID checks a tenant id: 1–64 of [A-Za-z0-9_-], so that it can be part of a
// workflow id without escaping.
func ValidateTenantID(id string) error {
	if !idPattern.MatchString(id) {
		return Errorf(EINVALID, "tenant_id must be 1-64 characters of A-Z a-z 0-9 _ -")
	}
	return nil
}

// ValidateOrderID checks a merchant order id with the same rule as tenant ids.
func ValidateOrderID(id string) error {
	if !idPattern.MatchString(id) {
		return Errorf(EINVALID, "order_id must be 1-64 characters of A-Z a-z 0-9 _ -")
	}
	return nil
}

// ValidatePaymentNo checks a payment number (Alipay out_trade_no: letters, digits, underscore).
func ValidatePaymentNo(no string) error {
	if !paymentNoPattern.MatchString(no) {
		return Errorf(EINVALID, "payment_no must be 1-64 characters of A-Z a-z 0-9 _")
	}
	return nil
}

// Validate checks every field of a new payment.
func (n NewPayment) Validate() error {
	if err := ValidatePaymentNo(n.PaymentNo); err != nil {
		return err
	}
	if err := ValidateTenantID(n.TenantID); err != nil {
		return err
	}
	if err := ValidateOrderID(n.OrderID); err != nil {
		return err
	}
	if err := n.Amount.Validate(); err != nil {
		return err
	}
	if n.Currency != "CNY" {
		return Errorf(EINVALID, "currency must be CNY")
	}
	if n.Subject == "" || len(n.Subject) > 256 {
		return Errorf(EINVALID, "subject must be 1-256 bytes")
	}
	if n.ExpireAt.IsZero() {
		return Errorf(EINVALID, "expire_at is required")
	}
	if n.Method != "" {
		if err := n.Method.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// WorkflowID is the business idempotency key of a payment: one tenant, one order.
func WorkflowID(tenantID, orderID string) string {
	return "payment:" + tenantID + ":" + orderID
}

// RunScope names where a payment's runs live: the Temporal namespace and task queue of
// the stack that created it. Stacks that share one database reconcile and re-drive only
// the payments of their own scope (and those created before payments had one).
func RunScope(namespace, taskQueue string) string {
	return namespace + "/" + taskQueue
}

// Transition is the outcome of a compare-and-set on a payment's status. Changed is true
// only for the one caller whose update moved the state; every other caller gets the
// current state and decides what to do with it.
type Transition struct {
	Payment Payment
	Changed bool
	// EventID is the outbox event written when the payment left pending: by this change,
	// or, when Changed is false, by the earlier transition that made it final.
	EventID string
	// Unverified, when not empty, says why the evidence offered for the transition (a
	// notification signal) is not Alipay's signed word: nothing was changed, and an
	// AnomalyUnverifiedSignal was recorded.
	Unverified string `json:",omitempty"`
}

// Tenant is a merchant using the system.
type Tenant struct {
	ID         string
	Name       string
	APIKeyHash string // hex SHA-256 of the API key; the key itself is never stored
	NotifyURL  string // where merchant webhooks are delivered
	// WebhookSecret is the HMAC-SHA256 key of webhook signatures in the clear, as rows
	// written before migration 0037 hold it; WebhookSecretSealed replaces it.
	WebhookSecret string `json:"-"`
	// WebhookSecretSealed is the webhook secret sealed with the secrets keyring for
	// WebhookSecretAAD(ID) (see WebhookSecrets).
	WebhookSecretSealed string `json:"-"`
	AlipayAppID         string // the Alipay app this tenant's payments go through
	AlipaySeller        string // the Alipay seller_id (PID) expected in notifications
	// AlipayCredentialsSealed is the tenant's own app keys (AlipayCredentials), sealed
	// with the secrets keyring for AlipayCredentialsAAD(ID). Empty means the tenant's
	// payments go through the deployment's default app.
	AlipayCredentialsSealed string `json:"-"`
	// AutoRefundPaidAfterClose refunds the money of a paid_after_close anomaly as soon as
	// it is recorded, instead of leaving it to an operator.
	AutoRefundPaidAfterClose bool
	// PreviousWebhookSecret is the secret a rotation replaced, in the clear (rows of
	// before migration 0037), or PreviousWebhookSecretSealed, sealed as
	// WebhookSecretSealed is. Webhooks are signed with it too until
	// PreviousSecretExpiresAt.
	PreviousWebhookSecret       string `json:"-"`
	PreviousWebhookSecretSealed string `json:"-"`
	PreviousSecretExpiresAt     time.Time
	CreatedAt                   time.Time
}
