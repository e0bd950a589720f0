// Package tenants holds the rules of tenant administration (`paykit tenant`): which
// fields a re-run with fewer flags changes, when a tenant's own Alipay keys are accepted
// and how they are sealed, the webhook secret every tenant with a notify_url has (at
// least 32 bytes, sealed, never removed by a re-run) and its rotation, the API key a new
// tenant is given, and the re-encryption of every tenant's keys and secrets.
package tenants

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/secrets"
)

// ErrNoSecretsKey is returned when credentials must be sealed or opened without a keyring.
var ErrNoSecretsKey = errors.New("PAYKIT_SECRETS_KEYS is not set: generate a key with `paykit tenant -new-secrets-key` and set PAYKIT_SECRETS_KEYS=<id>:<key> for every paykit process")

// Change is what `paykit tenant` asks of one tenant, by the flags it was given.
type Change struct {
	ID, Name, APIKey, NotifyURL, WebhookSecret, AppID, Seller string
	AutoRefund                                                bool
	// Files with the tenant's own Alipay app keys; empty leaves the stored ones.
	AppPrivateKeyFile, AlipayPublicKeyFile, AppCertFile, AlipayCertFile, RootCertFile string
	ClearKeys                                                                         bool
	// Given names the flags on the command line (id, name, api-key, notify-url,
	// webhook-secret, alipay-app-id, alipay-seller-id, auto-refund-paid-after-close, …);
	// nil counts every field as given. A field whose flag is not given keeps the stored
	// value.
	Given map[string]bool
}

// Has reports whether the flag name was on the command line.
func (c Change) Has(name string) bool { return c.Given == nil || c.Given[name] }

// over fills the fields whose flags were not given from the stored tenant, so that a
// re-run with fewer flags (a key rotation, say) changes only what it names.
func (c Change) over(old payment.Tenant) Change {
	keep := func(flag string, dst *string, v string) {
		if !c.Has(flag) {
			*dst = v
		}
	}
	keep("name", &c.Name, old.Name)
	keep("notify-url", &c.NotifyURL, old.NotifyURL)
	keep("alipay-app-id", &c.AppID, old.AlipayAppID)
	keep("alipay-seller-id", &c.Seller, old.AlipaySeller)
	if !c.Has("auto-refund-paid-after-close") {
		c.AutoRefund = old.AutoRefundPaidAfterClose
	}
	return c
}

// Check refuses a change that no store could take (a malformed id, a short API key or
// webhook secret), and reads the key files; setKeys is false when none is given.
func (c Change) Check() (creds payment.AlipayCredentials, setKeys bool, err error) {
	if err := payment.ValidateTenantID(c.ID); err != nil {
		return creds, false, err
	}
	if c.Has("api-key") && len(c.APIKey) < 16 {
		return creds, false, errors.New("tenant: -api-key must be at least 16 characters")
	}
	if err := c.checkWebhookSecret(); err != nil {
		return creds, false, err
	}
	return c.Credentials()
}

// Credentials reads the key files; setKeys is false when none is given.
func (c Change) Credentials() (creds payment.AlipayCredentials, setKeys bool, err error) {
	files := []struct {
		path string
		dst  *string
	}{
		{c.AppPrivateKeyFile, &creds.AppPrivateKeyPEM}, {c.AlipayPublicKeyFile, &creds.AlipayPublicKeyPEM},
		{c.AppCertFile, &creds.AppCertPEM}, {c.AlipayCertFile, &creds.AlipayCertPEM}, {c.RootCertFile, &creds.RootCertPEM},
	}
	for _, file := range files {
		if file.path == "" {
			continue
		}
		b, err := os.ReadFile(file.path)
		if err != nil {
			return creds, false, fmt.Errorf("tenant: %w", err)
		}
		*file.dst, setKeys = string(b), true
	}
	if setKeys && c.ClearKeys {
		return creds, false, errors.New("tenant: -clear-alipay-keys and key files exclude each other")
	}
	if setKeys {
		if err := creds.Validate(); err != nil {
			return creds, false, fmt.Errorf("tenant: %w", err)
		}
	}
	return creds, setKeys, nil
}

// Issued is what Set generated for the tenant, to be shown once: stored only as a hash
// (the API key) or sealed (the webhook secret), neither can be read back. Empty fields
// were not generated.
type Issued struct {
	APIKey, WebhookSecret string
}

// Store is what tenant administration writes; *mysql.Store implements it.
type Store interface {
	GetTenant(ctx context.Context, id string) (payment.Tenant, error)
	UpsertTenant(ctx context.Context, t payment.Tenant) error
	SetTenantAlipayCredentials(ctx context.Context, tenantID, sealed string) error
	TenantsByAlipayApp(ctx context.Context, appID string) ([]payment.Tenant, error)
}

