package payment

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"
)

// Event is a merchant-facing event in the outbox, written in the same transaction as the
// state change it describes and delivered after the commit.
type Event struct {
	// Seq is the event's position in its tenant's feed, increasing in commit order with
	// each event of the tenant: the cursor of the merchant's event feed. It is not the
	// row's id.
	Seq         int64
	EventID     string // globally unique; merchants dedupe on it
	TenantID    string
	PaymentNo   string
	Type        string // e.g. "payment.paid", "payment.closed"
	Payload     []byte // the JSON body delivered to the merchant
	Delivered   bool
	Attempts    int
	LastError   string
	CreatedAt   time.Time
	DeliveredAt time.Time
	// NextAttemptAt is when the sweeper may try the event next; zero means now (it never
	// failed). A sweeper holding the event moves it a lease ahead.
	NextAttemptAt time.Time
	// Dead is set once the event failed its last allowed attempt: the sweeper no longer
	// redelivers it and an operator has to look at the merchant's endpoint.
	Dead bool
}

// EventRetry is how failed deliveries of an outbox event are spaced and when they stop.
// The payment workflow and the sweeper record their failures with the same policy, so
// the sweeper's backoff continues from the workflow's last attempt.
type EventRetry struct {
	// Base is the wait after the first failed attempt; it doubles with each further
	// failure up to Max. Keep them at least the workflow's webhook intervals, so that an
	// event the workflow is still retrying is never due for the sweeper.
	Base time.Duration
	Max  time.Duration
	// MaxAttempts is the number of failed attempts after which an event is dead.
	MaxAttempts int
}

// DefaultEventRetry waits 1m after the first failure, doubling up to 8h, and gives up
// after 30 attempts. After the workflow's default 20 attempts in its first hour, that
// leaves ten sweeper attempts 8h apart: an event dies about 3.4 days after it was
// written (7 days if no workflow ever tried it).
func DefaultEventRetry() EventRetry {
	return EventRetry{Base: time.Minute, Max: 8 * time.Hour, MaxAttempts: 30}
}

// WithDefaults fills the zero fields of r from DefaultEventRetry.
func (r EventRetry) WithDefaults() EventRetry {
	d := DefaultEventRetry()
	if r.Base <= 0 {
		r.Base = d.Base
	}
	if r.Max <= 0 {
		r.Max = d.Max
	}
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = d.MaxAttempts
	}
	return r
}

// Delay returns how long to wait after the given number of failed attempts (1 for the
// first failure): Base·2^(attempts-1), at most Max.
func (r EventRetry) Delay(attempts int) time.Duration {
	d := r.Base
	for i := 1; i < attempts && d < r.Max; i++ {
		d *= 2
	}
	return min(d, r.Max)
}

// Event types.
const (
	EventPaymentPaid   = "payment.paid"
	EventPaymentClosed = "payment.closed"
	EventPaymentFailed = "payment.failed"
)

// BenefitGrant is one entitlement granted for a paid payment. (TenantID, PaymentNo,
// Benefit) is unique, so a grant is issued at most once.
type BenefitGrant struct {
	TenantID  string
	PaymentNo string
	OrderID   string
	Benefit   string
	CreatedAt time.Time
}

// ChannelNotification is one notification as received, kept for audit whatever its fate.
type ChannelNotification struct {
	ID        int64
	Channel   string // a payment.Channel: "alipay" or "wechatpay"
	NotifyID  string // dedupe key; only verified notifications claim it
	PaymentNo string
	TradeNo   string
	// Raw is the raw form body: all of it when Verified, else at most MaxUnverifiedRaw
	// bytes of it (see KeepRaw).
	Raw string
	// RawHeader holds the headers the channel signed with the body (WeChat Pay's
	// Wechatpay-Timestamp, -Nonce, -Signature, -Serial and -Signature-Type), only those:
	// with Raw they verify again. Empty for a channel that signs the body alone (Alipay).
	RawHeader http.Header
	// RawSHA256 (hex) and RawLen describe the whole body as received, even when Raw is cut.
	RawSHA256 string
	RawLen    int
	Verified  bool
	// Outcome says what was done with it: "received", "signalled", "rejected: …", etc.
	Outcome    string
	ReceivedAt time.Time
	// DispatchDueAt is when a verified notification not yet settled is next handed to its
	// payment (zero once settled, and for unverified ones); DispatchAttempts counts the
	// hand-overs after the first. See Inbox.
	DispatchDueAt    time.Time
	DispatchAttempts int
	// SettledAt is when its effect was seen (zero while it is not).
	SettledAt time.Time
	// Refund is true for a refund notification (out_biz_no, refund_fee): it carries its
	// payment's trade_no, but only its refund's outcome settles it, never the payment PAID.
	Refund bool
}

