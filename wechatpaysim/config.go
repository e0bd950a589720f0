package wechatpaysim

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Defaults used when the Config leaves a field empty.
const (
	DefaultMchID  = "1230000109"
	DefaultAppID  = "wxd678efh567hg6787"
	DefaultOpenID = "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"
	// DefaultNotifyTimeout is how long WeChat Pay waits for the merchant's answer to a
	// notification before counting the delivery as failed.
	DefaultNotifyTimeout = 5 * time.Second
	// DefaultClockSkew is how far a request's Authorization timestamp may be from the
	// server's clock.
	DefaultClockSkew = 5 * time.Minute
	// DefaultOrderLifetime is how long an unpaid order stays payable without time_expire.
	DefaultOrderLifetime = 7 * 24 * time.Hour
	// DefaultTimeExpireCeiling is the latest time_expire accepted (later ones are lowered).
	DefaultTimeExpireCeiling = 90 * 24 * time.Hour
	// MinTimeExpire is the earliest time_expire (earlier ones are raised to now plus it).
	MinTimeExpire      = time.Minute
	DefaultHangTimeout = 2 * time.Minute
	// APIHost is the production host kept in answer URLs: clients reach the simulator
	// through their proxy or base-URL settings.
	APIHost = "https://api.mch.weixin.qq.com"
	// ControlPrefix is the prefix of the simulator's own control API and cashier.
	ControlPrefix = "/_sim"

	// DefaultRefundDelay is how long a refund stays PROCESSING before it succeeds (scaled
	// by TimeScale). No source gives a figure; a minute keeps PROCESSING observable.
	DefaultRefundDelay = time.Minute
	// DefaultRefundMaxPerOrder is how many refunds an order may have ("部分退款不超过50次").
	DefaultRefundMaxPerOrder = 50
	// DefaultRefundInterval is the least time between two refunds of the same order.
	DefaultRefundInterval = time.Minute
	// DefaultRefundWindow is how long after success_time an order can be refunded.
	DefaultRefundWindow = 365 * 24 * time.Hour
	// DefaultBillReadyHour is the hour (Beijing time) of the next day when a day's trade
	// bill becomes ready: the newer pages say "每日10点后" (the older ones 09:00 to start,
	// 10:00 to fetch).
	DefaultBillReadyHour = 10
	// DefaultBillURLLifetime is how long a bill's download_url works (the newer pages say
	// 5 minutes, the older ones 30 seconds).
	DefaultBillURLLifetime = 5 * time.Minute
	// DefaultFeeRateBP is the fee rate in hundredths of a percent (60 is 0.60%).
	DefaultFeeRateBP = 60
	// BillHistory is how far back a trade bill can be asked for.
	BillHistory = 3 // months
)

// DefaultNotifySchedule returns WeChat Pay's redelivery intervals for an unacknowledged
// notification ("15s/15s/30s/3m/10m/20m/30m/30m/30m/60m/3h/3h/3h/6h/6h", 24h04m in all):
// the first interval counts from the first delivery (the docs do not say), each one
// separates a delivery from the next, so there are up to 16 deliveries.
func DefaultNotifySchedule() []time.Duration {
	m, h := time.Minute, time.Hour
	return []time.Duration{
		15 * time.Second, 15 * time.Second, 30 * time.Second, 3 * m, 10 * m, 20 * m, 30 * m, 30 * m,
		30 * m, 60 * m, 3 * h, 3 * h, 3 * h, 6 * h, 6 * h,
	}
}

// Merchant key modes: which WeChat Pay keys the merchant has (Merchant.KeyMode).
const (
	// KeyModeBoth: a platform certificate and the WeChat Pay public key with the console
	// switch on. Answers to requests whose Wechatpay-Serial names the public key ID are
	// signed with the public key, all others with the platform certificate.
	KeyModeBoth = "both"
	// KeyModePlatform: the public-key switch is off; everything is signed with the
	// platform certificate.
	KeyModePlatform = "platform"
	// KeyModePublicKey: a merchant who never had a platform certificate. Everything is
	// signed with the public key, and GET /v3/certificates answers 404 RESOURCE_NOT_EXISTS.
	KeyModePublicKey = "public_key"
)

// Notification signers (Merchant.NotifySigner).
const (
	SignerPlatform  = "platform"
	SignerPublicKey = "public_key"
)

