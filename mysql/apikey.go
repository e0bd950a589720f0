package mysql

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/paykit/paykit/payment"
)

const apiKeyColumns = `key_hash, tenant_id, created_at, expires_at, revoked_at, updated_at`

const (
	qAPIKeyByHash      = `SELECT ` + apiKeyColumns + ` FROM api_keys WHERE key_hash = ?`
	qAPIKeysOfTenant   = `SELECT ` + apiKeyColumns + ` FROM api_keys WHERE tenant_id = ? ORDER BY created_at DESC, key_hash LIMIT 100`
	qAPIKeysChanged    = `SELECT ` + apiKeyColumns + ` FROM api_keys WHERE updated_at >= ? ORDER BY updated_at LIMIT ?`
	qInsertAPIKey      = `INSERT INTO api_keys (key_hash, tenant_id, created_at, updated_at) VALUES (?, ?, ?, ?)`
	qEnsureAPIKey      = `INSERT INTO api_keys (key_hash, tenant_id, created_at, updated_at) VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE key_hash = key_hash`
	qAdoptTenantAPIKey = `INSERT INTO api_keys (key_hash, tenant_id, created_at, updated_at)
SELECT api_key_hash, id, created_at, ? FROM tenants WHERE id = ?
ON DUPLICATE KEY UPDATE key_hash = api_keys.key_hash`
	qExpireOtherAPIKeys = `UPDATE api_keys SET expires_at = ?, updated_at = ?
WHERE tenant_id = ? AND key_hash <> ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)`
	qRevokeOtherAPIKeys = `UPDATE api_keys SET revoked_at = ?, updated_at = ?
WHERE tenant_id = ? AND key_hash <> ? AND revoked_at IS NULL`
	qNewestValidAPIKey = `SELECT key_hash FROM api_keys WHERE tenant_id = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)
ORDER BY created_at DESC, key_hash LIMIT 1`
	qSetTenantAPIKeyHash = `UPDATE tenants SET api_key_hash = ?, updated_at = ? WHERE id = ?`
)

func scanAPIKey(row interface{ Scan(...any) error }) (payment.APIKey, error) {
	var (
		k                payment.APIKey
		expires, revoked sql.NullTime
	)
	err := row.Scan(&k.Hash, &k.TenantID, &k.CreatedAt, &expires, &revoked, &k.UpdatedAt)
	k.ExpiresAt, k.RevokedAt = expires.Time, revoked.Time
	return k, err
}

// TenantAPIKey returns the API key with this hash (revoked and expired ones included)
// and its tenant. A key that has no row in api_keys but is its tenant's
// tenants.api_key_hash (set by a binary older than 0038 during a rolling upgrade) is
// returned as a valid key.
func (st *Store) TenantAPIKey(ctx context.Context, hash string) (payment.APIKey, payment.Tenant, error) {
	var k payment.APIKey
	err := st.queryRow(ctx, nil, qAPIKeyByHash, []any{hash}, func(row *sql.Row) error {
		var err error
		k, err = scanAPIKey(row)
		return err
	})
	switch {
	case err == nil:
		t, err := st.getTenant(ctx, nil, qTenantByID, k.TenantID)
		if err != nil {
			return k, t, fmt.Errorf("mysql: tenant of api key: %w", err)
		}
		return k, t, nil
	case !errors.Is(err, payment.ErrNotFound):
		return k, payment.Tenant{}, fmt.Errorf("mysql: api key: %w", err)
	}
	t, err := st.getTenant(ctx, nil, qTenantByHash, hash)
	if err != nil {
		return k, t, fmt.Errorf("mysql: tenant by key: %w", err)
	}
	return payment.APIKey{Hash: hash, TenantID: t.ID, CreatedAt: t.CreatedAt, UpdatedAt: t.CreatedAt}, t, nil
}

// APIKeysChangedSince returns up to limit keys whose rows changed at or after since,
// oldest change first.
func (st *Store) APIKeysChangedSince(ctx context.Context, since time.Time, limit int) ([]payment.APIKey, error) {
	return st.apiKeys(ctx, "api keys changed", qAPIKeysChanged, dbTime(since), limit)
}

// TenantAPIKeys returns the tenant's keys, newest first (at most 100).
func (st *Store) TenantAPIKeys(ctx context.Context, tenantID string) ([]payment.APIKey, error) {
	return st.apiKeys(ctx, "api keys of "+tenantID, qAPIKeysOfTenant, tenantID)
}

