-- A tenant's API keys, by the SHA-256 of the key (api.HashAPIKey): two or more during a
-- rotation, the rotated-out ones with an expires_at (paykit tenant -rotate-api-key), and
-- revoked ones kept with their revoked_at (-revoke-api-key). A key authenticates while it
-- is neither revoked nor expired. tenants.api_key_hash stays written with the tenant's
-- newest key, and is still read for a key it holds that has no row here (one an older
-- binary set during a rolling upgrade); a later release drops it.
-- updated_at is set on every change; idx_api_keys_updated lets every API process read the
-- keys changed in the last minute, about every half second, to drop a revoked key from its
-- cache (api/auth.go).

-- +goose Up
CREATE TABLE api_keys (
    key_hash   CHAR(64)    NOT NULL,
    tenant_id  VARCHAR(64) NOT NULL,
    created_at DATETIME(6) NOT NULL,
    expires_at DATETIME(6) NULL,
    revoked_at DATETIME(6) NULL,
    updated_at DATETIME(6) NOT NULL,
    PRIMARY KEY (key_hash),
    KEY idx_api_keys_tenant (tenant_id, created_at),
    KEY idx_api_keys_updated (updated_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
-- Dropping the keys is refused while a rotated-out key is still in its overlap window or
-- a key is revoked (migrations.Options.Force overrides): older binaries read only
-- tenants.api_key_hash, the newest key, so the overlap would end at once, and a revoked
-- key there would be trusted again.
-- +paykit down-guard: SELECT 1 FROM api_keys k JOIN tenants t ON t.id = k.tenant_id WHERE (k.expires_at IS NOT NULL AND k.revoked_at IS NULL AND k.expires_at > NOW(6)) OR (k.revoked_at IS NOT NULL AND k.key_hash = t.api_key_hash) LIMIT 1
DROP TABLE api_keys;
