package statement_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/gateways"
	"github.com/paykit/paykit/gateways/gatewaystest"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/statement"
)

// pagedTenants serves TenantsWithAlipayCredentials two tenants a page, as the store
// pages by id.
type pagedTenants struct {
	tenants []payment.Tenant
	kept    []payment.KeptAlipayApp
	err     error
}

func (p pagedTenants) KeptAlipayAppIDs(_ context.Context, leftSince time.Time) ([]string, error) {
	var out []string
	for _, k := range p.kept {
		if !k.LeftAt.Before(leftSince) {
			out = append(out, k.AppID)
		}
	}
	return out, nil
}

func (p pagedTenants) TenantsWithAlipayCredentials(_ context.Context, after string) ([]payment.Tenant, error) {
	if p.err != nil {
		return nil, p.err
	}
	var out []payment.Tenant
	for _, t := range p.tenants {
		if t.ID > after && len(out) < 2 {
			out = append(out, t)
		}
	}
	return out, nil
}

// Every app a tenant has its own keys for is reconciled once, after the default app,
// however many tenants share it and across pages.
func TestStatementAppsListEveryTenantAppOnce(t *testing.T) {
	store := pagedTenants{tenants: []payment.Tenant{
		{ID: "a", AlipayAppID: "2021000000000002"},
		{ID: "b", AlipayAppID: "2021000000000001"}, // the default app, with its own copy of the keys
		{ID: "c", AlipayAppID: "2021000000000003"},
		{ID: "d", AlipayAppID: "2021000000000002"},
		{ID: "e", AlipayAppID: "2021000000000004"},
	}}
	apps, err := statement.Apps(context.Background(), "2021000000000001", store, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"2021000000000001", "2021000000000002", "2021000000000003", "2021000000000004"}
	if got := statement.AppIDs(apps); !reflect.DeepEqual(got, want) {
		t.Fatalf("apps %v, want %v", got, want)
	}
	if !apps[0].Default || apps[1].Default {
		t.Fatalf("only the first app is the default: %+v", apps)
	}
	if _, err := statement.Apps(context.Background(), "2021000000000001", pagedTenants{err: errors.New("db down")}, nil); err == nil {
		t.Fatal("a failing tenant listing must be an error, not the default app alone")
	}
}

// An app whose keys do not load fails its own day only: every other app keeps its bill
// source.
func TestStatementAppsKeepOtherAppsWhenOneIsBroken(t *testing.T) {
	ctx := context.Background()
	kr := gatewaystest.Keyring(t)
	store := gatewaystest.NewTenants()
	build := func(appID, _ string, c payment.AlipayCredentials) (payment.Gateway, error) {
		if c.AppPrivateKeyPEM == "unloadable" {
			return nil, errors.New("bad key")
		}
		return gatewaystest.Named{App: appID, Key: c.AppPrivateKeyPEM}, nil
	}
	gws := gateways.New(store, kr, build, gatewaystest.Named{App: "default"}, "2021default", "2088default")
	store.Put(payment.Tenant{ID: "good", AlipayAppID: "2021good", AlipaySeller: "2088good", AlipayCredentialsSealed: gatewaystest.Seal(t, kr, "good", "k")})
	store.Put(payment.Tenant{ID: "bad", AlipayAppID: "2021bad", AlipaySeller: "2088bad", AlipayCredentialsSealed: gatewaystest.Seal(t, kr, "bad", "unloadable")})
	lister := pagedTenants{tenants: []payment.Tenant{store.Tenant("bad"), store.Tenant("good")}}
	apps, err := statement.Apps(ctx, "2021default", lister, gws)
	if err != nil {
		t.Fatalf("one broken app failed the list: %v", err)
	}
	if got := statement.AppIDs(apps); !reflect.DeepEqual(got, []string{"2021default", "2021bad", "2021good"}) {
		t.Fatalf("apps %v", got)
	}
	if _, err := apps[1].Bills.BillDownloadURL(ctx, "2026-12-01"); err == nil || !strings.Contains(err.Error(), "2021bad") {
		t.Fatalf("the broken app's bill source: %v", err)
	}
}

