package mysql_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/payment"
)

// SwapTenantWebhookSecrets writes a tenant's secrets only while the stored ones are those
// its caller read, so a rotation or a re-encryption never overwrites a secret set
// meanwhile; the event's tenant carries the sealed secrets, and TenantsWithWebhookSecrets
// lists only tenants holding one.
func TestSwapTenantWebhookSecrets(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	for _, tn := range []payment.Tenant{
		{ID: "sw-a", APIKeyHash: strings.Repeat("a", 64), WebhookSecret: "clear-a"},
		{ID: "sw-b", APIKeyHash: strings.Repeat("b", 64), WebhookSecretSealed: "pks1:k1:b"},
		{ID: "sw-c", APIKeyHash: strings.Repeat("c", 64)},
	} {
		if err := st.UpsertTenant(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	old, err := st.GetTenant(ctx, "sw-a")
	if err != nil {
		t.Fatal(err)
	}
	next := old
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	next.WebhookSecret, next.WebhookSecretSealed = "", "pks1:k1:new"
	next.PreviousWebhookSecretSealed, next.PreviousSecretExpiresAt = "pks1:k1:old", until
	if ok, err := st.SwapTenantWebhookSecrets(ctx, old, next); err != nil || !ok {
		t.Fatalf("swap: %v, %v", ok, err)
	}
	got, _ := st.GetTenant(ctx, "sw-a")
	if got.WebhookSecret != "" || got.WebhookSecretSealed != "pks1:k1:new" || got.PreviousWebhookSecretSealed != "pks1:k1:old" ||
		!got.PreviousSecretExpiresAt.Equal(until) {
		t.Fatalf("after the swap: %+v", got)
	}
	stale := next
	stale.WebhookSecretSealed = "pks1:k1:other"
	if ok, err := st.SwapTenantWebhookSecrets(ctx, old, stale); err != nil || ok {
		t.Fatalf("swap from a stale read: %v, %v; want refused", ok, err)
	}
	if again, _ := st.GetTenant(ctx, "sw-a"); again.WebhookSecretSealed != "pks1:k1:new" {
		t.Fatalf("a stale swap wrote %q", again.WebhookSecretSealed)
	}
	ts, err := st.TenantsWithWebhookSecrets(ctx, "")
	if err != nil || len(ts) != 2 || ts[0].ID != "sw-a" || ts[1].ID != "sw-b" {
		t.Fatalf("tenants with secrets: %+v, %v", ts, err)
	}
	if err := st.ExpirePreviousWebhookSecret(ctx, "sw-a"); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.GetTenant(ctx, "sw-a"); got.PreviousWebhookSecretSealed != "" || !got.PreviousSecretExpiresAt.IsZero() {
		t.Fatalf("after expiring the previous secret: %+v", got)
	}
}
