package alipaysim

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// Defaults used when the Config leaves a field empty.
const (
	DefaultAppID         = "2021000000000001"
	DefaultSellerID      = "2088000000000001"
	DefaultBuyerID       = "2088000000009999"
	DefaultNotifyTimeout = 10 * time.Second
	DefaultHangTimeout   = 2 * time.Minute
	// GatewayPath is where the OpenAPI gateway listens, as at openapi.alipay.com.
	GatewayPath = "/gateway.do"
	// ControlPrefix is the prefix of the simulator's own control API.
	ControlPrefix = "/_sim"
)

// DefaultNotifySchedule returns Alipay's redelivery intervals for an unacknowledged
// notification: after the first delivery, again after 4m, 10m, 10m, 1h, 2h, 6h and 15h
// (8 deliveries within about 25 hours).
func DefaultNotifySchedule() []time.Duration {
	return []time.Duration{
		4 * time.Minute, 10 * time.Minute, 10 * time.Minute,
		time.Hour, 2 * time.Hour, 6 * time.Hour, 15 * time.Hour,
	}
}

// App is one merchant app the simulator accepts requests from.
type App struct {
	// AppID is the app_id the merchant sends.
	AppID string
	// SellerID is the merchant's PID (2088…), sent as seller_id in notifications.
	SellerID string
	// PublicKeyPEM is the app's public key (PKIX or PKCS#1, PEM or bare base64), used to
	// verify request signatures.
	PublicKeyPEM string
	// CertPEM, if set, puts the app in certificate mode: its requests must carry this
	// certificate's SN as app_cert_sn and the root SN as alipay_root_cert_sn, and the
	// answers carry alipay_cert_sn. PublicKeyPEM may then be left empty.
	CertPEM string
	// AlipayPrivateKeyPEM, if set, signs this app's responses and notifications instead
	// of Config.AlipayPrivateKeyPEM: Alipay gives each app its own Alipay public key.
	// It is for public-key mode; an app in certificate mode is signed with the key of
	// the simulator's Alipay certificate.
	AlipayPrivateKeyPEM string
}

// Config configures a Simulator. Only AppPublicKeyPEM (or Apps) and AlipayPrivateKeyPEM
// are required.
type Config struct {
	// AppID, SellerID and AppPublicKeyPEM describe the main merchant app. AppID defaults
	// to DefaultAppID and SellerID to DefaultSellerID.
	AppID           string
	SellerID        string
	AppPublicKeyPEM string
	// Apps lists further merchant apps, for multi-tenant setups.
	Apps []App
	// AlipayPrivateKeyPEM signs responses, notifications and return URLs.
	AlipayPrivateKeyPEM string
	// Certificate mode (公钥证书模式): AppCertPEM is the main app's certificate (see
	// App.CertPEM), AlipayCertPEM the Alipay certificate for AlipayPrivateKeyPEM, and
	// AlipayRootCertPEM the root bundle that issued both. See GenerateCerts.
	AppCertPEM        string
	AlipayCertPEM     string
	AlipayRootCertPEM string

	// TimeScale speeds up the notification redelivery schedule: 60 makes a minute of
	// schedule pass in a second. It does not touch time_expire, which is an absolute
	// wall-clock time. Zero means 1 (real time).
	TimeScale float64
	// NotifySchedule overrides the redelivery intervals (before scaling); nil means
	// DefaultNotifySchedule.
	NotifySchedule []time.Duration
	// NotifyTimeout bounds one delivery attempt (not scaled). Zero means DefaultNotifyTimeout.
	NotifyTimeout time.Duration
	// HangTimeout bounds how long a "hang" fault holds a request if the client never gives
	// up. Zero means DefaultHangTimeout.
	HangTimeout time.Duration
	// PublicURL is the simulator's externally visible base URL (e.g.
	// "http://alipaysim:8090"), used in qr_code values. Empty means taken from each
	// request's Host.
	PublicURL string
	// PaymentNotificationsOnly turns off the notifications Alipay also sends when a trade
	// is closed, refunded or finished, leaving only TRADE_SUCCESS on payment.
	PaymentNotificationsOnly bool
	// HTTPClient delivers notifications. Nil means a client with NotifyTimeout.
	HTTPClient *http.Client
	// Logger receives structured logs. Nil means slog.Default().
	Logger *slog.Logger
}

type app struct {
	id       string
	sellerID string
	pub      *rsa.PublicKey
	certSN   string // certificate mode when set
	// alipayKey signs for this app; nil means the simulator's key.
	alipayKey *rsa.PrivateKey
}

func (c Config) withDefaults() Config {
	if c.AppID == "" {
		c.AppID = DefaultAppID
	}
	if c.SellerID == "" {
		c.SellerID = DefaultSellerID
	}
	if c.TimeScale <= 0 {
		c.TimeScale = 1
	}
	if c.NotifySchedule == nil {
		c.NotifySchedule = DefaultNotifySchedule()
	}
	if c.NotifyTimeout <= 0 {
		c.NotifyTimeout = DefaultNotifyTimeout
	}
	if c.HangTimeout <= 0 {
		c.HangTimeout = DefaultHangTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: c.NotifyTimeout}
	}
	return c
}

func (c Config) apps(certs certMode) (map[string]*app, error) {
	all := c.Apps
	if c.AppPublicKeyPEM != "" || c.AppCertPEM != "" {
		all = append([]App{{AppID: c.AppID, SellerID: c.SellerID, PublicKeyPEM: c.AppPublicKeyPEM, CertPEM: c.AppCertPEM}}, all...)
	}
	if len(all) == 0 {
		return nil, errors.New("no app public key configured")
	}
	apps := make(map[string]*app, len(all))
	for _, a := range all {
		if a.AppID == "" {
			return nil, errors.New("app with empty AppID")
		}
		if _, dup := apps[a.AppID]; dup {
			return nil, fmt.Errorf("app %s configured twice", a.AppID)
		}
		var pub *rsa.PublicKey
		var certSN string
		var err error
		if a.CertPEM != "" {
			pub, certSN, err = certs.appCertKey(a.CertPEM, a.PublicKeyPEM)
		} else {
			pub, err = parsePublicKey(a.PublicKeyPEM)
		}
		if err != nil {
			return nil, fmt.Errorf("app %s public key: %w", a.AppID, err)
		}
		seller := a.SellerID
		if seller == "" {
			seller = DefaultSellerID
		}
		var alipayKey *rsa.PrivateKey
		if a.AlipayPrivateKeyPEM != "" {
			if certSN != "" {
				return nil, fmt.Errorf("app %s: an app in certificate mode is signed with the Alipay certificate's key, not its own AlipayPrivateKeyPEM", a.AppID)
			}
			if alipayKey, err = parsePrivateKey(a.AlipayPrivateKeyPEM); err != nil {
				return nil, fmt.Errorf("app %s alipay private key: %w", a.AppID, err)
			}
		}
		apps[a.AppID] = &app{id: a.AppID, sellerID: seller, pub: pub, certSN: certSN, alipayKey: alipayKey}
	}
	return apps, nil
}
