package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/secrets"
)

type memTenants struct {
	mu   sync.Mutex
	ts   map[string]payment.Tenant
	kept []payment.KeptAlipayApp
}

func (m *memTenants) GetTenant(_ context.Context, id string) (payment.Tenant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.ts[id]
	if !ok {
		return t, payment.ErrNotFound
	}
	return t, nil
}

func (m *memTenants) TenantsByAlipayApp(_ context.Context, appID string) ([]payment.Tenant, error) {
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

func (m *memTenants) KeptAlipayApp(_ context.Context, tenantID, appID string) (payment.KeptAlipayApp, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range m.kept {
		if k.TenantID == tenantID && k.AppID == appID {
			return k, nil
		}
	}
	return payment.KeptAlipayApp{}, payment.ErrNotFound
}

func (m *memTenants) KeptAlipayAppsByApp(_ context.Context, appID string) ([]payment.KeptAlipayApp, error) {
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

// move puts a tenant on another app, keeping its old app's keys as the store does.
func (m *memTenants) move(t payment.Tenant) {
	m.mu.Lock()
	old, ok := m.ts[t.ID]
	if ok && old.AlipayCredentialsSealed != "" && old.AlipayAppID != t.AlipayAppID {
		m.kept = append(m.kept, payment.KeptAlipayApp{TenantID: old.ID, AppID: old.AlipayAppID, SellerID: old.AlipaySeller,
			CredentialsSealed: old.AlipayCredentialsSealed})
	}
	m.mu.Unlock()
	m.put(t)
}

func (m *memTenants) put(t payment.Tenant) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ts[t.ID] = t
}

// namedGateway is a gateway that says which app and key it was built from.
type namedGateway struct {
	payment.Gateway
	app, key string
}

func testKeyring(tb testing.TB) *secrets.Keyring {
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

func sealFor(tb testing.TB, kr *secrets.Keyring, tenantID, privateKey string) string {
	tb.Helper()
	b, _ := payment.AlipayCredentials{AppPrivateKeyPEM: privateKey, AlipayPublicKeyPEM: "pub-" + privateKey}.EncodeForSealing()
	s, err := kr.Seal(b, payment.AlipayCredentialsAAD(tenantID))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func TestGatewaysResolveEachTenantsApp(t *testing.T) {
	ctx := context.Background()
	kr := testKeyring(t)
	store := &memTenants{ts: map[string]payment.Tenant{}}
	builds := 0
	build := func(appID, seller string, c payment.AlipayCredentials) (payment.Gateway, error) {
		builds++
		if c.AppPrivateKeyPEM == "unloadable" {
			return nil, errors.New("parse error quoting unloadable")
		}
		return namedGateway{app: appID, key: c.AppPrivateKeyPEM}, nil
	}
	def := namedGateway{app: "default"}
	g := newGatewayResolver(store, kr, build, def, "2021default", "2088default")
	g.ttl = 0 // every call reads the tenant (TestGatewaysReuseATenantReadBriefly covers the reuse)

	store.put(payment.Tenant{ID: "plain", AlipayAppID: "2021default", AlipaySeller: "2088"})
	store.put(payment.Tenant{ID: "a", AlipayAppID: "2021A", AlipaySeller: "2088A", AlipayCredentialsSealed: sealFor(t, kr, "a", "key-a")})
	store.put(payment.Tenant{ID: "b", AlipayAppID: "2021B", AlipaySeller: "2088B", AlipayCredentialsSealed: sealFor(t, kr, "b", "key-b")})

	gw := func(id string) namedGateway {
		t.Helper()
		got, err := g.For(ctx, id)
		if err != nil {
			t.Fatalf("For(%s): %v", id, err)
		}
		return got.Gateway.(namedGateway)
	}
	if got := gw("plain"); got.app != "default" {
		t.Fatalf("a tenant without keys: %+v", got)
	}
	if got := gw("a"); got.app != "2021A" || got.key != "key-a" {
		t.Fatalf("tenant a: %+v", got)
	}
	if got := gw("b"); got.app != "2021B" || got.key != "key-b" {
		t.Fatalf("tenant b: %+v", got)
	}
	gw("a")
	gw("b")
	if builds != 2 {
		t.Fatalf("%d builds for two apps, want 2 (cached)", builds)
	}

	// New keys for a: the next call builds its new gateway.
	store.put(payment.Tenant{ID: "a", AlipayAppID: "2021A", AlipaySeller: "2088A", AlipayCredentialsSealed: sealFor(t, kr, "a", "key-a2")})
	if got := gw("a"); got.key != "key-a2" || builds != 3 {
		t.Fatalf("after new keys: %+v, %d builds", got, builds)
	}

	// Notifications: by app_id, the one app's gateway only.
	for app, want := range map[string]string{"2021A": "key-a2", "2021B": "key-b", "2021default": ""} {
		got, err := g.ForApp(ctx, app)
		if err != nil || got.(namedGateway).key != want {
			t.Fatalf("ForApp(%s) = %+v, %v", app, got, err)
		}
	}
	if _, err := g.ForApp(ctx, "2021unknown"); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("unknown app: %v", err)
	}
	if _, err := g.ForApp(ctx, ""); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("empty app_id: %v", err)
	}
	if app, err := g.For(ctx, "plain"); err != nil || app.ID != "2021default" || app.AppID != "2021default" || app.SellerID != "2088default" {
		t.Fatalf("a tenant without keys is on the default app, recorded by its app_id: %+v, %v", app, err)
	}
	if app, err := g.For(ctx, "a"); err != nil || app.ID != "2021A" || app.AppID != "2021A" || app.SellerID != "2088A" {
		t.Fatalf("tenant a's payments record its own app: %+v, %v", app, err)
	}

	// b's ciphertext copied onto c does not open for c.
	store.put(payment.Tenant{ID: "c", AlipayAppID: "2021B", AlipaySeller: "2088B", AlipayCredentialsSealed: sealFor(t, kr, "b", "key-b")})
	if _, err := g.For(ctx, "c"); err == nil {
		t.Fatal("a ciphertext moved to another tenant opened")
	}
	// Two tenants holding one app_id with different keys: refused, not guessed.
	store.put(payment.Tenant{ID: "c", AlipayAppID: "2021B", AlipaySeller: "2088B", AlipayCredentialsSealed: sealFor(t, kr, "c", "key-other")})
	if _, err := g.ForApp(ctx, "2021B"); err == nil {
		t.Fatal("an app with two sets of keys resolved")
	}
	// The same keys at two tenants are one app.
	store.put(payment.Tenant{ID: "c", AlipayAppID: "2021B", AlipaySeller: "2088B", AlipayCredentialsSealed: sealFor(t, kr, "c", "key-b")})
	if got, err := g.ForApp(ctx, "2021B"); err != nil || got.(namedGateway).key != "key-b" {
		t.Fatalf("shared app: %+v, %v", got, err)
	}
	// Keys that do not load: the error does not quote them.
	store.put(payment.Tenant{ID: "d", AlipayAppID: "2021D", AlipaySeller: "2088D", AlipayCredentialsSealed: sealFor(t, kr, "d", "unloadable")})
	if _, err := g.For(ctx, "d"); err == nil || strings.Contains(err.Error(), "unloadable") {
		t.Fatalf("unloadable keys: %v", err)
	}
	// A tenant naming another app than the default without keys is refused, never sent
	// through the default app.
	store.put(payment.Tenant{ID: "nokeys", AlipayAppID: "2021other", AlipaySeller: "2088"})
	if _, err := g.For(ctx, "nokeys"); err == nil {
		t.Fatal("a tenant of another app without keys went through the default app")
	}
	// Without the keyring, a tenant with its own app is an error, never the default app.
	nokeys := newGatewayResolver(store, nil, build, def, "2021default", "2088default")
	if _, err := nokeys.For(ctx, "b"); err == nil {
		t.Fatal("resolved a sealed app without the keyring")
	}
}

// TestReencryptTenants: after a rotation, every tenant's credentials are sealed under
// the new key, still open for their tenant, and a second run changes nothing.
func TestReencryptTenants(t *testing.T) {
	ctx := context.Background()
	oldKey, _ := secrets.NewKey("old")
	oldRing, _ := secrets.ParseKeyring(oldKey)
	st := &memResealer{ts: map[string]payment.Tenant{}}
	for _, id := range []string{"a", "b"} {
		st.ts[id] = payment.Tenant{ID: id, AlipayCredentialsSealed: sealFor(t, oldRing, id, "key-"+id)}
	}
	// a has left an app; its kept keys are re-encrypted too.
	st.kept = []payment.KeptAlipayApp{{TenantID: "a", AppID: "2021old", CredentialsSealed: sealFor(t, oldRing, "a", "key-a-old")}}
	newKey, _ := secrets.NewKey("new")
	ring, err := secrets.ParseKeyring(newKey + "," + oldKey)
	if err != nil {
		t.Fatal(err)
	}
	changed, total, err := reencryptTenants(ctx, st, ring)
	if err != nil || changed != 3 || total != 3 {
		t.Fatalf("reencrypt = %d of %d, %v", changed, total, err)
	}
	newOnly, _ := secrets.ParseKeyring(newKey)
	for id, tn := range st.ts {
		b, err := newOnly.Open(tn.AlipayCredentialsSealed, payment.AlipayCredentialsAAD(id))
		if err != nil {
			t.Fatalf("%s after re-encryption: %v", id, err)
		}
		if c, _ := payment.DecodeAlipayCredentials(b); c.AppPrivateKeyPEM != "key-"+id {
			t.Fatalf("%s: wrong credentials", id)
		}
	}
	b, err := newOnly.Open(st.kept[0].CredentialsSealed, payment.AlipayCredentialsAAD("a"))
	if err != nil {
		t.Fatalf("a's kept app after re-encryption: %v", err)
	}
	if c, _ := payment.DecodeAlipayCredentials(b); c.AppPrivateKeyPEM != "key-a-old" {
		t.Fatal("a's kept app: wrong credentials")
	}
	if changed, _, err := reencryptTenants(ctx, st, ring); err != nil || changed != 0 {
		t.Fatalf("second run changed %d, %v", changed, err)
	}
}

type memResealer struct {
	ts   map[string]payment.Tenant
	kept []payment.KeptAlipayApp
}

func (m *memResealer) KeptAlipayApps(_ context.Context, afterTenant, afterApp string) ([]payment.KeptAlipayApp, error) {
	var out []payment.KeptAlipayApp
	for _, k := range m.kept {
		if k.TenantID > afterTenant || (k.TenantID == afterTenant && k.AppID > afterApp) {
			out = append(out, k)
		}
	}
	return out, nil
}

func (m *memResealer) SwapKeptAlipayCredentials(_ context.Context, tenantID, appID, old, sealed string) (bool, error) {
	for i, k := range m.kept {
		if k.TenantID == tenantID && k.AppID == appID && k.CredentialsSealed == old {
			m.kept[i].CredentialsSealed = sealed
			return true, nil
		}
	}
	return false, nil
}

func (m *memResealer) TenantsWithAlipayCredentials(_ context.Context, after string) ([]payment.Tenant, error) {
	var out []payment.Tenant
	for _, id := range []string{"a", "b"} {
		if id > after {
			out = append(out, m.ts[id])
		}
	}
	return out, nil
}

func (m *memResealer) SwapTenantAlipayCredentials(_ context.Context, id, old, sealed string) (bool, error) {
	t := m.ts[id]
	if t.AlipayCredentialsSealed != old {
		return false, nil
	}
	t.AlipayCredentialsSealed = sealed
	m.ts[id] = t
	return true, nil
}

// Keys a tenant stored for the default app's app_id (planted in the database, since
// `paykit tenant` refuses them) never sign its calls nor verify the default app's
// notifications: a tenant that held the private half of a "public key" it supplied could
// otherwise sign notifications for every other tenant on the default app.
func TestGatewaysNeverLetATenantsKeysStandForTheDefaultApp(t *testing.T) {
	ctx := context.Background()
	kr := testKeyring(t)
	store := &memTenants{ts: map[string]payment.Tenant{}}
	build := func(appID, _ string, c payment.AlipayCredentials) (payment.Gateway, error) {
		return namedGateway{app: appID, key: c.AppPrivateKeyPEM}, nil
	}
	def := namedGateway{app: "default"}
	g := newGatewayResolver(store, kr, build, def, "2021default", "2088default")
	store.put(payment.Tenant{ID: "evil", AlipayAppID: "2021default", AlipaySeller: "2088default",
		AlipayCredentialsSealed: sealFor(t, kr, "evil", "evil-key")})
	store.put(payment.Tenant{ID: "victim", AlipayAppID: "2021default", AlipaySeller: "2088default"})
	for _, id := range []string{"evil", "victim"} {
		got, err := g.For(ctx, id)
		if err != nil || got.Gateway.(namedGateway).app != "default" || got.ID != "2021default" {
			t.Fatalf("For(%s) = %+v, %v; want the deployment's default gateway", id, got, err)
		}
	}
	got, err := g.ForApp(ctx, "2021default")
	if err != nil || got.(namedGateway).app != "default" {
		t.Fatalf("ForApp(default) = %+v, %v; want the deployment's default gateway", got, err)
	}
	// A payment that recorded the default app's id is the default app's too.
	if app, err := g.ForPayment(ctx, "evil", "2021default"); err != nil || app.Gateway.(namedGateway).app != "default" {
		t.Fatalf("ForPayment(evil, default) = %+v, %v; want the deployment's default gateway", app, err)
	}
}

// A tenant read is reused for tenantTTL: every Alipay call of a payment resolves its
// tenant, and new keys take effect within that time.
func TestGatewaysReuseATenantReadBriefly(t *testing.T) {
	ctx := context.Background()
	kr := testKeyring(t)
	store := &memTenants{ts: map[string]payment.Tenant{}}
	build := func(appID, _ string, c payment.AlipayCredentials) (payment.Gateway, error) {
		return namedGateway{app: appID, key: c.AppPrivateKeyPEM}, nil
	}
	g := newGatewayResolver(store, kr, build, namedGateway{app: "default"}, "2021default", "2088default")
	store.put(payment.Tenant{ID: "a", AlipayAppID: "2021A", AlipaySeller: "2088A", AlipayCredentialsSealed: sealFor(t, kr, "a", "key-a")})
	key := func() string {
		t.Helper()
		gw, err := g.For(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		return gw.Gateway.(namedGateway).key
	}
	if k := key(); k != "key-a" {
		t.Fatal(k)
	}
	store.put(payment.Tenant{ID: "a", AlipayAppID: "2021A", AlipaySeller: "2088A", AlipayCredentialsSealed: sealFor(t, kr, "a", "key-a2")})
	if k := key(); k != "key-a" {
		t.Fatalf("a read younger than the TTL was not reused: %s", k)
	}
	g.mu.Lock()
	c := g.tenants["a"]
	c.at = c.at.Add(-tenantTTL)
	g.tenants["a"] = c
	g.mu.Unlock()
	if k := key(); k != "key-a2" {
		t.Fatalf("after the TTL the new keys: %s", k)
	}
}

// TestGatewaysResolveAPaymentByTheAppItWasOpenedOn: after a tenant moves from app A to
// app B, a payment opened on A still goes to A, with A's kept keys and seller; one opened
// on B, and every new one, to B; one that recorded the default app's id, or "" (recorded
// before the app was), to the default app. A's
// notifications still verify once no tenant holds A any more, and an app's current
// holder is preferred to a kept copy. Before, every payment went to the tenant's current
// app, and A's notifications were refused as of an unknown app.
func TestGatewaysResolveAPaymentByTheAppItWasOpenedOn(t *testing.T) {
	ctx := context.Background()
	kr := testKeyring(t)
	store := &memTenants{ts: map[string]payment.Tenant{}}
	build := func(appID, seller string, c payment.AlipayCredentials) (payment.Gateway, error) {
		return namedGateway{app: appID + "/" + seller, key: c.AppPrivateKeyPEM}, nil
	}
	g := newGatewayResolver(store, kr, build, namedGateway{app: "default"}, "2021default", "2088default")
	g.ttl = 0

	store.put(payment.Tenant{ID: "a", AlipayAppID: "2021A", AlipaySeller: "2088A", AlipayCredentialsSealed: sealFor(t, kr, "a", "key-a")})
	opened, err := g.For(ctx, "a")
	if err != nil || opened.ID != "2021A" {
		t.Fatalf("a payment opened before the move records %+v, %v; want 2021A", opened, err)
	}
	store.move(payment.Tenant{ID: "a", AlipayAppID: "2021B", AlipaySeller: "2088B", AlipayCredentialsSealed: sealFor(t, kr, "a", "key-b")})

	cases := []struct {
		name, appID           string
		wantGW, wantKey       string
		wantAppID, wantSeller string
	}{
		{"opened on A before the move", "2021A", "2021A/2088A", "key-a", "2021A", "2088A"},
		{"opened on B after it", "2021B", "2021B/2088B", "key-b", "2021B", "2088B"},
		{"opened on the default app", "2021default", "default", "", "2021default", "2088default"},
		{"recorded before its app was", "", "default", "", "2021default", "2088default"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			app, err := g.ForPayment(ctx, "a", c.appID)
			if err != nil {
				t.Fatal(err)
			}
			gw := app.Gateway.(namedGateway)
			if gw.app != c.wantGW || gw.key != c.wantKey || app.AppID != c.wantAppID || app.SellerID != c.wantSeller {
				t.Fatalf("ForPayment(a, %q) = %+v (%+v), want gateway %s key %q, app %s seller %s", c.appID, app, gw, c.wantGW, c.wantKey, c.wantAppID, c.wantSeller)
			}
		})
	}
	if app, err := g.For(ctx, "a"); err != nil || app.ID != "2021B" {
		t.Fatalf("a new payment after the move: %+v, %v; want 2021B", app, err)
	}
	if _, err := g.ForPayment(ctx, "a", "2021never"); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("an app the tenant never had: %v, want ErrNotFound", err)
	}
	if _, err := g.ForPayment(ctx, "b", "2021A"); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("another tenant's kept app: %v, want ErrNotFound", err)
	}
	// A's notifications verify with the kept keys: no tenant holds A any more.
	if gw, err := g.ForApp(ctx, "2021A"); err != nil || gw.(namedGateway).key != "key-a" {
		t.Fatalf("ForApp(2021A) after the move = %+v, %v", gw, err)
	}
	// Back on A with new keys: A's payments use the current keys, not the stale copy.
	store.move(payment.Tenant{ID: "a", AlipayAppID: "2021A", AlipaySeller: "2088A", AlipayCredentialsSealed: sealFor(t, kr, "a", "key-a2")})
	if app, err := g.ForPayment(ctx, "a", "2021A"); err != nil || app.Gateway.(namedGateway).key != "key-a2" {
		t.Fatalf("back on A: %+v, %v; want the current keys", app, err)
	}
	if gw, err := g.ForApp(ctx, "2021A"); err != nil || gw.(namedGateway).key != "key-a2" {
		t.Fatalf("ForApp(2021A) with a current holder = %+v, %v; want its keys", gw, err)
	}
	if app, err := g.ForPayment(ctx, "a", "2021B"); err != nil || app.Gateway.(namedGateway).key != "key-b" || app.SellerID != "2088B" {
		t.Fatalf("B, now kept: %+v, %v", app, err)
	}
}
