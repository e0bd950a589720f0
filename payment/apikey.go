package payment

import (
	"context"
	"time"
)

// APIKey is one of a tenant's API keys, by its hash (the key itself is never stored).
// A tenant holds two during a rotation: the new one, and the old one with an ExpiresAt.
type APIKey struct {
	Hash      string
	TenantID  string
	CreatedAt time.Time
	// ExpiresAt is when the key stops authenticating; zero is never.
	ExpiresAt time.Time
	// RevokedAt is when the key was revoked; zero is not revoked.
	RevokedAt time.Time
	// UpdatedAt is when the key's row last changed.
	UpdatedAt time.Time
}

// ValidAt reports whether the key authenticates at now: neither revoked nor expired.
func (k APIKey) ValidAt(now time.Time) bool {
	return k.RevokedAt.IsZero() && (k.ExpiresAt.IsZero() || now.Before(k.ExpiresAt))
}

// APIKeys are what authentication reads: a key with its tenant, and the keys that
// changed lately, which every API process drops from its cache.
type APIKeys interface {
	// TenantAPIKey returns the key with this hash, revoked or expired ones included, and
	// its tenant, or an error wrapping ErrNotFound.
	TenantAPIKey(ctx context.Context, hash string) (APIKey, Tenant, error)
	// APIKeysChangedSince returns up to limit keys whose rows changed at or after since.
	APIKeysChangedSince(ctx context.Context, since time.Time, limit int) ([]APIKey, error)
}

// APIKeyAdmin are the writes of a tenant's API keys (`paykit tenant`).
type APIKeyAdmin interface {
	// TenantAPIKeys returns the tenant's keys, newest first.
	TenantAPIKeys(ctx context.Context, tenantID string) ([]APIKey, error)
	// AddAPIKey makes hash the tenant's newest key and makes every other key of the
	// tenant that is still valid expire at oldValidUntil (earlier expiries are kept).
	AddAPIKey(ctx context.Context, tenantID, hash string, oldValidUntil time.Time) error
	// RevokeAPIKeys revokes the tenant's keys of hashes that are not yet revoked and
	// returns how many it revoked.
	RevokeAPIKeys(ctx context.Context, tenantID string, hashes []string) (int, error)
}