// Answers to closing a paid order (Config.ClosePaid): no source says what WeChat Pay does.
const (
	// ClosePaidOrderPaid refuses with 400 ORDERPAID (订单已支付), the code v2 used: a client
	// can tell it from success and from a closed order.
	ClosePaidOrderPaid = "orderpaid"
	// ClosePaidTradeError refuses with 403 TRADE_ERROR, one of the codes the close page lists.
	ClosePaidTradeError = "trade_error"
	// ClosePaidNoContent answers 204 and leaves the order paid.
	ClosePaidNoContent = "no_content"
)

// Answers to closing an order that is already closed (Config.CloseClosed).
const (
	// CloseClosedNoContent answers 204 again: closing is idempotent.
	CloseClosedNoContent = "no_content"
	// CloseClosedOrderClosed refuses with 400 ORDER_CLOSED.
	CloseClosedOrderClosed = "order_closed"
)

// Refusals of a refund whose out_refund_no exists with another amount or order
// (Config.RefundMismatch): v3 documents no code.
const (
	// RefundMismatchInvalidRequest answers 400 INVALID_REQUEST, the v3 code for a request
	// well formed but against the business rules.
	RefundMismatchInvalidRequest = "invalid_request"
	// RefundMismatchFeeMismatch answers 400 REFUND_FEE_MISMATCH, v2's code.
	RefundMismatchFeeMismatch = "refund_fee_mismatch"
)

// Refusals of a refund above what is left to refund (Config.OverRefund): v3 has no
// dedicated code.
const (
	// OverRefundInvalidRequest answers 400 INVALID_REQUEST (v2: INVALID_REQUEST
	// "refund_fee大于可退金额").
	OverRefundInvalidRequest = "invalid_request"
	// OverRefundNotEnough answers 403 NOT_ENOUGH, which v3 uses for a merchant balance
	// too short to refund.
	OverRefundNotEnough = "not_enough"
)

// Refusals of a second refund of an order within Config.RefundInterval
// (Config.RefundTooSoon): no source ties a code to the one-minute rule.
const (
	// RefundTooSoonFrequencyLimited answers 429 FREQUENCY_LIMITED, the refund page's
	// frequency code ("请调用查单接口确认或降低频率原单重试"); nothing is taken.
	RefundTooSoonFrequencyLimited = "frequency_limited"
	// RefundTooSoonInvalidRequest answers 400 INVALID_REQUEST.
	RefundTooSoonInvalidRequest = "invalid_request"
)

// Merchant is one merchant (直连商户) the simulator serves.
type Merchant struct {
	// MchID is the merchant number (商户号).
	MchID string `json:"mchid"`
	// AppIDs are the appids bound to MchID; an order for another is 400 APPID_MCHID_NOT_MATCH.
	AppIDs []string `json:"appids"`
	// SerialNo is the merchant API certificate's serial, which requests name as serial_no.
	// With a certificate in PublicKeyPEM it defaults to the certificate's serial.
	SerialNo string `json:"serial_no"`
	// PublicKeyPEM is the merchant API certificate (apiclient_cert.pem) or its public key.
	PublicKeyPEM string `json:"public_key"`
	// APIv3Key is the 32-character APIv3 key that encrypts certificates and notifications.
	APIv3Key string `json:"apiv3_key"`
	// KeyMode is KeyModeBoth (default), KeyModePlatform or KeyModePublicKey.
	KeyMode string `json:"key_mode,omitempty"`
	// NotifySigner signs this merchant's notifications: SignerPlatform or SignerPublicKey.
	// Empty means the platform certificate, or the public key in KeyModePublicKey.
	NotifySigner string `json:"notify_signer,omitempty"`
}

// Throttle is WeChat Pay's per-merchant frequency limit: past Rate calls a second (with
// bursts of up to Burst) a call is answered 429 FREQUENCY_LIMITED without being carried
// out. A zero Rate is no limit.
type Throttle struct {
	Rate  float64 `json:"rate"`
	Burst int     `json:"burst"`
	// AcceptRefunds carries a throttled refund request out before answering it 429, as
	// WeChat Pay's "该笔退款为受理中" warns: the client must query before it retries.
	AcceptRefunds bool `json:"accept_refunds,omitempty"`
}

