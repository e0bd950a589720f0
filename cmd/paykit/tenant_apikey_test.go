package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/tenants"
)

// TestTenantAPIKeyFlags: -rotate-api-key with -api-key-overlap adds a key and keeps the
// old one for the overlap, and -revoke-api-key old revokes it, changing nothing else.
func TestTenantAPIKeyFlags(t *testing.T) {
	ctx := context.Background()
	db, dsn := testenv.MySQL(t)
	cfg := config.Config{MySQLDSN: dsn}
	st := mysql.NewStore(db)
	t.Cleanup(func() { _ = st.Close() })
	const first = "sk_test_flags_0123456789"
	if err := st.UpsertTenant(ctx, payment.Tenant{ID: "demo", APIKeyHash: api.HashAPIKey(first), NotifyURL: "https://shop.example/hooks"}); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) tenantFlags {
		t.Helper()
		f, rot, err := parseTenantFlags(cfg, args, strings.NewReader(""), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if err := runTenantWith(ctx, cfg, f, rot, io.Discard); err != nil {
			t.Fatal(err)
		}
		return f
	}
	f := run("-id", "demo", "-rotate-api-key", "-api-key-overlap", "2h")
	if f.apiKeys != (tenants.KeyChange{Rotate: true, Overlap: 2 * time.Hour}) {
		t.Fatalf("flags %+v", f.apiKeys)
	}
	keys, err := st.TenantAPIKeys(ctx, "demo")
	if err != nil || len(keys) != 2 || !keys[0].ExpiresAt.IsZero() || keys[1].Hash != api.HashAPIKey(first) ||
		time.Until(keys[1].ExpiresAt) < 119*time.Minute {
		t.Fatalf("keys after the rotation: %+v, %v", keys, err)
	}
	run("-id", "demo", "-revoke-api-key", "old")
	keys, _ = st.TenantAPIKeys(ctx, "demo")
	if keys[1].RevokedAt.IsZero() || !keys[0].RevokedAt.IsZero() {
		t.Fatalf("keys after -revoke-api-key old: %+v", keys)
	}
	if tn, _ := st.GetTenant(ctx, "demo"); tn.NotifyURL != "https://shop.example/hooks" || tn.APIKeyHash != keys[0].Hash {
		t.Fatalf("tenant after the key changes: %+v", tn)
	}
}