func (st *Store) apiKeys(ctx context.Context, what, query string, args ...any) ([]payment.APIKey, error) {
	var out []payment.APIKey
	err := st.query(ctx, query, args, func(rows *sql.Rows) error {
		k, err := scanAPIKey(rows)
		out = append(out, k)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: %s: %w", what, err)
	}
	return out, nil
}

// AddAPIKey makes hash the tenant's newest key (and its tenants.api_key_hash, which
// older binaries read), and makes every other valid key of the tenant expire at
// oldValidUntil unless it expires sooner. A hash already stored is ECONFLICT.
func (st *Store) AddAPIKey(ctx context.Context, tenantID, hash string, oldValidUntil time.Time) error {
	if hash == "" || len(hash) > maxAPIKeyHash {
		return payment.Errorf(payment.EINVALID, "api key hash must be 1-%d characters", maxAPIKeyHash)
	}
	until := dbTime(oldValidUntil)
	err := st.inTx(ctx, func(tx *sql.Tx) error {
		now := st.clock()
		if _, err := st.getTenant(ctx, tx, qTenantByIDForUpdate, tenantID); err != nil {
			return err
		}
		if _, err := st.exec(ctx, tx, qAdoptTenantAPIKey, now, tenantID); err != nil {
			return err
		}
		if _, err := st.exec(ctx, tx, qExpireOtherAPIKeys, until, now, tenantID, hash, until); err != nil {
			return err
		}
		if _, err := st.exec(ctx, tx, qInsertAPIKey, hash, tenantID, now, now); err != nil {
			if IsDuplicate(err) {
				return payment.Errorf(payment.ECONFLICT, "api key hash already stored")
			}
			return err
		}
		_, err := st.exec(ctx, tx, qSetTenantAPIKeyHash, hash, now, tenantID)
		return err
	})
	if err != nil {
		return fmt.Errorf("mysql: add api key of %s: %w", tenantID, err)
	}
	return nil
}

// RevokeAPIKeys revokes the tenant's keys of hashes not yet revoked, and returns how many
// it revoked. If the tenant's tenants.api_key_hash is among them, the column takes the
// tenant's newest key still valid, or an unusable hash when none is left, so that a
// binary older than 0038 stops accepting it too.
func (st *Store) RevokeAPIKeys(ctx context.Context, tenantID string, hashes []string) (int, error) {
	if len(hashes) == 0 {
		return 0, nil
	}
	var revoked int
	err := st.inTx(ctx, func(tx *sql.Tx) error {
		now := st.clock()
		t, err := st.getTenant(ctx, tx, qTenantByIDForUpdate, tenantID)
		if err != nil {
			return err
		}
		if _, err := st.exec(ctx, tx, qAdoptTenantAPIKey, now, tenantID); err != nil {
			return err
		}
		marks := strings.TrimSuffix(strings.Repeat("?,", len(hashes)), ",")
		args := []any{now, now, tenantID}
		for _, h := range hashes {
			args = append(args, h)
		}
		// The number of hashes varies: not a prepared statement of the cache.
		res, err := tx.ExecContext(ctx, `UPDATE api_keys SET revoked_at = ?, updated_at = ?
WHERE tenant_id = ? AND revoked_at IS NULL AND key_hash IN (`+marks+`)`, args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		revoked = int(n)
		var current string
		err = st.queryRow(ctx, tx, qNewestValidAPIKey, []any{tenantID, now}, func(row *sql.Row) error { return row.Scan(&current) })
		switch {
		case errors.Is(err, payment.ErrNotFound):
			current = unusableKeyHash()
		case err != nil:
			return err
		}
		if current == t.APIKeyHash {
			return nil
		}
		_, err = st.exec(ctx, tx, qSetTenantAPIKeyHash, current, now, tenantID)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("mysql: revoke api keys of %s: %w", tenantID, err)
	}
	return revoked, nil
}

// syncAPIKey gives the key UpsertTenant writes (hash) its row in api_keys. A key that
// replaces the tenant's key (old) revokes every other key of the tenant: `paykit tenant
// -api-key` replaces at once, where -rotate-api-key keeps the old key for a while.
func (st *Store) syncAPIKey(ctx context.Context, tx *sql.Tx, tenantID, hash, old string, now time.Time) error {
	k, err := st.apiKey(ctx, tx, hash)
	switch {
	case err == nil && k.TenantID != tenantID:
		return payment.Errorf(payment.ECONFLICT, "api key hash already belongs to another tenant")
	case err == nil && !k.RevokedAt.IsZero():
		return payment.Errorf(payment.ECONFLICT, "api key was revoked; give a new one")
	case err != nil && !errors.Is(err, payment.ErrNotFound):
		return err
	}
	if _, err := st.exec(ctx, tx, qEnsureAPIKey, hash, tenantID, now, now); err != nil {
		return err
	}
	if old == "" || old == hash {
		return nil
	}
	_, err = st.exec(ctx, tx, qRevokeOtherAPIKeys, now, now, tenantID, hash)
	return err
}

func (st *Store) apiKey(ctx context.Context, tx *sql.Tx, hash string) (payment.APIKey, error) {
	var k payment.APIKey
	err := st.queryRow(ctx, tx, qAPIKeyByHash, []any{hash}, func(row *sql.Row) error {
		var err error
		k, err = scanAPIKey(row)
		return err
	})
	return k, err
}

// unusableKeyHash is a hash no key has: SHA-256 of random bytes never handed out.
func unusableKeyHash() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	sum := sha256.Sum256(b[:])
	return hex.EncodeToString(sum[:])
}
