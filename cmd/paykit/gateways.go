package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/secrets"
)

// tenantApps is what the gateway resolver reads; *mysql.Store implements it.
type tenantApps interface {
	GetTenant(ctx context.Context, id string) (payment.Tenant, error)
	// TenantsByAlipayApp returns the tenants with their own keys for an app_id.
	TenantsByAlipayApp(ctx context.Context, appID string) ([]payment.Tenant, error)
}

// buildGateway makes the gateway of one Alipay app.
type buildGateway func(appID, sellerID string, creds payment.AlipayCredentials) (payment.Gateway, error)

// gateways is payment.Gateways over the tenants table: a tenant with sealed credentials
// gets a gateway of its own app, built once and cached until its app changes; every
// other tenant gets the default app (ALIPAY_* in the environment).
type gateways struct {
	store  tenantApps
	keys   *secrets.Keyring // nil: no PAYKIT_SECRETS_KEYS, so no tenant can have its own app
	build  buildGateway
	def    payment.Gateway
	defApp string

	mu      sync.Mutex
	cache   map[string]cachedGateway // tenant id → its app's gateway
	tenants map[string]cachedTenant  // tenant id → its last read
	ttl     time.Duration            // how long a tenant read is reused (tenantTTL)
}

type cachedGateway struct {
	// version is a hash of the app_id, seller_id and sealed credentials the gateway was
	// built from: any change to them (new keys, a re-encryption) builds a new one.
	version string
	// app is a hash of the plaintext app (app_id, seller, keys), the same for two tenants
	// that share one app.
	app string
	gw  payment.Gateway
}

var _ payment.Gateways = (*gateways)(nil)

func newGatewayResolver(store tenantApps, keys *secrets.Keyring, build buildGateway, def payment.Gateway, defApp string) *gateways {
	return &gateways{store: store, keys: keys, build: build, def: def, defApp: defApp,
		cache: map[string]cachedGateway{}, tenants: map[string]cachedTenant{}, ttl: tenantTTL}
}

// For implements payment.Gateways.
func (g *gateways) For(ctx context.Context, tenantID string) (payment.Gateway, error) {
	t, err := g.tenant(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("gateway of tenant %s: %w", tenantID, err)
	}
	if t.AlipayAppID == g.defApp {
		// The default app's keys are the deployment's (ALIPAY_*), never a tenant's copy:
		// keys a tenant supplies must not sign or verify for the default app's merchant.
		return g.def, nil
	}
	if t.AlipayCredentialsSealed == "" {
		if t.AlipayAppID != "" {
			// Its money must not go to the default app's merchant.
			return nil, fmt.Errorf("tenant %s names alipay app %s but has no keys for it; set them with paykit tenant", t.ID, t.AlipayAppID)
		}
		return g.def, nil
	}
	c, err := g.tenantGateway(t)
	if err != nil {
		return nil, err
	}
	return c.gw, nil
}

// ForApp implements payment.Gateways. Tenants that share an app_id with keys of their own
// must hold the same app; anything else is refused rather than guessed.
func (g *gateways) ForApp(ctx context.Context, appID string) (payment.Gateway, error) {
	if appID != "" && appID == g.defApp {
		// A notification for the default app is verified with the deployment's Alipay
		// key only, whatever keys a tenant may have stored for that app_id.
		return g.def, nil
	}
	ts, err := g.store.TenantsByAlipayApp(ctx, appID)
	if err != nil {
		return nil, fmt.Errorf("gateway of app %s: %w", appID, err)
	}
	var found *cachedGateway
	for _, t := range ts {
		if t.AlipayCredentialsSealed == "" {
			continue
		}
		c, err := g.tenantGateway(t)
		if err != nil {
			return nil, err
		}
		if found != nil && found.app != c.app {
			return nil, payment.Errorf(payment.EUNPROCESSABLE, "alipay app %s is configured with different keys or sellers by several tenants", appID)
		}
		found = &c
	}
	switch {
	case found != nil:
		return found.gw, nil
	case appID != "" && appID == g.defApp:
		return g.def, nil
	default:
		return nil, &payment.Error{Code: payment.ENOTFOUND, Message: fmt.Sprintf("no tenant uses alipay app %q", appID), Err: payment.ErrNotFound}
	}
}

// AppID implements payment.Gateways.
func (g *gateways) AppID(t payment.Tenant) string {
	if t.AlipayCredentialsSealed != "" && t.AlipayAppID != "" {
		return t.AlipayAppID
	}
	return g.defApp
}

// tenantTTL is how long a tenant read for its gateway is reused: every Alipay call of a
// payment resolves its tenant, and a change of a tenant's keys takes effect within it.
// (Moving a tenant to another app is refused while it has open payments, see
// checkAppChange, so a stale read never names another app for a live trade.)
const tenantTTL = 5 * time.Second

// tenant reads a tenant, reusing a read younger than tenantTTL.
func (g *gateways) tenant(ctx context.Context, id string) (payment.Tenant, error) {
	g.mu.Lock()
	if c, ok := g.tenants[id]; ok && time.Since(c.at) < g.ttl {
		g.mu.Unlock()
		return c.t, nil
	}
	g.mu.Unlock()
	t, err := g.store.GetTenant(ctx, id)
	if err != nil {
		return t, err
	}
	g.mu.Lock()
	if len(g.tenants) >= maxCachedTenants {
		clear(g.tenants)
	}
	g.tenants[id] = cachedTenant{t: t, at: time.Now()}
	g.mu.Unlock()
	return t, nil
}

// maxCachedTenants bounds the tenant reads kept; past it they are all dropped.
const maxCachedTenants = 10000

type cachedTenant struct {
	t  payment.Tenant
	at time.Time
}

func (g *gateways) tenantGateway(t payment.Tenant) (cachedGateway, error) {
	version := digest(t.AlipayAppID, t.AlipaySeller, t.AlipayCredentialsSealed)
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.cache[t.ID]; ok && c.version == version {
		return c, nil
	}
	if g.keys == nil {
		return cachedGateway{}, fmt.Errorf("tenant %s has its own alipay app but PAYKIT_SECRETS_KEYS is not set", t.ID)
	}
	if t.AlipayAppID == "" || t.AlipaySeller == "" {
		return cachedGateway{}, fmt.Errorf("tenant %s has alipay keys but no app_id or seller_id", t.ID)
	}
	plain, err := g.keys.Open(t.AlipayCredentialsSealed, payment.AlipayCredentialsAAD(t.ID))
	if err != nil {
		return cachedGateway{}, fmt.Errorf("tenant %s alipay credentials: %w", t.ID, err)
	}
	creds, err := payment.DecodeAlipayCredentials(plain)
	if err != nil {
		return cachedGateway{}, fmt.Errorf("tenant %s: %w", t.ID, err)
	}
	gw, err := g.build(t.AlipayAppID, t.AlipaySeller, creds)
	if err != nil {
		// The error of a key parser may quote the key; never pass it on.
		return cachedGateway{}, fmt.Errorf("tenant %s alipay app %s: the keys do not load", t.ID, t.AlipayAppID)
	}
	c := cachedGateway{version: version, app: digest(t.AlipayAppID, t.AlipaySeller, string(plain)), gw: gw}
	g.cache[t.ID] = c
	return c, nil
}

func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// errNoSecretsKey is returned when credentials must be sealed without a keyring.
var errNoSecretsKey = errors.New("PAYKIT_SECRETS_KEYS is not set: generate a key with `paykit tenant -new-secrets-key` and set PAYKIT_SECRETS_KEYS=<id>:<key> for every paykit process")