// MaxUnverifiedRaw is how many bytes of an unverified notification's body are kept.
// Anyone can post to the callback URL, so a forged notification must not be able to fill
// the database; a prefix, the hash and the length are enough to investigate it.
const MaxUnverifiedRaw = 2 * 1024

// KeepRaw sets Raw, RawSHA256 and RawLen from the body as received: the hash and length
// of all of it, and all of it as Raw if n is Verified, or else at most MaxUnverifiedRaw
// bytes, made valid UTF-8 and cut on a character boundary. Set Verified first.
func (n *ChannelNotification) KeepRaw(raw string) {
	sum := sha256.Sum256([]byte(raw))
	n.RawSHA256, n.RawLen = hex.EncodeToString(sum[:]), len(raw)
	n.Raw = raw
	if !n.Verified {
		n.Raw = cutUnverifiedRaw(raw)
	}
}

func cutUnverifiedRaw(raw string) string {
	raw = cutAtRune(raw, MaxUnverifiedRaw)
	// A run of bytes that are not UTF-8 becomes U+FFFD (3 bytes), which can lengthen the
	// string: cut again after the repair.
	return cutAtRune(strings.ToValidUTF8(raw, "\uFFFD"), MaxUnverifiedRaw)
}

// cutAtRune returns s cut to at most n bytes, not inside a UTF-8 character (bytes that
// are not UTF-8 are cut anywhere).
func cutAtRune(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for back := 0; back < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(s[n]); back++ {
		n--
	}
	return s[:n]
}

// IdempotencyState is the state of an Idempotency-Key record.
type IdempotencyState int8

// The states of an Idempotency-Key record; their values are stored.
const (
	IdempotencyInFlight  IdempotencyState = 0
	IdempotencyCompleted IdempotencyState = 1
)

// IdempotencyRecord is the stored state of one Idempotency-Key.
type IdempotencyRecord struct {
	TenantID       string
	Key            string
	Fingerprint    string // hex SHA-256 of method + path + body
	State          IdempotencyState
	ResponseStatus int
	ResponseBody   []byte
	LockedUntil    time.Time
	ExpiresAt      time.Time
	// LockVersion identifies the holder of an in-flight key: it changes whenever the key
	// is taken over, so a holder that stalled past its lock can no longer complete or
	// release what another request now holds.
	LockVersion int64
}

// ReserveOutcome says what a reservation of an Idempotency-Key found.
type ReserveOutcome int

// The outcomes of a reservation.
const (
	ReserveAcquired ReserveOutcome = iota // first request (or lock taken over after expiry): go ahead
	ReserveInFlight                       // another request with this key is running: 409
	ReserveMismatch                       // same key, different fingerprint: 422
	ReserveReplay                         // completed: replay the stored response
)

// Anomaly is a case an operator must look at, such as money received for a payment that
// was already closed locally. It is recorded durably and alerted on, never dropped. Its
// identity is (Kind, PaymentNo, Subject): what it is about.
type Anomaly struct {
	Kind      string // e.g. "paid_after_close"
	TenantID  string
	PaymentNo string
	// Subject names what the anomaly is about within the payment: a refund's
	// out_request_no, a notification's notify_id, a bill line's reference; empty for the
	// payment as a whole. Two anomalies of one kind on a payment about two subjects are
	// two anomalies; the same one recorded again is one.
	Subject   string
	TradeNo   string
	Amount    Amount
	Detail    string
	CreatedAt time.Time
	// ResolvedAt is when an operator resolved it, zero while it is open; Resolution is
	// the operator's note of how.
	ResolvedAt time.Time
	Resolution string
	// LastSeenAt is when it was last recorded (zero if recorded before migration 0049
	// and not since): later than ResolvedAt, it came back after its resolution.
	LastSeenAt time.Time
}

// DefaultAnomalyRetention is how long a resolved anomaly is kept after its resolution;
// open ones are kept whatever their age.
const DefaultAnomalyRetention = 400 * 24 * time.Hour

