package gateways

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/paykit/paykit/alipay"
	"github.com/paykit/paykit/payment"
)

// Alipay builds the gateways of Alipay apps on one gateway URL.
type Alipay struct {
	GatewayURL string
	// NotifyURL is where Alipay sends an app's notifications.
	NotifyURL string
	// CashierBaseURL, if set, replaces the scheme and host of page- and wap-pay URLs
	// (ALIPAY_CASHIER_BASE_URL), for setups where the buyer's browser reaches the gateway
	// under another name (Docker).
	CashierBaseURL string
	// Limiter, if set, spaces the calls paykit makes to each app on its own initiative
	// (Limited).
	Limiter Limiter
}

// Build makes the gateway of one app, in certificate mode when creds carry the three
// certificates. It is a Build.
func (a Alipay) Build(appID, sellerID string, creds payment.AlipayCredentials) (payment.Gateway, error) {
	gw, err := alipay.New(alipay.Config{
		AppID:              appID,
		SellerID:           sellerID,
		AppPrivateKeyPEM:   creds.AppPrivateKeyPEM,
		AlipayPublicKeyPEM: creds.AlipayPublicKeyPEM,
		AppCertPEM:         creds.AppCertPEM,
		AlipayCertPEM:      creds.AlipayCertPEM,
		AlipayRootCertPEM:  creds.RootCertPEM,
		GatewayURL:         a.GatewayURL,
		NotifyURL:          a.NotifyURL,
		HTTPClient:         &http.Client{Timeout: 10 * time.Second},
	})
	if err != nil {
		return nil, err
	}
	if a.CashierBaseURL == "" {
		return Limited(gw, appID, a.Limiter), nil
	}
	base, err := url.Parse(a.CashierBaseURL)
	if err != nil || base.Host == "" {
		return nil, fmt.Errorf("ALIPAY_CASHIER_BASE_URL=%q is not an absolute URL", a.CashierBaseURL)
	}
	return Limited(cashierRewrite{Gateway: gw, base: base}, appID, a.Limiter), nil
}

// cashierRewrite serves page- and wap-pay URLs under another host. The signature covers
// only the query, so the URL stays valid.
type cashierRewrite struct {
	payment.Gateway
	base *url.URL
}

// Open implements payment.Gateway.
func (c cashierRewrite) Open(ctx context.Context, req payment.TradeRequest) (payment.HandOff, error) {
	h, err := c.Gateway.Open(ctx, req)
	return c.rewriteHandOff(h, err)
}

// SignedHandOff implements payment.Gateway.
func (c cashierRewrite) SignedHandOff(ctx context.Context, req payment.TradeRequest) (payment.HandOff, bool, error) {
	h, ok, err := c.Gateway.SignedHandOff(ctx, req)
	h, err = c.rewriteHandOff(h, err)
	return h, ok && err == nil, err
}

// rewriteHandOff rewrites a hand-off's cashier URL; a QR code or an app's order string is
// kept as it is.
func (c cashierRewrite) rewriteHandOff(h payment.HandOff, err error) (payment.HandOff, error) {
	if err != nil || h.PayURL == "" {
		return h, err
	}
	h.PayURL, err = c.rewrite(h.PayURL, nil)
	return h, err
}

// BillDownloadURL keeps the bill capability of the wrapped gateway.
func (c cashierRewrite) BillDownloadURL(ctx context.Context, billDate string) (string, error) {
	b, ok := c.Gateway.(payment.BillSource)
	if !ok {
		return "", errors.New("the gateway cannot download bills")
	}
	return b.BillDownloadURL(ctx, billDate)
}

func (c cashierRewrite) rewrite(raw string, err error) (string, error) {
	if err != nil {
		return "", err
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("pay url: %w", err)
	}
	u.Scheme, u.Host = c.base.Scheme, c.base.Host
	return u.String(), nil
}
