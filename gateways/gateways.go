// Package gateways resolves the merchant account of a tenant, of a payment and of a
// notification at each channel (Channels): for Alipay, the deployment's default app
// (current, or an earlier one whose keys the deployment kept), or a tenant's own app
// (current, or one it has left and keeps the keys of), whose gateway is built from its
// sealed keys once and cached until they change (Resolver); for WeChat Pay, the
// deployment's merchant (Merchant, WechatPay).
package gateways

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/paykit/paykit/alipay"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/secrets"
)

// Store is what the resolver reads; *mysql.Store implements it.
type Store interface {
	GetTenant(ctx context.Context, id string) (payment.Tenant, error)
	// TenantsByAlipayApp returns the tenants with their own keys for an app_id.
	TenantsByAlipayApp(ctx context.Context, appID string) ([]payment.Tenant, error)
	// KeptAlipayApp returns the keys a tenant keeps of an app it has left.
	KeptAlipayApp(ctx context.Context, tenantID, appID string) (payment.KeptAlipayApp, error)
	// KeptAlipayAppsByApp returns the kept keys of an app_id, of every tenant that left it.
	KeptAlipayAppsByApp(ctx context.Context, appID string) ([]payment.KeptAlipayApp, error)
}

// Build makes the gateway of one Alipay app from its keys.
type Build func(appID, sellerID string, creds payment.AlipayCredentials) (payment.Gateway, error)

// TenantTTL is how long a tenant read for its gateway is reused: every Alipay call of a
// payment resolves its tenant, and a change of a tenant's keys takes effect within it. A
// stale read is harmless after a move: a new payment opened on the old app records it,
// and the old app's keys are kept.
const TenantTTL = 5 * time.Second

// Resolver is the Alipay Channel of payment.Gateways (see Channels), over the tenants table and the apps tenants have left
// (tenant_alipay_apps): a tenant's own app, current or kept, gets a gateway built once
// and cached until its keys change; the default app (ALIPAY_* in the environment) serves
// every tenant without keys of its own, and every payment that recorded it (its app_id,
// or "" for one recorded before migration 0032).
type Resolver struct {
	store     Store
	keys      *secrets.Keyring // nil: no PAYKIT_SECRETS_KEYS, so no tenant can have its own app
	build     Build
	def       payment.Gateway
	defApp    string
	defSeller string

	mu    sync.Mutex
	built map[string]builtGateway // tenant id, or tenant id and kept app id → the app's gateway

	tenants *ttlCache[payment.Tenant]        // tenant id → its last read
	kept    *ttlCache[payment.KeptAlipayApp] // tenant id and app id → its last read
}

type builtGateway struct {
	// version is a hash of the app_id, seller_id and sealed credentials the gateway was
	// built from: any change to them (new keys, a re-encryption) builds a new one.
	version string
	// app is a hash of the plaintext app (app_id, seller, keys), the same for two tenants
	// that share one app.
	app string
	gw  payment.Gateway
}

// New returns the resolver of the tenants' apps in store, whose keys open with keys (nil:
// no tenant has an app of its own); def is the gateway of the default app defApp.
func New(store Store, keys *secrets.Keyring, build Build, def payment.Gateway, defApp, defSeller string) *Resolver {
	return &Resolver{store: store, keys: keys, build: build, def: def, defApp: defApp, defSeller: defSeller,
		built: map[string]builtGateway{}, tenants: newTTLCache[payment.Tenant](TenantTTL), kept: newTTLCache[payment.KeptAlipayApp](TenantTTL)}
}

// SetTTL sets how long a read of a tenant or of its kept app is reused (TenantTTL unless
// set); zero reads the store at every call.
func (g *Resolver) SetTTL(d time.Duration) {
	g.tenants.setTTL(d)
	g.kept.setTTL(d)
}

// Default is the gateway of the deployment's default app.
func (g *Resolver) Default() payment.Gateway { return g.def }

// defaultApp is the deployment's app. A payment opened on it records its app_id, so
// that a later change of ALIPAY_APP_ID does not take the payment along.
func (g *Resolver) defaultApp() payment.App {
	return payment.App{ID: g.defApp, AppID: g.defApp, SellerID: g.defSeller, Gateway: g.def}
}