// Config configures a Simulator. Merchants, PlatformCertPEM, PlatformPrivateKeyPEM,
// PublicKeyID and PublicKeyPrivateKeyPEM are required (see GenerateKeys and KeySet.Config).
type Config struct {
	// Merchants lists the merchants served at start; more can be added with AddMerchant.
	Merchants []Merchant
	// PlatformCertPEM and PlatformPrivateKeyPEM are the platform certificate
	// (平台证书) listed by GET /v3/certificates and its key.
	PlatformCertPEM       string
	PlatformPrivateKeyPEM string
	// PublicKeyID (PUB_KEY_ID_ + 34 digits) and PublicKeyPrivateKeyPEM are the WeChat Pay
	// public key pair (微信支付公钥).
	PublicKeyID            string
	PublicKeyPrivateKeyPEM string

	// TimeScale speeds up the notification redelivery schedule and RefundDelay: 60 makes
	// a minute of either pass in a second. It touches nothing else. Zero means 1.
	TimeScale float64
	// NotifySchedule overrides the redelivery intervals (before scaling); nil means
	// DefaultNotifySchedule.
	NotifySchedule []time.Duration
	// NotifyTimeout bounds one delivery (not scaled). Zero means DefaultNotifyTimeout.
	NotifyTimeout time.Duration
	// NotifyRequireSuccessCode also demands a JSON body with "code":"SUCCESS" before a
	// delivery counts as acknowledged. Off by default: WeChat Pay documents the HTTP
	// status (200 or 204) as the answer; only gopay's docs ask for the body.
	NotifyRequireSuccessCode bool
	// SignatureProbes sends a signature probe (Wechatpay-Signature:
	// WECHATPAY/SIGNTEST/…) to notify_url before each notification's first delivery.
	SignatureProbes bool
	// ClockSkew is how far an Authorization timestamp may be from now. Zero means
	// DefaultClockSkew.
	ClockSkew time.Duration
	// RejectReplayedNonce refuses (401 SIGN_ERROR) a request whose nonce_str the merchant
	// already used within ClockSkew. No source documents such a check; off by default.
	RejectReplayedNonce bool
	// LegacyOutTradeNoCharset refuses '|' in out_trade_no, as older pages do ([0-9A-Za-z_-*]).
	// By default the newer pages' [0-9A-Za-z_-|*] is accepted.
	LegacyOutTradeNoCharset bool
	// TimeExpireCeiling is the latest time_expire accepted, from now; later ones are
	// lowered to it. Zero means DefaultTimeExpireCeiling (90 days; some pages say 15).
	TimeExpireCeiling time.Duration
	// ClosePaid picks the answer to closing a paid order (ClosePaid* constants). Empty
	// means ClosePaidOrderPaid.
	ClosePaid string
	// CloseClosed picks the answer to closing a closed order (CloseClosed* constants).
	// Empty means CloseClosedNoContent.
	CloseClosed string
	// SignErrors signs 4xx and 5xx answers too, when the request itself verified. Off by
	// default: WeChat Pay signs only successful answers, and no client verifies errors.
	SignErrors bool
	// AllowMissingAcceptOrUA accepts requests without an Accept or User-Agent header,
	// which WeChat Pay answers 400 INVALID_REQUEST.
	AllowMissingAcceptOrUA bool
	// Throttle is the initial per-merchant frequency limit.
	Throttle Throttle
	// Faults are API faults armed at start (see InjectFault).
	Faults []APIFault
	// HangTimeout bounds how long a "hang" fault holds a request. Zero means DefaultHangTimeout.
	HangTimeout time.Duration
	// RefundDelay is how long a refund stays PROCESSING before it succeeds, scaled by
	// TimeScale. Zero means DefaultRefundDelay; negative keeps refunds PROCESSING until
	// the control API settles them.
	RefundDelay time.Duration
	// RefundMaxPerOrder is how many refunds one order may have. Zero means
	// DefaultRefundMaxPerOrder.
	RefundMaxPerOrder int
	// RefundInterval is the least time (on the simulator's clock) between two refunds of
	// the same order. Zero means DefaultRefundInterval; negative means none.
	RefundInterval time.Duration
	// RefundWindow is how long after success_time an order can be refunded. Zero means
	// DefaultRefundWindow.
	RefundWindow time.Duration
	// RefundMismatch picks the refusal of an out_refund_no reused with another amount or
	// order (RefundMismatch* constants). Empty means RefundMismatchInvalidRequest.
	RefundMismatch string
	// OverRefund picks the refusal of a refund above what is left (OverRefund*
	// constants). Empty means OverRefundInvalidRequest.
	OverRefund string
	// RefundTooSoon picks the refusal of a refund within RefundInterval of the order's
	// previous one (RefundTooSoon* constants). Empty means RefundTooSoonFrequencyLimited.
	RefundTooSoon string
	// BillReadyHour is the hour (1 to 23, Beijing time) of the next day when a day's bill
	// is ready; before it GET /v3/bill/tradebill answers 400 STATEMENT_CREATING. Zero
	// means DefaultBillReadyHour; negative makes every bill ready at once, the current
	// day's included (as it stands when asked).
	BillReadyHour int
	// LateBills are bill dates (YYYY-MM-DD) whose bills answer STATEMENT_CREATING until
	// released (SetBillLate), whatever the hour.
	LateBills []string
	// BillURLLifetime is how long a download_url works. Zero means DefaultBillURLLifetime.
	BillURLLifetime time.Duration
	// BillHashCompressed makes hash_value the SHA1 of the bytes downloaded, gzip and all,
	// when tar_type=GZIP. Off by default: the only source that says (the older pages)
	// hashes the plain bill ("原始账单(gzip需要解压缩)的摘要值"); a plain download hashes
	// the same either way.
	BillHashCompressed bool
	// FeeRateBP is the merchant's fee rate in hundredths of a percent, shown in the bill
	// as 费率 ("0.60%") and charged per trade as 手续费 (rounded half up to the fen).
	// Zero means DefaultFeeRateBP; negative means no fee.
	FeeRateBP int
	// PublicURL is the simulator's externally visible base URL, used in the cashier links
	// of GET /_sim/orders. Empty means taken from each request's Host.
	PublicURL string
	// Now is the simulator's clock; nil means time.Now. Tests set it to move time.
	Now func() time.Time
	// HTTPClient delivers notifications. Nil means a client with NotifyTimeout.
	HTTPClient *http.Client
	// Logger receives structured logs. Nil means slog.Default().
	Logger *slog.Logger
}

