package payment

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"time"
)

// AlipayCredentials are the keys of a tenant's own Alipay app. AppPrivateKeyPEM is a
// secret; they are stored only sealed (Tenant.AlipayCredentialsSealed) and print,
// log and marshal as "[redacted]", so no log line or API answer can carry them.
//
// Public-key mode needs AppPrivateKeyPEM and AlipayPublicKeyPEM. AppCertPEM,
// AlipayCertPEM and RootCertPEM hold the three certificates of certificate mode
// (公钥证书模式) for when the adapter runs in it.
type AlipayCredentials struct {
	AppPrivateKeyPEM   string
	AlipayPublicKeyPEM string
	AppCertPEM         string
	AlipayCertPEM      string
	RootCertPEM        string
}

const redacted = "[redacted]"

// String implements fmt.Stringer without the keys.
func (AlipayCredentials) String() string { return redacted }

// GoString keeps %#v from printing the keys.
func (AlipayCredentials) GoString() string { return redacted }

// LogValue implements slog.LogValuer without the keys.
func (AlipayCredentials) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON keeps the keys out of any JSON.
func (AlipayCredentials) MarshalJSON() ([]byte, error) { return json.Marshal(redacted) }

// IsZero reports whether no key is set.
func (c AlipayCredentials) IsZero() bool { return c == AlipayCredentials{} }

// CertMode reports whether the certificates are set (certificate mode).
func (c AlipayCredentials) CertMode() bool {
	return c.AppCertPEM != "" || c.AlipayCertPEM != "" || c.RootCertPEM != ""
}

// Validate checks that the credentials are complete for one mode.
func (c AlipayCredentials) Validate() error {
	if c.AppPrivateKeyPEM == "" {
		return Errorf(EINVALID, "an Alipay app needs its app private key")
	}
	if c.CertMode() {
		if c.AppCertPEM == "" || c.AlipayCertPEM == "" || c.RootCertPEM == "" {
			return Errorf(EINVALID, "certificate mode needs the app, Alipay and root certificates")
		}
		return nil
	}
	if c.AlipayPublicKeyPEM == "" {
		return Errorf(EINVALID, "an Alipay app needs the Alipay public key (or the three certificates)")
	}
	return nil
}

// sealedCredentials is the plaintext that is sealed; its JSON is never logged.
type sealedCredentials struct {
	AppPrivateKeyPEM   string `json:"app_private_key,omitempty"`
	AlipayPublicKeyPEM string `json:"alipay_public_key,omitempty"`
	AppCertPEM         string `json:"app_cert,omitempty"`
	AlipayCertPEM      string `json:"alipay_cert,omitempty"`
	RootCertPEM        string `json:"alipay_root_cert,omitempty"`
}

// EncodeForSealing returns the plaintext to seal.
func (c AlipayCredentials) EncodeForSealing() ([]byte, error) {
	return json.Marshal(sealedCredentials(c))
}

// DecodeAlipayCredentials reads what EncodeForSealing wrote.
func DecodeAlipayCredentials(b []byte) (AlipayCredentials, error) {
	var s sealedCredentials
	if err := json.Unmarshal(b, &s); err != nil {
		return AlipayCredentials{}, fmt.Errorf("alipay credentials: %w", err)
	}
	return AlipayCredentials(s), nil
}

// AlipayCredentialsAAD is the additional data a tenant's sealed credentials are bound
// to: they open only for that tenant and field.
func AlipayCredentialsAAD(tenantID string) string {
	return "tenants/" + tenantID + "/alipay_credentials"
}

// App is a merchant account at a channel, resolved for a tenant's payments: an Alipay
// app, or a WeChat Pay merchant (mchid).
type App struct {
	// ID is what a payment opened on the account records (Payment.AlipayAppID): an
	// Alipay app_id (the default app's too, when the deployment names it), or a WeChat
	// Pay mchid.
	ID string
	// AppID and SellerID are what every notification about such a payment must carry
	// (Alipay: app_id and seller_id; WeChat Pay: appid and mchid); an empty one leaves
	// that check to the gateway.
	AppID, SellerID string
	Gateway         Gateway
}