// For implements Channel.
func (g *Resolver) For(ctx context.Context, tenantID string) (payment.App, error) {
	t, err := g.tenant(ctx, tenantID)
	if err != nil {
		return payment.App{}, fmt.Errorf("gateway of tenant %s: %w", tenantID, err)
	}
	if t.AlipayAppID == g.defApp {
		// The default app's keys are the deployment's (ALIPAY_*), never a tenant's copy:
		// keys a tenant supplies must not sign or verify for the default app's merchant.
		return g.defaultApp(), nil
	}
	if t.AlipayCredentialsSealed == "" {
		if t.AlipayAppID != "" {
			// Its money must not go to the default app's merchant.
			return payment.App{}, fmt.Errorf("tenant %s names alipay app %s but has no keys for it; set them with paykit tenant", t.ID, t.AlipayAppID)
		}
		return g.defaultApp(), nil
	}
	c, err := g.tenantGateway(t)
	if err != nil {
		return payment.App{}, err
	}
	return payment.App{ID: t.AlipayAppID, AppID: t.AlipayAppID, SellerID: t.AlipaySeller, Gateway: c.gw}, nil
}

// ForPayment implements Channel. The tenant's current app is looked at first:
// a kept copy of an app the tenant has come back to may hold older keys.
func (g *Resolver) ForPayment(ctx context.Context, tenantID, appID string) (payment.App, error) {
	if appID == "" || appID == g.defApp {
		// As in For: the default app is always the deployment's, with its keys. "" is a
		// payment recorded on it before its app was recorded (migration 0032).
		return g.defaultApp(), nil
	}
	t, err := g.tenant(ctx, tenantID)
	if err != nil {
		return payment.App{}, fmt.Errorf("gateway of tenant %s app %s: %w", tenantID, appID, err)
	}
	if t.AlipayAppID == appID && t.AlipayCredentialsSealed != "" {
		c, err := g.tenantGateway(t)
		if err != nil {
			return payment.App{}, err
		}
		return payment.App{ID: appID, AppID: appID, SellerID: t.AlipaySeller, Gateway: c.gw}, nil
	}
	k, err := g.keptApp(ctx, tenantID, appID)
	if errors.Is(err, payment.ErrNotFound) {
		// An earlier default app of the deployment (ALIPAY_APP_ID has changed since the
		// payment was opened on it), kept with its keys by the processes that ran on it.
		k, err = g.keptApp(ctx, payment.DeploymentAppsTenant, appID)
	}
	if err != nil {
		return payment.App{}, fmt.Errorf("gateway of tenant %s app %s: %w", tenantID, appID, err)
	}
	c, err := g.keptGateway(k)
	if err != nil {
		return payment.App{}, err
	}
	return payment.App{ID: appID, AppID: appID, SellerID: k.SellerID, Gateway: c.gw}, nil
}

// ForApp implements Channel. Tenants that share an app_id with keys of their own
// must hold the same app; anything else is refused rather than guessed. The app's current
// holders are asked first; only an app no tenant holds any more is verified with the
// keys a tenant kept of it, so that the notifications of its old payments still verify
// after the move.
func (g *Resolver) ForApp(ctx context.Context, appID string) (payment.Gateway, error) {
	if appID != "" && appID == g.defApp {
		// A notification for the default app is verified with the deployment's Alipay
		// key only, whatever keys a tenant may have stored for that app_id.
		return g.def, nil
	}
	found, err := g.holdersGateway(ctx, appID)
	if err != nil {
		return nil, err
	}
	if found == nil && appID != "" {
		if found, err = g.keptAppGateway(ctx, appID); err != nil {
			return nil, err
		}
	}
	if found == nil {
		return nil, &payment.Error{Code: payment.ENOTFOUND, Message: fmt.Sprintf("no tenant uses alipay app %q", appID), Err: payment.ErrNotFound}
	}
	return found.gw, nil
}

// ForNotification implements Channel: the app_id the notification's form names, and only
// that app's key verifies it (ForApp). A body that is not a form is refused before any
// key is looked up.
func (g *Resolver) ForNotification(ctx context.Context, raw payment.RawNotification) (payment.Gateway, error) {
	form, err := alipay.ParseNotificationBody(raw.Body)
	if err != nil {
		return nil, err
	}
	gw, err := g.ForApp(ctx, form.Get("app_id"))
	if err != nil {
		return nil, fmt.Errorf("app_id %q: %w", form.Get("app_id"), err)
	}
	return gw, nil
}

// holdersGateway is the gateway of the tenants holding appID with keys of their own, nil
// if none does.
func (g *Resolver) holdersGateway(ctx context.Context, appID string) (*builtGateway, error) {
	ts, err := g.store.TenantsByAlipayApp(ctx, appID)
	if err != nil {
		return nil, fmt.Errorf("gateway of app %s: %w", appID, err)
	}
	var found *builtGateway
	for _, t := range ts {
		if t.AlipayCredentialsSealed == "" {
			continue
		}
		c, err := g.tenantGateway(t)
		if err != nil {
			return nil, err
		}
		if found, err = agree(found, c, appID); err != nil {
			return nil, err
		}
	}
	return found, nil
}