// Config returns a simulator Config serving this key set's merchant with its keys.
func (k KeySet) Config() Config {
	return Config{
		Merchants:              []Merchant{k.Merchant()},
		PlatformCertPEM:        k.PlatformCertPEM,
		PlatformPrivateKeyPEM:  k.PlatformPrivateKeyPEM,
		PublicKeyID:            k.PublicKeyID,
		PublicKeyPrivateKeyPEM: k.PublicKeyPrivateKeyPEM,
	}
}

func (c Config) withDefaults() Config {
	if c.TimeScale <= 0 {
		c.TimeScale = 1
	}
	if c.NotifySchedule == nil {
		c.NotifySchedule = DefaultNotifySchedule()
	}
	if c.NotifyTimeout <= 0 {
		c.NotifyTimeout = DefaultNotifyTimeout
	}
	if c.ClockSkew <= 0 {
		c.ClockSkew = DefaultClockSkew
	}
	if c.TimeExpireCeiling <= 0 {
		c.TimeExpireCeiling = DefaultTimeExpireCeiling
	}
	if c.ClosePaid == "" {
		c.ClosePaid = ClosePaidOrderPaid
	}
	if c.CloseClosed == "" {
		c.CloseClosed = CloseClosedNoContent
	}
	c = c.refundAndBillDefaults()
	if c.HangTimeout <= 0 {
		c.HangTimeout = DefaultHangTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: c.NotifyTimeout}
	}
	return c
}

func (c Config) refundAndBillDefaults() Config {
	if c.RefundDelay == 0 {
		c.RefundDelay = DefaultRefundDelay
	}
	if c.RefundMaxPerOrder <= 0 {
		c.RefundMaxPerOrder = DefaultRefundMaxPerOrder
	}
	if c.RefundInterval == 0 {
		c.RefundInterval = DefaultRefundInterval
	}
	if c.RefundWindow <= 0 {
		c.RefundWindow = DefaultRefundWindow
	}
	if c.RefundMismatch == "" {
		c.RefundMismatch = RefundMismatchInvalidRequest
	}
	if c.OverRefund == "" {
		c.OverRefund = OverRefundInvalidRequest
	}
	if c.RefundTooSoon == "" {
		c.RefundTooSoon = RefundTooSoonFrequencyLimited
	}
	if c.BillReadyHour == 0 {
		c.BillReadyHour = DefaultBillReadyHour
	}
	if c.BillURLLifetime <= 0 {
		c.BillURLLifetime = DefaultBillURLLifetime
	}
	if c.FeeRateBP == 0 {
		c.FeeRateBP = DefaultFeeRateBP
	}
	return c
}