// URLChecker says where a tenant's webhooks may go (activities.WebhookPolicy).
type URLChecker interface {
	CheckURL(raw string) error
}

// Admin applies changes to the tenants of a deployment.
type Admin struct {
	Store Store
	// DefaultApp is the deployment's app_id (ALIPAY_APP_ID), whose keys are the
	// deployment's and never a tenant's.
	DefaultApp string
	// Keys reads the keyring of PAYKIT_SECRETS_KEYS when keys are sealed or compared; a
	// nil keyring means it is not set.
	Keys func() (*secrets.Keyring, error)
	// Build checks that an app's keys load by building its gateway.
	Build func(appID, sellerID string, creds payment.AlipayCredentials) (payment.Gateway, error)
	// Webhooks checks a tenant's notify URL.
	Webhooks URLChecker
}

// keyring is the keyring of Keys, ErrNoSecretsKey when there is none.
func (a Admin) keyring() (*secrets.Keyring, error) {
	kr, err := a.Keys()
	if err != nil {
		return nil, err
	}
	if kr == nil {
		return nil, ErrNoSecretsKey
	}
	return kr, nil
}

// Set creates or updates the tenant and, if setKeys, seals and stores its own app keys
// creds. The keys are checked by building the app's gateway before anything is written.
// A tenant may move to another app at any time: its payments keep the app they were
// opened on, and the store keeps the old app's keys (mysql.Store.UpsertTenant and
// SetTenantAlipayCredentials) in the transaction that moves it. A new tenant without an
// API key, or a tenant with a notify_url and no webhook secret, is given a random one,
// returned in Issued.
func (a Admin) Set(ctx context.Context, c Change, creds payment.AlipayCredentials, setKeys bool) (Issued, error) {
	var issued Issued
	if err := a.set(ctx, c, creds, setKeys, &issued); err != nil {
		return Issued{}, err
	}
	return issued, nil
}

func (a Admin) set(ctx context.Context, c Change, creds payment.AlipayCredentials, setKeys bool, issued *Issued) error {
	if err := c.checkWebhookSecret(); err != nil {
		return err
	}
	stored, err := a.Store.GetTenant(ctx, c.ID)
	exists := err == nil
	if err != nil && !errors.Is(err, payment.ErrNotFound) {
		return err
	}
	c, keyHash, err := identity(c, stored, exists, issued)
	if err != nil {
		return err
	}
	sealed, err := a.appKeys(ctx, c, creds, setKeys)
	if err != nil {
		return err
	}
	if err := a.clearKeys(ctx, c); err != nil {
		return err
	}
	if err := a.checkNotifyURL(c); err != nil {
		return err
	}
	plainSecret, sealedSecret, newSecret, err := a.webhookSecret(c, stored)
	if err != nil {
		return err
	}
	issued.WebhookSecret = newSecret
	// New keys go in with the app_id and seller, in one statement.
	return a.Store.UpsertTenant(ctx, payment.Tenant{
		ID: c.ID, Name: c.Name, APIKeyHash: keyHash, NotifyURL: c.NotifyURL,
		WebhookSecret: plainSecret, WebhookSecretSealed: sealedSecret,
		AlipayAppID: c.AppID, AlipaySeller: c.Seller, AutoRefundPaidAfterClose: c.AutoRefund, AlipayCredentialsSealed: sealed,
	})
}

// identity completes the change of a tenant stored or new: the stored fields a re-run
// leaves out, a new tenant's API key (issued), the hash of the API key and the name.
func identity(c Change, stored payment.Tenant, exists bool, issued *Issued) (Change, string, error) {
	keyHash := stored.APIKeyHash
	switch {
	case exists:
		c = c.over(stored)
	case c.APIKey == "":
		key, err := NewAPIKey()
		if err != nil {
			return c, "", err
		}
		c.APIKey = key
		issued.APIKey = key
	}
	if c.APIKey != "" {
		keyHash = api.HashAPIKey(c.APIKey)
	}
	if c.Name == "" {
		c.Name = c.ID
	}
	return c, keyHash, nil
}