// An app a tenant has left is still reconciled, with its kept keys, for
// KeptAppsReconciledFor after the move: its old payments are paid and refunded there.
// One left longer ago, or also current, is not listed again.
func TestStatementAppsListKeptApps(t *testing.T) {
	ctx := context.Background()
	kr := gatewaystest.Keyring(t)
	store := gatewaystest.NewTenants()
	build := func(appID, _ string, c payment.AlipayCredentials) (payment.Gateway, error) {
		return gatewaystest.Bills{Named: gatewaystest.Named{App: appID, Key: c.AppPrivateKeyPEM}}, nil
	}
	gws := gateways.New(store, kr, build, gatewaystest.Named{App: "default"}, "2021default", "2088default")
	store.Put(payment.Tenant{ID: "a", AlipayAppID: "2021A", AlipaySeller: "2088A", AlipayCredentialsSealed: gatewaystest.Seal(t, kr, "a", "key-a")})
	store.Move(payment.Tenant{ID: "a", AlipayAppID: "2021B", AlipaySeller: "2088B", AlipayCredentialsSealed: gatewaystest.Seal(t, kr, "a", "key-b")})
	now := time.Now()
	lister := pagedTenants{tenants: []payment.Tenant{store.Tenant("a")}, kept: []payment.KeptAlipayApp{
		{TenantID: "a", AppID: "2021A", LeftAt: now.Add(-time.Hour)},
		{TenantID: "a", AppID: "2021B", LeftAt: now.Add(-time.Hour)}, // came back to B: listed once
		{TenantID: "x", AppID: "2021gone", LeftAt: now.Add(-statement.KeptAppsReconciledFor - time.Hour)},
	}}
	apps, err := statement.Apps(ctx, "2021default", lister, gws)
	if err != nil {
		t.Fatal(err)
	}
	if got := statement.AppIDs(apps); !reflect.DeepEqual(got, []string{"2021default", "2021B", "2021A"}) {
		t.Fatalf("apps %v, want the default, the current and the kept app", got)
	}
	if u, err := apps[2].Bills.BillDownloadURL(ctx, "2026-12-01"); err != nil || u != "bill:2021A:key-a" {
		t.Fatalf("the kept app's bills: %q, %v; want them fetched with its kept keys", u, err)
	}
}

// `paykit statement -app` picks one app of the list, or all without it, and refuses an
// app the deployment does not reconcile, naming those it does.
func TestSelectApp(t *testing.T) {
	apps := []statement.App{{ID: "2021default", Default: true}, {ID: "2021A"}, {ID: "2021B"}}
	tests := []struct {
		name, id string
		want     []string
		wantErr  string
	}{
		{name: "every app", want: []string{"2021default", "2021A", "2021B"}},
		{name: "one app", id: "2021A", want: []string{"2021A"}},
		{name: "the default app", id: "2021default", want: []string{"2021default"}},
		{name: "not an app", id: "2021other", wantErr: "2021other is not an Alipay app of this deployment (2021default, 2021A, 2021B)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := statement.Select(apps, tc.id)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(statement.AppIDs(got), tc.want) {
				t.Fatalf("apps %v, %v; want %v", statement.AppIDs(got), err, tc.want)
			}
		})
	}
}

// The apps chosen by ID get the bill sources of the same apps listed with the gateways,
// in their own order, without changing the list they came from.
func TestWithBills(t *testing.T) {
	chosen := []statement.App{{ID: "2021B"}, {ID: "2021default", Default: true}, {ID: "2021new"}}
	withBills := []statement.App{
		{ID: "2021default", Default: true, Bills: gatewaystest.Bills{Named: gatewaystest.Named{App: "2021default"}}},
		{ID: "2021A", Bills: gatewaystest.Bills{Named: gatewaystest.Named{App: "2021A"}}},
		{ID: "2021B", Bills: gatewaystest.Bills{Named: gatewaystest.Named{App: "2021B"}}},
	}
	got := statement.WithBills(chosen, withBills)
	if ids := statement.AppIDs(got); !reflect.DeepEqual(ids, []string{"2021B", "2021default", "2021new"}) {
		t.Fatalf("apps %v, want the chosen ones in their order", ids)
	}
	if got[0].Bills != withBills[2].Bills || got[1].Bills != withBills[0].Bills || !got[1].Default || got[2].Bills != nil {
		t.Fatalf("apps %+v: want B's and the default's bill sources, none for an app not listed", got)
	}
	if chosen[0].Bills != nil {
		t.Fatal("WithBills changed the list it was given")
	}
}
