package mysql_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/payment"
)

// TestAPIKeyRotationAndRevocation: a rotation keeps the old key valid until its expiry
// beside the new one, which becomes tenants.api_key_hash; a revocation of the newest key
// hands the column back to the newest valid key, and with none left to an unusable hash;
// -api-key on an upsert replaces every other key at once; a key only in the old column
// (set by an older binary) still authenticates; and every change is listed as changed.
func TestAPIKeyRotationAndRevocation(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	hash := func(c byte) string { return strings.Repeat(string(c), 64) }
	if err := st.UpsertTenant(ctx, payment.Tenant{ID: "ta", APIKeyHash: hash('a'), AlipayAppID: "2021A"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Second)
	valid := func(h string, want bool, tenant string) {
		t.Helper()
		k, ten, err := st.TenantAPIKey(ctx, h)
		if !want && errors.Is(err, payment.ErrNotFound) {
			return
		}
		if err != nil {
			t.Fatalf("key %c: %v", h[0], err)
		}
		if k.ValidAt(time.Now()) != want || ten.ID != tenant || k.TenantID != tenant {
			t.Fatalf("key %c: %+v of %s, want valid=%v of %s", h[0], k, ten.ID, want, tenant)
		}
	}
	valid(hash('a'), true, "ta")
	until := time.Now().Add(time.Hour)
	if err := st.AddAPIKey(ctx, "ta", hash('b'), until); err != nil {
		t.Fatal(err)
	}
	valid(hash('a'), true, "ta")
	valid(hash('b'), true, "ta")
	if k, _, _ := st.TenantAPIKey(ctx, hash('a')); !k.ExpiresAt.Equal(until.UTC().Truncate(time.Microsecond)) {
		t.Fatalf("old key expires %v, want %v", k.ExpiresAt, until)
	}
	if got, _ := st.GetTenant(ctx, "ta"); got.APIKeyHash != hash('b') {
		t.Fatalf("tenants.api_key_hash %q, want the new key", got.APIKeyHash)
	}
	if err := st.AddAPIKey(ctx, "ta", hash('b'), until); payment.ErrorCode(err) != payment.ECONFLICT {
		t.Fatalf("the same key again: %v", err)
	}
	if n, err := st.RevokeAPIKeys(ctx, "ta", []string{hash('b'), hash('z')}); err != nil || n != 1 {
		t.Fatalf("revoke: %d, %v", n, err)
	}
	valid(hash('b'), false, "ta")
	if got, _ := st.GetTenant(ctx, "ta"); got.APIKeyHash != hash('a') {
		t.Fatalf("tenants.api_key_hash %q after the newest key's revocation, want the old key's", got.APIKeyHash)
	}
	if n, err := st.RevokeAPIKeys(ctx, "ta", []string{hash('a')}); err != nil || n != 1 {
		t.Fatalf("revoke: %d, %v", n, err)
	}
	if got, _ := st.GetTenant(ctx, "ta"); got.APIKeyHash == hash('a') || got.APIKeyHash == hash('b') {
		t.Fatalf("tenants.api_key_hash %q with every key revoked", got.APIKeyHash)
	}
	valid(hash('a'), false, "ta")

	// -api-key replaces at once.
	if err := st.UpsertTenant(ctx, payment.Tenant{ID: "ta", APIKeyHash: hash('c'), AlipayAppID: "2021A"}); err != nil {
		t.Fatal(err)
	}
	if err := st.AddAPIKey(ctx, "ta", hash('d'), until); err != nil {
		t.Fatal(err)
	}
	if err := st.UpsertTenant(ctx, payment.Tenant{ID: "ta", APIKeyHash: hash('e'), AlipayAppID: "2021A"}); err != nil {
		t.Fatal(err)
	}
	valid(hash('c'), false, "ta")
	valid(hash('d'), false, "ta")
	valid(hash('e'), true, "ta")
	if err := st.UpsertTenant(ctx, payment.Tenant{ID: "tb", APIKeyHash: hash('c'), AlipayAppID: "2021A"}); payment.ErrorCode(err) != payment.ECONFLICT {
		t.Fatalf("another tenant's (revoked) key: %v", err)
	}
	if err := st.UpsertTenant(ctx, payment.Tenant{ID: "ta", APIKeyHash: hash('c'), AlipayAppID: "2021A"}); payment.ErrorCode(err) != payment.ECONFLICT {
		t.Fatalf("a revoked key set again: %v", err)
	}
	valid(hash('e'), true, "ta")

	// A key an older binary wrote to tenants alone.
	if _, err := db.ExecContext(ctx, "UPDATE tenants SET api_key_hash = ? WHERE id = 'ta'", hash('f')); err != nil {
		t.Fatal(err)
	}
	valid(hash('f'), true, "ta")
	if n, err := st.RevokeAPIKeys(ctx, "ta", []string{hash('f')}); err != nil || n != 1 {
		t.Fatalf("revoke a key of the old column: %d, %v", n, err)
	}
	valid(hash('f'), false, "ta")

	changed, err := st.APIKeysChangedSince(ctx, start, 100)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[byte]bool{}
	for _, k := range changed {
		seen[k.Hash[0]] = true
	}
	for _, c := range "abcdef" {
		if !seen[byte(c)] {
			t.Errorf("key %c not listed as changed: %+v", c, changed)
		}
	}
	keys, err := st.TenantAPIKeys(ctx, "ta")
	if err != nil || len(keys) != 6 {
		t.Fatalf("TenantAPIKeys: %d, %v", len(keys), err)
	}
}
