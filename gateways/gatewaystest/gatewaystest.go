// Package gatewaystest gives tests of the Alipay app resolution an in-memory tenants
// store, a keyring, sealed keys and gateways that say which app and key they were built
// from.
package gatewaystest

import (
	"context"
	"sync"
	"testing"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/payment/paymenttest"
	"github.com/paykit/paykit/secrets"
)

// Tenants is an in-memory gateways.Store that keeps an app's keys when a tenant moves,
// as the store does.
type Tenants struct {
	mu   sync.Mutex
	ts   map[string]payment.Tenant
	kept []payment.KeptAlipayApp
}

// NewTenants returns an empty store.
func NewTenants() *Tenants { return &Tenants{ts: map[string]payment.Tenant{}} }

// GetTenant implements gateways.Store.
func (m *Tenants) GetTenant(_ context.Context, id string) (payment.Tenant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.ts[id]
	if !ok {
		return t, payment.ErrNotFound
	}
	return t, nil
}

// Tenant returns a stored tenant, the zero Tenant if there is none.
func (m *Tenants) Tenant(id string) payment.Tenant {
	t, _ := m.GetTenant(context.Background(), id)
	return t
}

// TenantsByAlipayApp implements gateways.Store.
func (m *Tenants) TenantsByAlipayApp(_ context.Context, appID string) ([]payment.Tenant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []payment.Tenant
	for _, t := range m.ts {
		if t.AlipayAppID == appID && t.AlipayCredentialsSealed != "" {
			out = append(out, t)
		}
	}
	return out, nil
}

// KeptAlipayApp implements gateways.Store.
func (m *Tenants) KeptAlipayApp(_ context.Context, tenantID, appID string) (payment.KeptAlipayApp, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range m.kept {
		if k.TenantID == tenantID && k.AppID == appID {
			return k, nil
		}
	}
	return payment.KeptAlipayApp{}, payment.ErrNotFound
}

// KeptAlipayAppsByApp implements gateways.Store.
func (m *Tenants) KeptAlipayAppsByApp(_ context.Context, appID string) ([]payment.KeptAlipayApp, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []payment.KeptAlipayApp
	for _, k := range m.kept {
		if k.AppID == appID {
			out = append(out, k)
		}
	}
	return out, nil
}

// Move puts a tenant on another app, keeping its old app's keys as the store does.
func (m *Tenants) Move(t payment.Tenant) {
	m.mu.Lock()
	old, ok := m.ts[t.ID]
	if ok && old.AlipayCredentialsSealed != "" && old.AlipayAppID != t.AlipayAppID {
		m.kept = append(m.kept, payment.KeptAlipayApp{TenantID: old.ID, AppID: old.AlipayAppID, SellerID: old.AlipaySeller,
			CredentialsSealed: old.AlipayCredentialsSealed})
	}
	m.mu.Unlock()
	m.Put(t)
}

// Put stores a tenant as it is, keeping nothing of its previous app.
func (m *Tenants) Put(t payment.Tenant) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ts[t.ID] = t
}

// Named is a gateway that says which app and key it was built from; its calls fail by
// name (paymenttest.Gateway).
type Named struct {
	paymenttest.Gateway
	App, Key string
}

// Bills is a Named gateway that serves bills, at "bill:<app>:<key>".
type Bills struct{ Named }

// BillDownloadURL implements payment.BillSource.
func (b Bills) BillDownloadURL(context.Context, string) (string, error) {
	return "bill:" + b.App + ":" + b.Key, nil
}

// Keyring returns a keyring of one new key.
func Keyring(tb testing.TB) *secrets.Keyring {
	tb.Helper()
	k, err := secrets.NewKey("k1")
	if err != nil {
		tb.Fatal(err)
	}
	kr, err := secrets.ParseKeyring(k)
	if err != nil {
		tb.Fatal(err)
	}
	return kr
}

// Seal seals for a tenant the credentials of app private key privateKey (and Alipay
// public key "pub-" + privateKey).
func Seal(tb testing.TB, kr *secrets.Keyring, tenantID, privateKey string) string {
	tb.Helper()
	b, _ := payment.AlipayCredentials{AppPrivateKeyPEM: privateKey, AlipayPublicKeyPEM: "pub-" + privateKey}.EncodeForSealing()
	s, err := kr.Seal(b, payment.AlipayCredentialsAAD(tenantID))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
