package payment

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// TradeState is Alipay's view of a trade, mapped into the domain.
type TradeState int

// The trade states.
const (
	TradeNotExist TradeState = iota // ACQ.TRADE_NOT_EXIST: not created yet; keep waiting, never a failure
	TradeWaiting                    // WAIT_BUYER_PAY
	TradePaid                       // TRADE_SUCCESS or TRADE_FINISHED
	TradeClosed                     // TRADE_CLOSED: unpaid and closed, or fully refunded
)

// String returns a readable name for logs.
func (t TradeState) String() string {
	switch t {
	case TradeNotExist:
		return "NOT_EXIST"
	case TradeWaiting:
		return "WAITING"
	case TradePaid:
		return "PAID"
	case TradeClosed:
		return "CLOSED"
	default:
		return "UNKNOWN"
	}
}

// Bounds, in bytes, of what a checkout hands to the cashier: Alipay's own limits for the
// subject and return_url (256) and for the wap quit_url (400). At these bounds, escaped at
// their worst (a byte JSON-escaped to \u003c and then URL-escaped is 8 bytes), the
// subject, the URLs and the rest of a signed pay link come to under 8 KiB with a notify
// URL of ordinary length, far inside payments.pay_link (TEXT, 65,535 bytes).
const (
	MaxSubjectBytes   = 256
	MaxReturnURLBytes = 256
	MaxQuitURLBytes   = 400
)

// TradeRequest asks the channel to create a trade for a pending payment.
type TradeRequest struct {
	PaymentNo string
	// Method is how the buyer pays: it picks the channel's product (a cashier page, a QR
	// code, an app's order).
	Method  Method
	Subject string
	Amount  Amount
	// ExpireAt is sent as time_expire. It must not be later than the local expiry, so a
	// payment closed locally can never be paid afterwards.
	ExpireAt  time.Time
	ReturnURL string
	// QuitURL is where a wap cashier sends a buyer who gives up (wap pay only).
	QuitURL string
	// OpenID is the payer's openid under the merchant's appid (WeChat Pay JSAPI), and
	// ClientIP the buyer's address (WeChat Pay H5).
	OpenID   string
	ClientIP string
}

// Trade is the result of alipay.trade.query.
type Trade struct {
	State     TradeState
	PaymentNo string
	TradeNo   string
	Amount    Amount
	BuyerID   string
	PaidAt    time.Time
	RawStatus string
}

// CloseOutcome is the result of alipay.trade.close.
type CloseOutcome int

// The outcomes of a close.
const (
	CloseDone        CloseOutcome = iota // the trade is closed; it can no longer be paid
	CloseNotExist                        // the trade was never created (page pay not opened)
	CloseAlreadyPaid                     // refused: ACQ.TRADE_STATUS_ERROR or ACQ.TRADE_HAS_SUCCESS
)

// String returns a readable name for logs.
func (c CloseOutcome) String() string {
	switch c {
	case CloseDone:
		return "CLOSED"
	case CloseNotExist:
		return "NOT_EXIST"
	case CloseAlreadyPaid:
		return "ALREADY_PAID"
	default:
		return "UNKNOWN"
	}
}

// RefundRequest asks for a (partial) refund. OutRequestNo makes it idempotent.
type RefundRequest struct {
	PaymentNo    string
	OutRequestNo string
	Amount       Amount
	Reason       string
}

// RefundResult is the answer to a refund. FundChange is false when the request was a
// replay that moved no money.
type RefundResult struct {
	TradeNo      string
	FundChange   bool
	RefundAmount Amount
	// RefundedTotal is the trade's cumulative refunded amount after this request.
	RefundedTotal Amount
	// RefundedAt is Alipay's gmt_refund_pay, when it gave one: when the money moved.
	RefundedAt time.Time
}

// Notification is a verified Alipay asynchronous notification.
type Notification struct {
	NotifyID    string
	NotifyType  string
	NotifyTime  time.Time
	AppID       string
	SellerID    string
	BuyerID     string
	TradeNo     string
	PaymentNo   string // out_trade_no
	TradeStatus string // raw trade_status
	State       TradeState
	TotalAmount Amount
	PaidAt      time.Time // gmt_payment, zero if absent
	// OutBizNo, RefundFee and GmtRefund are set on a notification about a refund:
	// out_biz_no is the refund's out_request_no, refund_fee the trade's refunded total so
	// far, gmt_refund when it was refunded (as Alipay wrote it).
	OutBizNo  string
	RefundFee Amount
	GmtRefund string
}

// RawNotification is a channel's notification as it arrived: its headers and the exact
// bytes of its body, which the channel signed (WeChat Pay signs the body with the
// timestamp and nonce of its headers).
type RawNotification struct {
	Header http.Header
	Body   []byte
	// Recorded is true for a notification read back from where it was recorded on its
	// receipt (the inbox, the evidence of a PAID payment): its signature is verified
	// again, but not the freshness of its timestamp, which guards its receipt only.
	Recorded bool
}

// IsRefund reports whether the notification announces a refund. Such a notification is
// never a payment: its trade_status stays TRADE_SUCCESS after a partial refund and is
// TRADE_CLOSED after a full one.
func (n Notification) IsRefund() bool {
	return n.OutBizNo != "" || n.RefundFee > 0 || n.GmtRefund != ""
}