// keptAppGateway is the gateway of the keys tenants kept of appID, nil if none did.
func (g *Resolver) keptAppGateway(ctx context.Context, appID string) (*builtGateway, error) {
	ks, err := g.store.KeptAlipayAppsByApp(ctx, appID)
	if err != nil {
		return nil, fmt.Errorf("gateway of app %s: %w", appID, err)
	}
	var found *builtGateway
	for _, k := range ks {
		c, err := g.keptGateway(k)
		if err != nil {
			return nil, err
		}
		if found, err = agree(found, c, appID); err != nil {
			return nil, err
		}
	}
	return found, nil
}

// agree returns c if it is the same app as found (or found is nil), and refuses an app_id
// that tenants configure with different keys or sellers.
func agree(found *builtGateway, c builtGateway, appID string) (*builtGateway, error) {
	if found != nil && found.app != c.app {
		return nil, payment.Errorf(payment.EUNPROCESSABLE, "alipay app %s is configured with different keys or sellers by several tenants", appID)
	}
	return &c, nil
}

// tenant reads a tenant, reusing a recent read.
func (g *Resolver) tenant(ctx context.Context, id string) (payment.Tenant, error) {
	return g.tenants.get(id, func() (payment.Tenant, error) { return g.store.GetTenant(ctx, id) })
}

// keptApp reads the keys a tenant kept of an app, reusing a recent read: every Alipay
// call of an old app's payment resolves them.
func (g *Resolver) keptApp(ctx context.Context, tenantID, appID string) (payment.KeptAlipayApp, error) {
	return g.kept.get(keptKey(tenantID, appID), func() (payment.KeptAlipayApp, error) {
		return g.store.KeptAlipayApp(ctx, tenantID, appID)
	})
}

func (g *Resolver) tenantGateway(t payment.Tenant) (builtGateway, error) {
	return g.appGateway(t.ID, t.ID, t.AlipayAppID, t.AlipaySeller, t.AlipayCredentialsSealed)
}

// keptGateway is the gateway of an app a tenant has left, from the keys it kept.
func (g *Resolver) keptGateway(k payment.KeptAlipayApp) (builtGateway, error) {
	return g.appGateway(keptKey(k.TenantID, k.AppID), k.TenantID, k.AppID, k.SellerID, k.CredentialsSealed)
}

func keptKey(tenantID, appID string) string { return tenantID + "\x00" + appID }

// appGateway builds, or finds among those built under key, the gateway of a tenant's
// app from its sealed keys.
func (g *Resolver) appGateway(key, tenantID, appID, seller, sealed string) (builtGateway, error) {
	version := digest(appID, seller, sealed)
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.built[key]; ok && c.version == version {
		return c, nil
	}
	if tenantID == payment.DeploymentAppsTenant && sealed == "" {
		return builtGateway{}, fmt.Errorf("alipay app %s was the deployment's default app, but its keys were not kept (PAYKIT_SECRETS_KEYS was not set): start a process with its ALIPAY_* and PAYKIT_SECRETS_KEYS once", appID)
	}
	if g.keys == nil {
		return builtGateway{}, fmt.Errorf("%s has its own alipay app but PAYKIT_SECRETS_KEYS is not set", owner(tenantID))
	}
	if appID == "" || (seller == "" && tenantID != payment.DeploymentAppsTenant) {
		return builtGateway{}, fmt.Errorf("%s has alipay keys but no app_id or seller_id", owner(tenantID))
	}
	plain, err := g.keys.Open(sealed, payment.AlipayCredentialsAAD(tenantID))
	if err != nil {
		return builtGateway{}, fmt.Errorf("%s alipay app %s credentials: %w", owner(tenantID), appID, err)
	}
	creds, err := payment.DecodeAlipayCredentials(plain)
	if err != nil {
		return builtGateway{}, fmt.Errorf("%s: %w", owner(tenantID), err)
	}
	gw, err := g.build(appID, seller, creds)
	if err != nil {
		// The error of a key parser may quote the key; never pass it on.
		return builtGateway{}, fmt.Errorf("%s alipay app %s: the keys do not load", owner(tenantID), appID)
	}
	c := builtGateway{version: version, app: digest(appID, seller, string(plain)), gw: gw}
	if len(g.built) >= maxCached {
		clear(g.built)
	}
	g.built[key] = c
	return c, nil
}

// owner names whose keys an app's are in errors: a tenant, or the deployment.
func owner(tenantID string) string {
	if tenantID == payment.DeploymentAppsTenant {
		return "the deployment"
	}
	return "tenant " + tenantID
}

func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}
