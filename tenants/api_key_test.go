package tenants_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/tenants"
)

// TestRotateAndRevokeAPIKeys: a rotation prints a new key of 256 bits once and keeps the
// old one valid for the overlap; a hash prefix revokes one key, an ambiguous or short one
// nothing, and "old" every key but the newest.
func TestRotateAndRevokeAPIKeys(t *testing.T) {
	db, _ := testenv.MySQL(t)
	st := mysql.NewStore(db)
	t.Cleanup(func() { _ = st.Close() })
	ctx := context.Background()
	const first = "sk_test_first_0123456789"
	if err := st.UpsertTenant(ctx, payment.Tenant{ID: "k1", APIKeyHash: api.HashAPIKey(first)}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	valid := func(key string) bool {
		k, _, err := st.TenantAPIKey(ctx, api.HashAPIKey(key))
		return err == nil && k.ValidAt(time.Now())
	}
	keyIn := regexp.MustCompile(`sk_[A-Za-z0-9_-]{32}`) // 24 random bytes: 192 bits
	var rotated []string
	for range 2 {
		msg, err := tenants.ChangeKeys(ctx, st, "k1", tenants.KeyChange{Rotate: true, Overlap: time.Hour}, now)
		if err != nil {
			t.Fatal(err)
		}
		key := keyIn.FindString(msg)
		if key == "" || !strings.Contains(msg, api.HashAPIKey(key)) {
			t.Fatalf("rotation message without a 192-bit key and its hash: %q", msg)
		}
		rotated = append(rotated, key)
	}
	if !valid(first) || !valid(rotated[0]) || !valid(rotated[1]) {
		t.Fatal("a key stopped during the overlap")
	}
	for _, bad := range []string{"abc", "zzzzzzzzzz"} {
		if _, err := tenants.ChangeKeys(ctx, st, "k1", tenants.KeyChange{Revoke: bad}, now); err == nil {
			t.Errorf("-revoke-api-key %s: no error", bad)
		}
	}
	if _, err := tenants.ChangeKeys(ctx, st, "k1", tenants.KeyChange{Revoke: api.HashAPIKey(rotated[0])[:10]}, now); err != nil {
		t.Fatal(err)
	}
	if valid(rotated[0]) || !valid(first) || !valid(rotated[1]) {
		t.Fatal("revoking by prefix did not revoke exactly that key")
	}
	if _, err := tenants.ChangeKeys(ctx, st, "k1", tenants.KeyChange{Revoke: tenants.RevokeOldKeys}, now); err != nil {
		t.Fatal(err)
	}
	if valid(first) || !valid(rotated[1]) {
		t.Fatal("revoking the old keys did not keep exactly the newest")
	}
	if _, err := tenants.ChangeKeys(ctx, st, "k1", tenants.KeyChange{Rotate: true, Revoke: "old"}, now); err == nil {
		t.Fatal("rotate and revoke together: no error")
	}
}