// HandOff is what a buyer is handed to pay a trade: a cashier URL (page, wap), the
// content of a QR code, or the order string the merchant's app passes to the channel's
// app SDK. One of them is set.
type HandOff struct {
	PayURL      string
	QRCode      string
	OrderString string
}

// HandOffOf is the hand-off that link, the pay link kept for a payment of method m, was:
// the content of a QR code (qr, wechat_native), an order string or signed parameters for
// an app or page SDK (app, wechat_jsapi, wechat_app), or else a cashier URL.
func HandOffOf(m Method, link string) HandOff {
	switch m {
	case MethodQR, MethodWechatNative:
		return HandOff{QRCode: link}
	case MethodApp, MethodWechatJSAPI, MethodWechatApp:
		return HandOff{OrderString: link}
	}
	return HandOff{PayURL: link}
}

// Link returns the one way to pay the hand-off carries.
func (h HandOff) Link() string {
	switch {
	case h.PayURL != "":
		return h.PayURL
	case h.QRCode != "":
		return h.QRCode
	}
	return h.OrderString
}

// Gateway is the payment channel as the domain sees it. Implementations return
// *ChannelError for failures so callers can tell retryable from permanent ones.
type Gateway interface {
	// Open opens the trade of req.Method and returns the buyer's hand-off: for a method
	// whose link paykit signs, the signed link (the channel holds no trade until the buyer
	// uses it, as with Alipay's page, wap and app pay); otherwise the channel's answer to
	// creating the trade (Alipay's precreate). It is keyed by req.PaymentNo: repeated, it
	// opens no second trade.
	Open(ctx context.Context, req TradeRequest) (HandOff, error)
	// SignedHandOff is Open for a method whose link paykit signs itself, with no call to
	// the channel; ok is false for a method that only the channel can open (Open), and
	// nothing is done then.
	SignedHandOff(ctx context.Context, req TradeRequest) (h HandOff, ok bool, err error)
	// Query returns the trade's state; an unknown trade is TradeNotExist with a nil error.
	Query(ctx context.Context, paymentNo string) (Trade, error)
	// Close closes an unpaid trade.
	Close(ctx context.Context, paymentNo string) (CloseOutcome, error)
	// Refund refunds part or all of a paid trade, idempotently on OutRequestNo.
	Refund(ctx context.Context, req RefundRequest) (RefundResult, error)
	// QueryRefund asks whether a refund request took effect (after a timeout, say). A
	// refund or trade Alipay does not know is Found=false with a nil error.
	QueryRefund(ctx context.Context, paymentNo, outRequestNo string) (RefundStatusAtChannel, error)
	// DecodeNotification verifies the signature of a notification as it arrived and
	// checks that it is addressed to this app (merchant) and seller. It does not check the amount or the
	// out_trade_no; CheckNotification does that against the stored payment.
	DecodeNotification(ctx context.Context, raw RawNotification) (Notification, error)
}

// Paced is the capability of a Gateway whose calls on paykit's own initiative (queries,
// closes) wait for a turn of its app's call limit. It is separate from Gateway so that a
// gateway without a limit still is one.
type Paced interface {
	// Turn takes the app's turn if one is free now, without waiting, and returns the
	// gateway whose next call on paykit's own initiative is made on it without waiting
	// again; when none is free it returns a nil gateway and how long until the next. A
	// caller that writes something before its call (the reconciler claims each query)
	// takes the turn first, so that what it wrote never waits for the app's limit, and
	// one that serves several apps serves another meanwhile.
	Turn(ctx context.Context) (Gateway, time.Duration, error)
}

// ChannelError is a failure talking to the payment channel.
type ChannelError struct {
	Op        string // e.g. "alipay.trade.query"
	Code      string // Alipay code, e.g. "40004"; empty for transport failures
	SubCode   string // e.g. "ACQ.SYSTEM_ERROR"
	Message   string
	Retryable bool
	Err       error
}

// Error implements the error interface.
func (e *ChannelError) Error() string {
	msg := e.Op + ": "
	if e.SubCode != "" {
		msg += e.SubCode + " "
	}
	msg += e.Message
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the underlying cause.
func (e *ChannelError) Unwrap() error { return e.Err }

// IsRetryable reports whether err is a channel failure worth retrying (ACQ.SYSTEM_ERROR,
// transport errors, timeouts). Unknown errors are treated as retryable.
func IsRetryable(err error) bool {
	var ce *ChannelError
	if errors.As(err, &ce) {
		return ce.Retryable
	}
	var de *Error
	if errors.As(err, &de) {
		return de.Code == EUNAVAILABLE || de.Code == EINTERNAL
	}
	return err != nil
}

// CheckNotification checks a verified notification against the stored payment: the
// out_trade_no must be ours and the amount must match to the fen.
func CheckNotification(n Notification, p Payment) error {
	if n.PaymentNo != p.PaymentNo {
		return Errorf(EUNPROCESSABLE, "notification out_trade_no %q does not match payment %q", n.PaymentNo, p.PaymentNo)
	}
	if n.TotalAmount != p.Amount {
		return Errorf(EUNPROCESSABLE, "notification total_amount %s does not match payment amount %s", n.TotalAmount.Yuan(), p.Amount.Yuan())
	}
	return nil
}
