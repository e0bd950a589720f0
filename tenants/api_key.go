package tenants

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/payment"
)

// DefaultAPIKeyOverlap is how long a rotated-out API key keeps authenticating.
const DefaultAPIKeyOverlap = 24 * time.Hour

// RevokeOldKeys is the -revoke-api-key value that revokes every key of the tenant but its newest.
const RevokeOldKeys = "old"

// minHashPrefix is the shortest hash prefix -revoke-api-key takes.
const minHashPrefix = 8

// KeyChange is what `paykit tenant -rotate-api-key` or `-revoke-api-key` asks for.
type KeyChange struct {
	// Rotate issues a new key; the tenant's other keys keep working for Overlap.
	Rotate  bool
	Overlap time.Duration
	// Revoke names the key to revoke at once: its hash, a prefix of its hash, or
	// RevokeOldKeys for every key but the newest.
	Revoke string
}

// Requested reports whether a key change is asked for.
func (k KeyChange) Requested() bool { return k.Rotate || k.Revoke != "" }

// ChangeKeys rotates or revokes the tenant's API keys. It returns what it did, in
// sentences; a new key is in them, and is shown nowhere else.
func ChangeKeys(ctx context.Context, st payment.APIKeyAdmin, tenantID string, k KeyChange, now time.Time) (string, error) {
	if err := payment.ValidateTenantID(tenantID); err != nil {
		return "", err
	}
	switch {
	case k.Rotate && k.Revoke != "":
		return "", errors.New("tenant: give -rotate-api-key or -revoke-api-key, not both")
	case k.Rotate:
		if k.Overlap < 0 {
			return "", errors.New("tenant: -api-key-overlap must not be negative")
		}
		key, err := NewAPIKey()
		if err != nil {
			return "", err
		}
		until := now.Add(k.Overlap)
		if err := st.AddAPIKey(ctx, tenantID, api.HashAPIKey(key), until); err != nil {
			return "", err
		}
		return fmt.Sprintf("tenant %s: new API key (shown only now): %s\nits hash: %s\nthe tenant's other keys work until %s",
			tenantID, key, api.HashAPIKey(key), until.UTC().Format(time.RFC3339)), nil
	}
	keys, err := st.TenantAPIKeys(ctx, tenantID)
	if err != nil {
		return "", err
	}
	hashes, err := keysToRevoke(keys, k.Revoke, now)
	if err != nil {
		return "", fmt.Errorf("tenant %s: %w", tenantID, err)
	}
	n, err := st.RevokeAPIKeys(ctx, tenantID, hashes)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("tenant %s: %d API key(s) revoked; every API process refuses them within a second", tenantID, n), nil
}

// keysToRevoke resolves which among keys (newest first): a hash, a prefix of one
// (unique among the tenant's keys), or RevokeOldKeys (every key but the newest valid).
func keysToRevoke(keys []payment.APIKey, which string, now time.Time) ([]string, error) {
	if which == RevokeOldKeys {
		var out []string
		newest := true
		for _, k := range keys {
			if newest && k.ValidAt(now) {
				newest = false
				continue
			}
			if k.RevokedAt.IsZero() {
				out = append(out, k.Hash)
			}
		}
		if newest {
			return nil, errors.New("has no valid key to keep")
		}
		return out, nil
	}
	which = strings.ToLower(which)
	if len(which) < minHashPrefix {
		return nil, fmt.Errorf("-revoke-api-key takes a key's hash or at least %d of its first characters, or %q", minHashPrefix, RevokeOldKeys)
	}
	var out []string
	for _, k := range keys {
		if strings.HasPrefix(k.Hash, which) {
			out = append(out, k.Hash)
		}
	}
	switch len(out) {
	case 0:
		return nil, fmt.Errorf("no key whose hash starts with %s", which)
	case 1:
		return out, nil
	}
	return nil, fmt.Errorf("%d keys' hashes start with %s: give more of it", len(out), which)
}
