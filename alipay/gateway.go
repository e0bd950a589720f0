// Package alipay implements payment.Gateway on Alipay's OpenAPI with
// github.com/smartwalle/alipay/v3. It maps every answer onto the domain's outcomes:
// trade states, close outcomes, refund results and *payment.ChannelError, retryable or not.
package alipay

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/paykit/paykit/payment"
	"github.com/smartwalle/alipay/v3"
)

// Gateway URLs.
const (
	ProductionGatewayURL = "https://openapi.alipay.com/gateway.do"
	SandboxGatewayURL    = "https://openapi-sandbox.dl.alipaydev.com/gateway.do"
	// DefaultTimeout bounds one call when Config.HTTPClient is nil.
	DefaultTimeout = 10 * time.Second
)

// Product codes sent with trades.
const (
	productPagePay = "FAST_INSTANT_TRADE_PAY"
	productQR      = "FACE_TO_FACE_PAYMENT"
	timeLayout     = "2006-01-02 15:04:05"
)

// Config configures a Gateway.
type Config struct {
	// AppID is the Alipay app_id.
	AppID string
	// SellerID is the merchant's PID (2088…), which notifications must carry as seller_id.
	SellerID string
	// AppPrivateKeyPEM signs requests: PKCS#1 or PKCS#8, PEM or bare base64.
	AppPrivateKeyPEM string
	// AlipayPublicKeyPEM verifies responses and notifications: PKIX, PEM or bare base64.
	// Leave it empty in certificate mode.
	AlipayPublicKeyPEM string
	// Certificate mode (公钥证书模式), when all three are set: the app certificate
	// (app_cert_sn), the Alipay certificate that verifies answers and notifications, and
	// Alipay's root bundle (alipay_root_cert_sn). PEM.
	AppCertPEM        string
	AlipayCertPEM     string
	AlipayRootCertPEM string
	// GatewayURL is the full gateway.do URL: ProductionGatewayURL (the default),
	// SandboxGatewayURL, or a simulator's URL.
	GatewayURL string
	// NotifyURL receives asynchronous notifications. It must not carry a query string:
	// Alipay's signature would not cover it.
	NotifyURL string
	// ReturnURL is where the cashier sends the buyer back, unless the TradeRequest has one.
	ReturnURL string
	// HTTPClient makes the calls; nil means a client with Timeout. Its transport is
	// wrapped so that HTTP 5xx answers become retryable errors.
	HTTPClient *http.Client
	// Timeout bounds one call when HTTPClient is nil; zero means DefaultTimeout.
	Timeout time.Duration
	// Logger receives debug logs of each call; nil means slog.Default().
	Logger *slog.Logger
}

// Gateway is payment.Gateway on Alipay. It is safe for concurrent use.
type Gateway struct {
	client    *alipay.Client
	appID     string
	sellerID  string
	notifyURL string
	returnURL string
	loc       *time.Location
	log       *slog.Logger
}

var _ payment.Gateway = (*Gateway)(nil)

// New builds a Gateway from cfg.
func New(cfg Config) (*Gateway, error) {
	if cfg.AppID == "" || cfg.SellerID == "" {
		return nil, errors.New("alipay: AppID and SellerID are required")
	}
	if cfg.GatewayURL == "" {
		cfg.GatewayURL = ProductionGatewayURL
	}
	// No query on the gateway: the client appends the signed parameters with "?".
	if err := checkURL("GatewayURL", cfg.GatewayURL, false); err != nil {
		return nil, err
	}
	if err := checkURL("NotifyURL", cfg.NotifyURL, false); err != nil {
		return nil, err
	}
	if cfg.ReturnURL != "" {
		if err := checkURL("ReturnURL", cfg.ReturnURL, true); err != nil {
			return nil, err
		}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	hc := &http.Client{Timeout: cfg.Timeout}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient // never mutate the caller's client
		hc = &c
	}
	hc.Transport = statusTransport{base: hc.Transport}

	// China time for every timestamp, without depending on the tzdata database.
	loc := time.FixedZone("CST", 8*3600)
	// production=false keeps the client from ever downloading certificates named by an
	// alipay_cert_sn field, which a forged answer or notification could supply (see
	// loadVerifier); the host is set explicitly, so the flag changes nothing else.
	client, err := alipay.New(cfg.AppID, strings.TrimSpace(cfg.AppPrivateKeyPEM), false,
		alipay.WithSandboxGateway(cfg.GatewayURL),
		alipay.WithHTTPClient(hc),
		alipay.WithTimeLocation(loc),
	)
	if err != nil {
		return nil, fmt.Errorf("alipay: app private key: %w", err)
	}
	if err := loadVerifier(client, cfg); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	return &Gateway{
		client:    client,
		appID:     cfg.AppID,
		sellerID:  cfg.SellerID,
		notifyURL: cfg.NotifyURL,
		returnURL: cfg.ReturnURL,
		loc:       loc,
		log:       logger.With("component", "alipay", "app_id", cfg.AppID),
	}, nil
}

func checkURL(name, raw string, queryAllowed bool) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("alipay: %s %q is not an absolute http(s) URL", name, raw)
	}
	if !queryAllowed && (u.RawQuery != "" || strings.Contains(raw, "?")) {
		return fmt.Errorf("alipay: %s must not have a query string", name)
	}
	return nil
}

// statusTransport turns HTTP error statuses into errors. The client library would
// otherwise try to decode a load balancer's HTML error page as JSON.
type statusTransport struct{ base http.RoundTripper }

// HTTPStatusError is an HTTP 4xx/5xx answer from the gateway. 5xx is retryable.
type HTTPStatusError struct{ StatusCode int }

// Error implements the error interface.
func (e *HTTPStatusError) Error() string {
	return fmt.Sprintf("gateway answered HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
}

// RoundTrip implements http.RoundTripper.
func (t statusTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 400 {
		resp.Body.Close()
		return nil, &HTTPStatusError{StatusCode: resp.StatusCode}
	}
	return resp, nil
}