// AnomalyRetention deletes the anomalies that were resolved long ago.
type AnomalyRetention interface {
	// PurgeResolvedAnomalies deletes up to limit anomalies resolved, and last seen,
	// before before, and returns how many it deleted.
	PurgeResolvedAnomalies(ctx context.Context, before time.Time, limit int) (int64, error)
}

// The store's interfaces: see the package documentation for the rule.

// Payments are the payments and their orders as the checkout and the reads see them.
type Payments interface {
	// CreatePendingPayment inserts a pending payment and upserts its order. A duplicate on
	// the active-order index or on payment_no is not an error: the existing payment for
	// that order (or payment_no) is returned with existed=true.
	CreatePendingPayment(ctx context.Context, np NewPayment) (p Payment, existed bool, err error)
	// GetPayment returns a payment by payment_no, or an error wrapping ErrNotFound.
	GetPayment(ctx context.Context, paymentNo string) (Payment, error)
	// GetTenantPayment is GetPayment restricted to one tenant: another tenant's payment is
	// ErrNotFound.
	GetTenantPayment(ctx context.Context, tenantID, paymentNo string) (Payment, error)
	// OrderPaidPayment returns the order's most recent PAID payment, with ok=false if the
	// order has none.
	OrderPaidPayment(ctx context.Context, tenantID, orderID string) (p Payment, ok bool, err error)
	// OrderStanding returns the order's most recent PAID payment and its pending payment,
	// each nil if it has none, in one round trip (the checkout's first read).
	OrderStanding(ctx context.Context, tenantID, orderID string) (paid, pending *Payment, err error)
	// ListOrderPayments returns every payment of one order, newest first.
	ListOrderPayments(ctx context.Context, tenantID, orderID string) ([]Payment, error)
}

// PaymentTransitions move a pending payment to its end, each in one local transaction with
// its outbox event, and find the pending payments the sweeper re-drives.
type PaymentTransitions interface {
	// MarkPaid moves a pending payment to paid in one local transaction (row lock, status
	// compare-and-set, order update, trade_no, outbox event). If the payment is not
	// pending, it returns the current state with Changed=false and a nil error.
	MarkPaid(ctx context.Context, paymentNo, tradeNo string, paidAt time.Time) (Transition, error)
	// ClosePayment moves a pending payment to closed and cancels its order, the same way.
	ClosePayment(ctx context.Context, paymentNo, reason string) (Transition, error)
	// FailPayment moves a pending payment to failed and cancels its order, the same way.
	FailPayment(ctx context.Context, paymentNo, reason string) (Transition, error)
	// PendingPaymentsBefore returns up to limit payments still pending that were created
	// before the given time, oldest first from past after, and the cursor that follows
	// them: the last one read, or the zero Cursor (the oldest again) if fewer than limit
	// were left.
	PendingPaymentsBefore(ctx context.Context, before time.Time, after Cursor, limit int) ([]Payment, Cursor, error)
}

// Cursor is where a walk of rows in (time, id) order stands: the time and id of the last
// row read. The zero Cursor is the start of the walk. It lets a page read past rows that
// stay where they are (a payment that cannot be claimed, one whose run is stuck), which
// a read of the head would return again each time.
type Cursor struct {
	At time.Time `json:"at,omitzero"`
	ID int64     `json:"id,omitempty"`
}

// IsZero reports whether c is the start of a walk.
func (c Cursor) IsZero() bool { return c.At.IsZero() && c.ID == 0 }

// DueQuery is a pending payment whose next query at Alipay is due.
type DueQuery struct {
	PaymentNo   string
	WorkflowID  string
	TenantID    string
	AlipayAppID string
	// Channel is the payment's channel, whose account AlipayAppID names.
	Channel     Channel
	Amount      Amount
	ExpireAt    time.Time
	NextQueryAt time.Time
	Queries     int
	// Step is the first step of the payment's schedule, the query interval it was
	// created with (zero for none recorded: the reconciler's own).
	Step time.Duration
}