func (c Config) validate() error {
	if err := c.validateRefundAndBill(); err != nil {
		return err
	}
	if !slices.Contains([]string{ClosePaidOrderPaid, ClosePaidTradeError, ClosePaidNoContent}, c.ClosePaid) {
		return fmt.Errorf("unknown ClosePaid %q", c.ClosePaid)
	}
	if !slices.Contains([]string{CloseClosedNoContent, CloseClosedOrderClosed}, c.CloseClosed) {
		return fmt.Errorf("unknown CloseClosed %q", c.CloseClosed)
	}
	if !strings.HasPrefix(c.PublicKeyID, publicKeyIDPrefix) {
		return fmt.Errorf("PublicKeyID %q does not start with %s", c.PublicKeyID, publicKeyIDPrefix)
	}
	return nil
}

func (c Config) validateRefundAndBill() error {
	switch {
	case !slices.Contains([]string{RefundMismatchInvalidRequest, RefundMismatchFeeMismatch}, c.RefundMismatch):
		return fmt.Errorf("unknown RefundMismatch %q", c.RefundMismatch)
	case !slices.Contains([]string{OverRefundInvalidRequest, OverRefundNotEnough}, c.OverRefund):
		return fmt.Errorf("unknown OverRefund %q", c.OverRefund)
	case !slices.Contains([]string{RefundTooSoonFrequencyLimited, RefundTooSoonInvalidRequest}, c.RefundTooSoon):
		return fmt.Errorf("unknown RefundTooSoon %q", c.RefundTooSoon)
	case c.BillReadyHour > 23:
		return fmt.Errorf("BillReadyHour %d is not an hour of the day", c.BillReadyHour)
	}
	return nil
}

// merchant is a Merchant as the simulator uses it.
type merchant struct {
	id       string
	appIDs   []string
	serial   string
	pub      *rsa.PublicKey
	apiV3Key []byte
	keyMode  string
	signer   string // notification signer; guarded by Simulator.mu after New
}

func newMerchant(m Merchant) (*merchant, error) {
	if m.MchID == "" {
		return nil, errors.New("merchant with empty mchid")
	}
	pub, certSerial, err := parsePublicKey(m.PublicKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("merchant %s public key: %w", m.MchID, err)
	}
	serial := m.SerialNo
	if serial == "" {
		serial = certSerial
	}
	if serial == "" {
		return nil, fmt.Errorf("merchant %s: no serial_no and no certificate to take it from", m.MchID)
	}
	if len(m.APIv3Key) != 32 {
		return nil, fmt.Errorf("merchant %s: the APIv3 key must be 32 bytes, not %d", m.MchID, len(m.APIv3Key))
	}
	if len(m.AppIDs) == 0 {
		return nil, fmt.Errorf("merchant %s: no appid", m.MchID)
	}
	mode := m.KeyMode
	if mode == "" {
		mode = KeyModeBoth
	}
	if !slices.Contains([]string{KeyModeBoth, KeyModePlatform, KeyModePublicKey}, mode) {
		return nil, fmt.Errorf("merchant %s: unknown key mode %q", m.MchID, mode)
	}
	signer, err := notifySigner(mode, m.NotifySigner)
	if err != nil {
		return nil, fmt.Errorf("merchant %s: %w", m.MchID, err)
	}
	return &merchant{
		id: m.MchID, appIDs: slices.Clone(m.AppIDs), serial: serial, pub: pub,
		apiV3Key: []byte(m.APIv3Key), keyMode: mode, signer: signer,
	}, nil
}

// notifySigner resolves a merchant's notification signer for its key mode.
func notifySigner(mode, signer string) (string, error) {
	switch {
	case signer == "" && mode == KeyModePublicKey:
		return SignerPublicKey, nil
	case signer == "":
		return SignerPlatform, nil
	case signer == SignerPlatform && mode == KeyModePublicKey:
		return "", errors.New("a public-key-only merchant has no platform certificate to sign with")
	case signer == SignerPlatform || signer == SignerPublicKey:
		return signer, nil
	}
	return "", fmt.Errorf("unknown notify signer %q", signer)
}

// info is the merchant as listed by the control API.
func (m *merchant) info() Merchant {
	return Merchant{MchID: m.id, AppIDs: slices.Clone(m.appIDs), SerialNo: m.serial, KeyMode: m.keyMode, NotifySigner: m.signer}
}

func (m *merchant) hasAppID(appid string) bool { return slices.Contains(m.appIDs, appid) }
