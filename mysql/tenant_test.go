package mysql_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/paykit/paykit/payment"
)

// TestTenantAlipayCredentials: the sealed credentials are set and cleared on their own,
// an upsert of the tenant's other fields keeps them, tenants are found by app_id, and a
// re-encryption swap never overwrites credentials set meanwhile.
func TestTenantAlipayCredentials(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	hash := func(c byte) string { return strings.Repeat(string(c), 64) }
	for i, id := range []string{"ta", "tb", "tc"} {
		app := "2021A"
		if id == "tc" {
			app = "2021C"
		}
		if err := st.UpsertTenant(ctx, payment.Tenant{ID: id, APIKeyHash: hash(byte('a' + i)), AlipayAppID: app, AlipaySeller: "2088"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.SetTenantAlipayCredentials(ctx, "nobody", "pks1:k:x"); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("unknown tenant: %v", err)
	}
	if err := st.SetTenantAlipayCredentials(ctx, "ta", "pks1:k:sealed-a"); err != nil {
		t.Fatal(err)
	}
	if err := st.UpsertTenant(ctx, payment.Tenant{ID: "ta", Name: "renamed", APIKeyHash: hash('a'), AlipayAppID: "2021A", AlipaySeller: "2088"}); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetTenant(ctx, "ta")
	if err != nil || got.AlipayCredentialsSealed != "pks1:k:sealed-a" || got.Name != "renamed" {
		t.Fatalf("after upsert: %+v, %v", got, err)
	}
	byApp, err := st.TenantsByAlipayApp(ctx, "2021A")
	if err != nil || len(byApp) != 1 || byApp[0].ID != "ta" || byApp[0].AlipayCredentialsSealed == "" {
		t.Fatalf("TenantsByAlipayApp = %+v, %v", byApp, err)
	}
	withCreds, err := st.TenantsWithAlipayCredentials(ctx, "")
	if err != nil || len(withCreds) != 1 || withCreds[0].ID != "ta" {
		t.Fatalf("TenantsWithAlipayCredentials = %+v, %v", withCreds, err)
	}
	if ok, err := st.SwapTenantAlipayCredentials(ctx, "ta", "pks1:k:stale", "pks1:k2:resealed"); err != nil || ok {
		t.Fatalf("swap of a stale value: %v, %v", ok, err)
	}
	if ok, err := st.SwapTenantAlipayCredentials(ctx, "ta", "pks1:k:sealed-a", "pks1:k2:resealed"); err != nil || !ok {
		t.Fatalf("swap: %v, %v", ok, err)
	}
	// Upserted with new credentials, the app and its keys change together.
	if err := st.UpsertTenant(ctx, payment.Tenant{ID: "ta", APIKeyHash: hash('a'), AlipayAppID: "2021N", AlipaySeller: "2088N", AlipayCredentialsSealed: "pks1:k:new"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.GetTenant(ctx, "ta"); got.AlipayAppID != "2021N" || got.AlipayCredentialsSealed != "pks1:k:new" {
		t.Fatalf("upsert with credentials: %+v", got)
	}
	if err := st.UpsertTenant(ctx, payment.Tenant{ID: "tn", APIKeyHash: hash('n'), AlipayAppID: "2021N", AlipaySeller: "2088N", AlipayCredentialsSealed: "pks1:k:tn"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.GetTenant(ctx, "tn"); got.AlipayCredentialsSealed != "pks1:k:tn" {
		t.Fatalf("insert with credentials: %+v", got)
	}
	if err := st.SetTenantAlipayCredentials(ctx, "ta", ""); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.GetTenant(ctx, "ta"); got.AlipayCredentialsSealed != "" {
		t.Fatalf("cleared credentials: %q", got.AlipayCredentialsSealed)
	}
	if withCreds, _ := st.TenantsWithAlipayCredentials(ctx, ""); len(withCreds) != 1 || withCreds[0].ID != "tn" {
		t.Fatalf("after clearing: %+v", withCreds)
	}
}