// QuerySchedule is the schedule of the scheduled reconciler's queries (payment.NextQueryAt).
type QuerySchedule interface {
	// DueQueries returns up to limit pending payments whose next query is due at now and
	// that have not expired, the longest due first from past after, and the cursor that
	// follows them: the last one read, or the zero Cursor if fewer than limit were left.
	DueQueries(ctx context.Context, now time.Time, after Cursor, limit int) ([]DueQuery, Cursor, error)
	// QueryMade counts a query made of a due payment and sets its next (zero: none), if
	// the payment is still pending and its next query is still q.NextQueryAt; false if
	// another reconciler counted it first or the payment moved on.
	QueryMade(ctx context.Context, q DueQuery, next time.Time) (bool, error)
}

// PayLinks keep the way to pay a pending payment.
type PayLinks interface {
	// SetPayLink keeps the way to pay a pending payment (its cashier URL, QR code or app
	// order string) so that it can be shown again; a payment no longer pending is left
	// as it is.
	SetPayLink(ctx context.Context, paymentNo, link string) error
	// PendingPayLink returns the pay link kept for a tenant's payment while it is
	// pending, and "" once it is not (or none was kept).
	PendingPayLink(ctx context.Context, tenantID, paymentNo string) (string, error)
}

// Notifications are Alipay's notifications as received, kept whatever their fate (see
// Inbox for what happens to a verified one after it is acknowledged).
type Notifications interface {
	// RecordNotification stores a received notification. For a verified one it returns
	// inserted=false and the stored row if its (channel, notify_id) was seen before.
	// Unverified ones are always inserted and never claim the notify_id.
	RecordNotification(ctx context.Context, n ChannelNotification) (stored ChannelNotification, inserted bool, err error)
	// SetNotificationOutcome records what was done with a notification.
	SetNotificationOutcome(ctx context.Context, id int64, outcome string) error
}

// NotificationRecords are the verified notifications read back by their notify_id: the
// evidence that a payment's workflow confirms before it acts on a notification signal.
type NotificationRecords interface {
	// NotificationByNotifyID returns the verified notification of channel that claimed
	// notifyID, or ErrNotFound. Unverified notifications never claim a notify_id.
	NotificationByNotifyID(ctx context.Context, channel, notifyID string) (ChannelNotification, error)
}

// Grants are the entitlements issued for paid payments, one per payment.
type Grants interface {
	// GrantBenefit inserts a grant; created=false if the payment was granted before,
	// under any benefit name: a payment is granted once.
	GrantBenefit(ctx context.Context, g BenefitGrant) (created bool, err error)
	// GrantPaid is GrantBenefit for a payment the store finds PAID for the grant's
	// tenant as it inserts; an unpaid one is EILLEGALSTATE and nothing is written.
	GrantPaid(ctx context.Context, g BenefitGrant) (created bool, err error)
	// ListGrants returns the grants of a payment.
	ListGrants(ctx context.Context, tenantID, paymentNo string) ([]BenefitGrant, error)
	// PaidWithoutGrant returns up to limit payments paid at or after paidAfter and
	// marked paid before markedBefore that have no grant at all, oldest paid first: the
	// grants a workflow lost, for the sweeper to repair.
	PaidWithoutGrant(ctx context.Context, paidAfter, markedBefore time.Time, limit int) ([]Payment, error)
}

// DefaultEventRetention is how long a delivered merchant event is kept: the events feed
// and a redelivery on request reach it for that long.
const DefaultEventRetention = 90 * 24 * time.Hour

// EventRetention deletes the merchant events nobody is owed any more.
type EventRetention interface {
	// PurgeDeliveredEvents deletes up to limit delivered events created before before,
	// oldest first, after recording before as the events' purge horizon, and returns how
	// many it deleted. Undelivered and dead events are kept whatever their age.
	PurgeDeliveredEvents(ctx context.Context, before time.Time, limit int) (int64, error)
}