// appKeys returns the tenant's own app keys sealed when setKeys, after checking they
// load; otherwise it checks that the app the tenant names goes with the keys it keeps.
func (a Admin) appKeys(ctx context.Context, c Change, creds payment.AlipayCredentials, setKeys bool) (string, error) {
	if !setKeys {
		return "", a.checkKeptKeys(ctx, c)
	}
	if c.AppID == a.DefaultApp {
		return "", fmt.Errorf("tenant: app %s is the default app, whose keys are the deployment's (ALIPAY_*); give -alipay-app-id and -alipay-seller-id of the tenant's own app with its key files", c.AppID)
	}
	if err := a.checkSharedApp(ctx, c, creds); err != nil {
		return "", err
	}
	if _, err := a.Build(c.AppID, c.Seller, creds); err != nil {
		if creds.CertMode() {
			return "", errors.New("tenant: the app private key or the certificates do not load (app certificate, Alipay certificate and Alipay root bundle, PEM)")
		}
		return "", errors.New("tenant: the app private key or the Alipay public key does not load (PKCS#1 or PKCS#8 PEM, PKIX public key)")
	}
	kr, err := a.keyring()
	if err != nil {
		return "", err
	}
	plain, err := creds.EncodeForSealing()
	if err != nil {
		return "", err
	}
	return kr.Seal(plain, payment.AlipayCredentialsAAD(c.ID))
}

// checkKeptKeys refuses a change that keeps the tenant's stored keys (or its lack of
// them) under an app they do not belong to.
func (a Admin) checkKeptKeys(ctx context.Context, c Change) error {
	if c.ClearKeys {
		return nil
	}
	old, err := a.Store.GetTenant(ctx, c.ID)
	if err != nil && !errors.Is(err, payment.ErrNotFound) {
		return err
	}
	switch {
	case old.AlipayCredentialsSealed == "" && c.AppID != a.DefaultApp:
		return fmt.Errorf("tenant: app %s is not the default app (ALIPAY_APP_ID=%s): give its keys with -alipay-app-private-key-file and -alipay-public-key-file", c.AppID, a.DefaultApp)
	case old.AlipayCredentialsSealed != "" && (c.AppID != old.AlipayAppID || c.Seller != old.AlipaySeller):
		return fmt.Errorf("tenant: its stored keys belong to app %s (seller %s): give -alipay-app-id and -alipay-seller-id as they are, new key files, or -clear-alipay-keys", old.AlipayAppID, old.AlipaySeller)
	}
	return nil
}

// clearKeys removes the tenant's own app keys when the change asks, which returns it to
// the default app.
func (a Admin) clearKeys(ctx context.Context, c Change) error {
	if !c.ClearKeys {
		return nil
	}
	if c.AppID != a.DefaultApp {
		return fmt.Errorf("tenant: without keys of its own the tenant uses the default app; set -alipay-app-id %s", a.DefaultApp)
	}
	// Cleared first: a crash before the upsert leaves a tenant naming its own app
	// without keys, which is refused, never paid through the default app.
	if err := a.Store.SetTenantAlipayCredentials(ctx, c.ID, ""); err != nil && !errors.Is(err, payment.ErrNotFound) {
		return err
	}
	return nil
}

// checkNotifyURL checks the tenant's webhook URL, if it has one.
func (a Admin) checkNotifyURL(c Change) error {
	if c.NotifyURL == "" {
		return nil
	}
	if err := a.Webhooks.CheckURL(c.NotifyURL); err != nil {
		return fmt.Errorf("tenant: -notify-url %q: %w (PAYKIT_WEBHOOK_ALLOW_HTTP and PAYKIT_WEBHOOK_ALLOW_PRIVATE allow http and internal hosts, for development)", c.NotifyURL, err)
	}
	return nil
}

// checkSharedApp refuses keys for an app_id that another tenant holds with other keys or
// another seller: notifications of that app could no longer be verified for either.
func (a Admin) checkSharedApp(ctx context.Context, c Change, creds payment.AlipayCredentials) error {
	others, err := a.Store.TenantsByAlipayApp(ctx, c.AppID)
	if err != nil {
		return err
	}
	for _, o := range others {
		if o.ID == c.ID || o.AlipayCredentialsSealed == "" {
			continue
		}
		same := o.AlipaySeller == c.Seller
		if same {
			kr, err := a.keyring()
			if err != nil {
				return err
			}
			plain, err := kr.Open(o.AlipayCredentialsSealed, payment.AlipayCredentialsAAD(o.ID))
			if err != nil {
				return fmt.Errorf("tenant: app %s is held by tenant %s, whose keys cannot be opened to compare: %w", c.AppID, o.ID, err)
			}
			theirs, err := payment.DecodeAlipayCredentials(plain)
			if err != nil {
				return fmt.Errorf("tenant: app %s is held by tenant %s: %w", c.AppID, o.ID, err)
			}
			same = theirs == creds
		}
		if !same {
			return fmt.Errorf("tenant: app %s is already held by tenant %s with other keys or another seller; tenants share an app only with the same keys and seller", c.AppID, o.ID)
		}
	}
	return nil
}