// Gateways resolves the merchant account of a channel to use: for Alipay, a tenant's
// own app or the default app of the deployment for a tenant without one; for WeChat Pay,
// the deployment's merchant. A new payment is opened on its tenant's current account at
// its method's channel (For); everything done later about a payment or its refunds goes
// to the account it was opened on at its channel (ForPayment), wherever the tenant has
// moved since. A channel the deployment is not configured for is EUNPROCESSABLE.
type Gateways interface {
	// For returns the tenant's current account at ch, on which a new payment is opened.
	For(ctx context.Context, tenantID string, ch Channel) (App, error)
	// ForPayment returns the account a tenant's payment was opened on at ch, by the ID
	// it recorded. For Alipay: the default app's app_id, or "" (a payment recorded before
	// its app was), is the default app; any other is the tenant's current app or one it
	// has moved away from and whose keys it keeps. An account the tenant has no keys for
	// is ErrNotFound.
	ForPayment(ctx context.Context, tenantID string, ch Channel, appID string) (App, error)
	// ForApp returns the gateway of an account at ch, to verify a notification with that
	// account's key only: an Alipay app_id, or for WeChat Pay a mchid ("" for the
	// deployment's merchant, whose notify URL names none). An account no tenant uses or
	// keeps (nor the deployment) is ErrNotFound.
	ForApp(ctx context.Context, ch Channel, appID string) (Gateway, error)
	// ForNotification returns the gateway that verifies raw, a notification of ch as it
	// arrived or was recorded: that of the account it names (Alipay's form names its
	// app_id), or for a channel whose notifications name none, of the deployment's
	// account there. It is ForApp of that account; a body that names none where it must
	// is EINVALID.
	ForNotification(ctx context.Context, ch Channel, raw RawNotification) (Gateway, error)
}

// ChannelOffers is the capability of a Gateways that knows, with no call and no read,
// which channels the deployment is configured for: a checkout of a method whose channel
// is not is refused before anything is written. A Gateways without it offers every
// channel (a test's SingleGateway).
type ChannelOffers interface {
	// Offers is nil if the deployment is configured for ch, and an EUNPROCESSABLE error
	// that says so otherwise.
	Offers(ch Channel) error
}

// SingleGateway is Gateways with one account for every tenant and every channel.
type SingleGateway struct {
	Gateway Gateway
	// ID is the app's app_id; empty accepts notifications of any app_id and leaves the
	// app_id check to the gateway.
	ID string
	// Seller is the seller_id its notifications carry; empty leaves the check to the
	// gateway.
	Seller string
}

func (s SingleGateway) app() App {
	return App{ID: s.ID, AppID: s.ID, SellerID: s.Seller, Gateway: s.Gateway}
}

// For implements Gateways.
func (s SingleGateway) For(context.Context, string, Channel) (App, error) { return s.app(), nil }

// ForPayment implements Gateways: every payment is on the one app, whatever it recorded.
func (s SingleGateway) ForPayment(context.Context, string, Channel, string) (App, error) {
	return s.app(), nil
}

// ForApp implements Gateways.
func (s SingleGateway) ForApp(_ context.Context, _ Channel, appID string) (Gateway, error) {
	if s.ID != "" && appID != s.ID {
		return nil, &Error{Code: ENOTFOUND, Message: fmt.Sprintf("no Alipay app %q", appID), Err: ErrNotFound}
	}
	return s.Gateway, nil
}

// ForNotification implements Gateways: the one app, as ForApp of the app_id a form body
// names (Alipay's), if it names one.
func (s SingleGateway) ForNotification(ctx context.Context, ch Channel, raw RawNotification) (Gateway, error) {
	form, err := url.ParseQuery(string(raw.Body))
	if err != nil || !form.Has("app_id") {
		return s.Gateway, nil
	}
	gw, err := s.ForApp(ctx, ch, form.Get("app_id"))
	if err != nil {
		return nil, fmt.Errorf("app_id %q: %w", form.Get("app_id"), err)
	}
	return gw, nil
}

// KeptAlipayApp is an Alipay app a tenant has moved away from, with the keys it keeps
// for the payments opened on it.
type KeptAlipayApp struct {
	TenantID string
	AppID    string
	SellerID string
	// CredentialsSealed is sealed for AlipayCredentialsAAD(TenantID), as
	// Tenant.AlipayCredentialsSealed was while the app was current.
	CredentialsSealed string `json:"-"`
	// LeftAt is when the tenant last moved off the app.
	LeftAt time.Time
}

// DeploymentAppsTenant is the tenant id under which the deployment's own apps (the
// default app, ALIPAY_*, and every earlier one) are kept with the apps tenants have
// left: no tenant can have it (ValidateTenantID refuses it).
const DeploymentAppsTenant = ""