// Outbox is the delivery side of the merchant-facing events: what is due, who holds an
// attempt, and how it ended.
type Outbox interface {
	// GetEvent returns an outbox event by id.
	GetEvent(ctx context.Context, eventID string) (Event, error)
	// GetEventWithTenant returns an outbox event and its tenant, read together.
	GetEventWithTenant(ctx context.Context, eventID string) (Event, Tenant, error)
	// DueEvents returns up to limit events that are undelivered, not dead, created before
	// createdBefore and due at now (NextAttemptAt zero or not after now), at most
	// perTenant of each tenant, so that one tenant's backlog cannot fill the batch. They
	// come round robin: every tenant's most overdue event first, then every tenant's
	// second, and so on.
	DueEvents(ctx context.Context, now, createdBefore time.Time, perTenant, limit int) ([]Event, error)
	// ClaimEvent takes ev for one delivery attempt by moving its NextAttemptAt to until,
	// if the event is still undelivered, not dead and due as it was read (a
	// compare-and-set on NextAttemptAt). claimed=false means another sweeper has it or
	// it changed since; either way the caller must not deliver it.
	ClaimEvent(ctx context.Context, ev Event, until time.Time) (claimed bool, err error)
	// MarkEventAttempt records a failed delivery attempt made at the given time: one
	// more attempt, the error, NextAttemptAt = at + retry.Delay(attempts), and Dead once
	// the attempts reach retry.MaxAttempts. It returns the event as updated; died is
	// true only for the attempt that made it dead. A delivered event is left as it is.
	MarkEventAttempt(ctx context.Context, eventID, lastError string, at time.Time, retry EventRetry) (ev Event, died bool, err error)
	// MarkEventDelivered records a successful delivery, even of a dead event (which is
	// then no longer dead); repeating it changes nothing.
	MarkEventDelivered(ctx context.Context, eventID string) error
	// ClaimEventForRedelivery takes a tenant's event (delivered, dead or pending) for one
	// delivery attempt until until, unless a sweeper's claim or another redelivery's
	// holds it at now; it also keeps sweepers off it until then. claimed=false means it
	// is held and the caller must not deliver it. Recording the attempt's outcome
	// (MarkEventAttempt, MarkEventDelivered) ends the hold, and so does ReleaseEventClaim.
	ClaimEventForRedelivery(ctx context.Context, tenantID, eventID string, now, until time.Time) (claimed bool, err error)
	// ReleaseEventClaim ends the hold taken until until, if it is still that one.
	ReleaseEventClaim(ctx context.Context, eventID string, until time.Time) error
}

// EventFeed is a tenant's read of its own events.
type EventFeed interface {
	// ListTenantEvents returns up to limit of a tenant's events with Seq above afterSeq,
	// in Seq order: the merchant's event feed.
	ListTenantEvents(ctx context.Context, tenantID string, afterSeq int64, limit int) ([]Event, error)
	// GetTenantEvent returns a tenant's event by id; another tenant's is ErrNotFound.
	GetTenantEvent(ctx context.Context, tenantID, eventID string) (Event, error)
	// FeedHorizon returns the highest Seq of the tenant's events the retention purge
	// deleted, 0 if none: the oldest cursor still valid. Listing after a lower one would
	// skip deleted events.
	FeedHorizon(ctx context.Context, tenantID string) (int64, error)
}

// IdempotencyKeys are the durable records of the Idempotency-Key protocol.
type IdempotencyKeys interface {
	// ReserveIdempotencyKey claims key for a request with the given fingerprint. A record
	// whose lock has expired while in flight is taken over.
	ReserveIdempotencyKey(ctx context.Context, rec IdempotencyRecord) (ReserveOutcome, IdempotencyRecord, error)
	// CompleteIdempotencyKey stores the response of the request that holds the key (held
	// is the record ReserveIdempotencyKey returned). A holder whose key was taken over
	// gets an ECONFLICT error and stores nothing.
	CompleteIdempotencyKey(ctx context.Context, held IdempotencyRecord, status int, body []byte) error
	// ReleaseIdempotencyKey deletes an in-flight key so that the client may retry (used
	// when the request failed with a retryable error). Only the current holder releases.
	ReleaseIdempotencyKey(ctx context.Context, held IdempotencyRecord) error
	// RenewIdempotencyKey extends the in-flight lock of the request that holds the key
	// (held as ReserveIdempotencyKey returned it) to held.LockedUntil, so that a request
	// outliving its lock keeps its key. A holder whose key was taken over gets an
	// ECONFLICT error.
	RenewIdempotencyKey(ctx context.Context, held IdempotencyRecord) error
	// PurgeExpiredIdempotencyKeys deletes keys that expired before now.
	PurgeExpiredIdempotencyKeys(ctx context.Context, now time.Time) (int64, error)
}

