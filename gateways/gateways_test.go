package gateways

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/gateways/gatewaystest"
	"github.com/paykit/paykit/payment"
)

func TestGatewaysResolveEachTenantsApp(t *testing.T) {
	ctx := context.Background()
	kr := gatewaystest.Keyring(t)
	store := gatewaystest.NewTenants()
	builds := 0
	build := func(appID, seller string, c payment.AlipayCredentials) (payment.Gateway, error) {
		builds++
		if c.AppPrivateKeyPEM == "unloadable" {
			return nil, errors.New("parse error quoting unloadable")
		}
		return gatewaystest.Named{App: appID, Key: c.AppPrivateKeyPEM}, nil
	}
	def := gatewaystest.Named{App: "default"}
	g := New(store, kr, build, def, "2021default", "2088default")
	g.SetTTL(0) // every call reads the tenant (TestGatewaysReuseATenantReadBriefly covers the reuse)

	store.Put(payment.Tenant{ID: "plain", AlipayAppID: "2021default", AlipaySeller: "2088"})
	store.Put(payment.Tenant{ID: "a", AlipayAppID: "2021A", AlipaySeller: "2088A", AlipayCredentialsSealed: gatewaystest.Seal(t, kr, "a", "key-a")})
	store.Put(payment.Tenant{ID: "b", AlipayAppID: "2021B", AlipaySeller: "2088B", AlipayCredentialsSealed: gatewaystest.Seal(t, kr, "b", "key-b")})

	gw := func(id string) gatewaystest.Named {
		t.Helper()
		got, err := g.For(ctx, id)
		if err != nil {
			t.Fatalf("For(%s): %v", id, err)
		}
		return got.Gateway.(gatewaystest.Named)
	}
	if got := gw("plain"); got.App != "default" {
		t.Fatalf("a tenant without keys: %+v", got)
	}
	if got := gw("a"); got.App != "2021A" || got.Key != "key-a" {
		t.Fatalf("tenant a: %+v", got)
	}
	if got := gw("b"); got.App != "2021B" || got.Key != "key-b" {
		t.Fatalf("tenant b: %+v", got)
	}
	gw("a")
	gw("b")
	if builds != 2 {
		t.Fatalf("%d builds for two apps, want 2 (cached)", builds)
	}

	// New keys for a: the next call builds its new gateway.
	store.Put(payment.Tenant{ID: "a", AlipayAppID: "2021A", AlipaySeller: "2088A", AlipayCredentialsSealed: gatewaystest.Seal(t, kr, "a", "key-a2")})
	if got := gw("a"); got.Key != "key-a2" || builds != 3 {
		t.Fatalf("after new keys: %+v, %d builds", got, builds)
	}

	// Notifications: by app_id, the one app's gateway only.
	for app, want := range map[string]string{"2021A": "key-a2", "2021B": "key-b", "2021default": ""} {
		got, err := g.ForApp(ctx, app)
		if err != nil || got.(gatewaystest.Named).Key != want {
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
	store.Put(payment.Tenant{ID: "c", AlipayAppID: "2021B", AlipaySeller: "2088B", AlipayCredentialsSealed: gatewaystest.Seal(t, kr, "b", "key-b")})
	if _, err := g.For(ctx, "c"); err == nil {
		t.Fatal("a ciphertext moved to another tenant opened")
	}
	// Two tenants holding one app_id with different keys: refused, not guessed.
	store.Put(payment.Tenant{ID: "c", AlipayAppID: "2021B", AlipaySeller: "2088B", AlipayCredentialsSealed: gatewaystest.Seal(t, kr, "c", "key-other")})
	if _, err := g.ForApp(ctx, "2021B"); err == nil {
		t.Fatal("an app with two sets of keys resolved")
	}
	// The same keys at two tenants are one app.
	store.Put(payment.Tenant{ID: "c", AlipayAppID: "2021B", AlipaySeller: "2088B", AlipayCredentialsSealed: gatewaystest.Seal(t, kr, "c", "key-b")})
	if got, err := g.ForApp(ctx, "2021B"); err != nil || got.(gatewaystest.Named).Key != "key-b" {
		t.Fatalf("shared app: %+v, %v", got, err)
	}
	// Keys that do not load: the error does not quote them.
	store.Put(payment.Tenant{ID: "d", AlipayAppID: "2021D", AlipaySeller: "2088D", AlipayCredentialsSealed: gatewaystest.Seal(t, kr, "d", "unloadable")})
	if _, err := g.For(ctx, "d"); err == nil || strings.Contains(err.Error(), "unloadable") {
		t.Fatalf("unloadable keys: %v", err)
	}
	// A tenant naming another app than the default without keys is refused, never sent
	// through the default app.
	store.Put(payment.Tenant{ID: "nokeys", AlipayAppID: "2021other", AlipaySeller: "2088"})
	if _, err := g.For(ctx, "nokeys"); err == nil {
		t.Fatal("a tenant of another app without keys went through the default app")
	}
	// Without the keyring, a tenant with its own app is an error, never the default app.
	nokeys := New(store, nil, build, def, "2021default", "2088default")
	if _, err := nokeys.For(ctx, "b"); err == nil {
		t.Fatal("resolved a sealed app without the keyring")
	}
}

// Keys a tenant stored for the default app's app_id (planted in the database, since
// `paykit tenant` refuses them) never sign its calls nor verify the default app's
// notifications: a tenant that held the private half of a "public key" it supplied could
// otherwise sign notifications for every other tenant on the default app.
func TestGatewaysNeverLetATenantsKeysStandForTheDefaultApp(t *testing.T) {
	ctx := context.Background()
	kr := gatewaystest.Keyring(t)
	store := gatewaystest.NewTenants()
	build := func(appID, _ string, c payment.AlipayCredentials) (payment.Gateway, error) {
		return gatewaystest.Named{App: appID, Key: c.AppPrivateKeyPEM}, nil
	}
	def := gatewaystest.Named{App: "default"}
	g := New(store, kr, build, def, "2021default", "2088default")
	store.Put(payment.Tenant{ID: "evil", AlipayAppID: "2021default", AlipaySeller: "2088default",
		AlipayCredentialsSealed: gatewaystest.Seal(t, kr, "evil", "evil-key")})
	store.Put(payment.Tenant{ID: "victim", AlipayAppID: "2021default", AlipaySeller: "2088default"})
	for _, id := range []string{"evil", "victim"} {
		got, err := g.For(ctx, id)
		if err != nil || got.Gateway.(gatewaystest.Named).App != "default" || got.ID != "2021default" {
			t.Fatalf("For(%s) = %+v, %v; want the deployment's default gateway", id, got, err)
		}
	}
	got, err := g.ForApp(ctx, "2021default")
	if err != nil || got.(gatewaystest.Named).App != "default" {
		t.Fatalf("ForApp(default) = %+v, %v; want the deployment's default gateway", got, err)
	}
	// A payment that recorded the default app's id is the default app's too.
	if app, err := g.ForPayment(ctx, "evil", "2021default"); err != nil || app.Gateway.(gatewaystest.Named).App != "default" {
		t.Fatalf("ForPayment(evil, default) = %+v, %v; want the deployment's default gateway", app, err)
	}
}

// A tenant read is reused for TenantTTL: every Alipay call of a payment resolves its
// tenant, and new keys take effect within that time.
func TestGatewaysReuseATenantReadBriefly(t *testing.T) {
	ctx := context.Background()
	kr := gatewaystest.Keyring(t)
	store := gatewaystest.NewTenants()
	build := func(appID, _ string, c payment.AlipayCredentials) (payment.Gateway, error) {
		return gatewaystest.Named{App: appID, Key: c.AppPrivateKeyPEM}, nil
	}
	g := New(store, kr, build, gatewaystest.Named{App: "default"}, "2021default", "2088default")
	const ttl = time.Second
	g.SetTTL(ttl)
	store.Put(payment.Tenant{ID: "a", AlipayAppID: "2021A", AlipaySeller: "2088A", AlipayCredentialsSealed: gatewaystest.Seal(t, kr, "a", "key-a")})
	key := func() string {
		t.Helper()
		gw, err := g.For(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		return gw.Gateway.(gatewaystest.Named).Key
	}
	if k := key(); k != "key-a" {
		t.Fatal(k)
	}
	store.Put(payment.Tenant{ID: "a", AlipayAppID: "2021A", AlipaySeller: "2088A", AlipayCredentialsSealed: gatewaystest.Seal(t, kr, "a", "key-a2")})
	if k := key(); k != "key-a" {
		t.Fatalf("a read younger than the TTL was not reused: %s", k)
	}
	time.Sleep(ttl + 100*time.Millisecond)
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
	kr := gatewaystest.Keyring(t)
	store := gatewaystest.NewTenants()
	build := func(appID, seller string, c payment.AlipayCredentials) (payment.Gateway, error) {
		return gatewaystest.Named{App: appID + "/" + seller, Key: c.AppPrivateKeyPEM}, nil
	}
	g := New(store, kr, build, gatewaystest.Named{App: "default"}, "2021default", "2088default")
	g.SetTTL(0)

	store.Put(payment.Tenant{ID: "a", AlipayAppID: "2021A", AlipaySeller: "2088A", AlipayCredentialsSealed: gatewaystest.Seal(t, kr, "a", "key-a")})
	opened, err := g.For(ctx, "a")
	if err != nil || opened.ID != "2021A" {
		t.Fatalf("a payment opened before the move records %+v, %v; want 2021A", opened, err)
	}
	store.Move(payment.Tenant{ID: "a", AlipayAppID: "2021B", AlipaySeller: "2088B", AlipayCredentialsSealed: gatewaystest.Seal(t, kr, "a", "key-b")})

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
			gw := app.Gateway.(gatewaystest.Named)
			if gw.App != c.wantGW || gw.Key != c.wantKey || app.AppID != c.wantAppID || app.SellerID != c.wantSeller {
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
	if gw, err := g.ForApp(ctx, "2021A"); err != nil || gw.(gatewaystest.Named).Key != "key-a" {
		t.Fatalf("ForApp(2021A) after the move = %+v, %v", gw, err)
	}
	// Back on A with new keys: A's payments use the current keys, not the stale copy.
	store.Move(payment.Tenant{ID: "a", AlipayAppID: "2021A", AlipaySeller: "2088A", AlipayCredentialsSealed: gatewaystest.Seal(t, kr, "a", "key-a2")})
	if app, err := g.ForPayment(ctx, "a", "2021A"); err != nil || app.Gateway.(gatewaystest.Named).Key != "key-a2" {
		t.Fatalf("back on A: %+v, %v; want the current keys", app, err)
	}
	if gw, err := g.ForApp(ctx, "2021A"); err != nil || gw.(gatewaystest.Named).Key != "key-a2" {
		t.Fatalf("ForApp(2021A) with a current holder = %+v, %v; want its keys", gw, err)
	}
	if app, err := g.ForPayment(ctx, "a", "2021B"); err != nil || app.Gateway.(gatewaystest.Named).Key != "key-b" || app.SellerID != "2088B" {
		t.Fatalf("B, now kept: %+v, %v", app, err)
	}
}
