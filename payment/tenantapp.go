package payment

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
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

// Gateways resolves the Alipay app to use: a tenant's own app, or the default app of
// the deployment for a tenant without one.
type Gateways interface {
	// For returns the gateway of a tenant's payments.
	For(ctx context.Context, tenantID string) (Gateway, error)
	// ForApp returns the gateway of an Alipay app_id, to verify a notification with that
	// app's key only. An app_id no tenant uses (nor the default app) is ErrNotFound.
	ForApp(ctx context.Context, appID string) (Gateway, error)
	// AppID returns the app_id a tenant's payments go through, which every notification
	// about them must carry; empty means the gateway alone checks it.
	AppID(t Tenant) string
}

// SingleGateway is Gateways with one app for every tenant.
type SingleGateway struct {
	Gateway Gateway
	// ID is the app's app_id; empty accepts notifications of any app_id and leaves the
	// app_id check to the gateway.
	ID string
}

// For implements Gateways.
func (s SingleGateway) For(context.Context, string) (Gateway, error) { return s.Gateway, nil }

// ForApp implements Gateways.
func (s SingleGateway) ForApp(_ context.Context, appID string) (Gateway, error) {
	if s.ID != "" && appID != s.ID {
		return nil, &Error{Code: ENOTFOUND, Message: fmt.Sprintf("no Alipay app %q", appID), Err: ErrNotFound}
	}
	return s.Gateway, nil
}

// AppID implements Gateways.
func (s SingleGateway) AppID(t Tenant) string {
	if s.ID != "" {
		return s.ID
	}
	return t.AlipayAppID
}