// Refunds are the refunds as a merchant asks for and reads them.
type Refunds interface {
	// CreateRefund reserves n.Amount of a PAID payment and inserts the pending refund in
	// one transaction, under the payment's row lock, with a compare-and-set that keeps the
	// payment's refunded total within its amount. A refund_no the tenant used before
	// returns that refund with existed=true (ECONFLICT if it was for another payment or
	// amount). Another tenant's payment is ErrNotFound; an unpaid one ENOTPAID; too much
	// EREFUNDEXCEEDS.
	CreateRefund(ctx context.Context, n NewRefund) (r Refund, existed bool, err error)
	// GetRefund returns a tenant's refund by refund_no, or ErrNotFound.
	GetRefund(ctx context.Context, tenantID, refundNo string) (Refund, error)
	// GetRefundByOutRequestNo returns the refund with Alipay's out_request_no (the
	// out_biz_no of a refund notification), or ErrNotFound.
	GetRefundByOutRequestNo(ctx context.Context, outRequestNo string) (Refund, error)
	// ListPaymentRefunds returns the refunds of a tenant's payment, oldest first.
	ListPaymentRefunds(ctx context.Context, tenantID, paymentNo string) ([]Refund, error)
}

// RefundTransitions move a pending refund to its end, and find the pending refunds the
// sweeper re-drives.
type RefundTransitions interface {
	// MarkRefundSucceeded moves a pending refund to succeeded with its refund.succeeded
	// outbox event in one transaction. A refund that is not pending is returned as it is
	// with Changed=false.
	MarkRefundSucceeded(ctx context.Context, tenantID, refundNo, tradeNo string, refundedAt time.Time) (RefundTransition, error)
	// FailRefund moves a pending refund to failed, releases its reservation on the
	// payment and writes its refund.failed event in one transaction, the same way.
	FailRefund(ctx context.Context, tenantID, refundNo, reason string) (RefundTransition, error)
	// PendingRefundsBefore returns up to limit refunds still pending that were created
	// before the given time, oldest first.
	PendingRefundsBefore(ctx context.Context, before time.Time, limit int) ([]Refund, error)
}

// Anomalies are the cases an operator must look at.
type Anomalies interface {
	// RecordAnomaly stores an operator-visible anomaly.
	RecordAnomaly(ctx context.Context, a Anomaly) error
}

// Tenants are read on every request: by API key, and by id.
type Tenants interface {
	// TenantByAPIKeyHash finds the tenant owning an API key hash, or ErrNotFound.
	TenantByAPIKeyHash(ctx context.Context, hash string) (Tenant, error)
	// GetTenant returns a tenant by id, or ErrNotFound.
	GetTenant(ctx context.Context, id string) (Tenant, error)
}

// TenantSettings are the writes of tenant administration.
type TenantSettings interface {
	// UpsertTenant creates or updates a tenant.
	UpsertTenant(ctx context.Context, t Tenant) error
	// SwapTenantWebhookSecrets writes next's webhook secrets (current and previous, in
	// the clear and sealed, and the previous one's expiry) only if the stored ones are
	// still old's; it reports whether it wrote them.
	SwapTenantWebhookSecrets(ctx context.Context, old, next Tenant) (bool, error)
	// TenantsWithWebhookSecrets returns up to 100 tenants holding a webhook secret (in
	// the clear or sealed) whose id is greater than afterID, in id order.
	TenantsWithWebhookSecrets(ctx context.Context, afterID string) ([]Tenant, error)
	// ExpirePreviousWebhookSecret ends a rotation: only the current secret signs.
	ExpirePreviousWebhookSecret(ctx context.Context, tenantID string) error
}

// Pinger checks that the store answers (readiness).
type Pinger interface {
	// Ping checks the connection.
	Ping(ctx context.Context) error
}

// UnsetNoun names the first nil interface field of stores, a consumer's struct of the
// store's nouns (api.Stores, activities.Stores), as an error; nil if every one is set.
// Consumers refuse to start on it: a noun left out is a wiring mistake that would
// otherwise panic on its first call.
func UnsetNoun(stores any) error {
	v := reflect.ValueOf(stores)
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Interface && f.IsNil() {
			return fmt.Errorf("%s.%s is not set", v.Type(), v.Type().Field(i).Name)
		}
	}
	return nil
}

// Redelivery is the outcome of one redelivery attempt of an event, asked for by its
// merchant, and the event after it.
type Redelivery struct {
	Event     Event  `json:"event"`
	Delivered bool   `json:"delivered"`
	Error     string `json:"error,omitempty"`
}
