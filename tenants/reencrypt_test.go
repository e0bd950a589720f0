package tenants_test

import (
	"context"
	"testing"

	"github.com/paykit/paykit/gateways/gatewaystest"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/secrets"
	"github.com/paykit/paykit/tenants"
)

// TestReencryptTenants: after a rotation, every tenant's credentials are sealed under
// the new key, still open for their tenant, and a second run changes nothing.
func TestReencryptTenants(t *testing.T) {
	ctx := context.Background()
	oldKey, _ := secrets.NewKey("old")
	oldRing, _ := secrets.ParseKeyring(oldKey)
	st := &memResealer{ts: map[string]payment.Tenant{}}
	for _, id := range []string{"a", "b"} {
		st.ts[id] = payment.Tenant{ID: id, AlipayCredentialsSealed: gatewaystest.Seal(t, oldRing, id, "key-"+id)}
	}
	// a has left an app; its kept keys are re-encrypted too.
	st.kept = []payment.KeptAlipayApp{{TenantID: "a", AppID: "2021old", CredentialsSealed: gatewaystest.Seal(t, oldRing, "a", "key-a-old")}}
	newKey, _ := secrets.NewKey("new")
	ring, err := secrets.ParseKeyring(newKey + "," + oldKey)
	if err != nil {
		t.Fatal(err)
	}
	changed, total, err := tenants.Reencrypt(ctx, st, ring)
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
	if changed, _, err := tenants.Reencrypt(ctx, st, ring); err != nil || changed != 0 {
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
