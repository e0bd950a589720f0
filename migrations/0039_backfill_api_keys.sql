-- Every tenant's key (tenants.api_key_hash) gets its row in api_keys (0038), with the
-- tenant's created_at: a key older than 0038 never expires until it is rotated out or
-- revoked. updated_at is created_at too, so that no API process takes the backfill for a
-- change of keys.
--
-- The statement is batched ("+paykit batched": the runner runs it again, each run its own
-- transaction, until it inserts no row), so that a large tenants table never makes one
-- transaction bigger than TiDB's limit. It inserts only the keys that have no row yet, so
-- it is safe to run again, and a key an older binary sets while it runs is read from
-- tenants.api_key_hash as before.

-- +paykit batched
-- +goose Up
INSERT INTO api_keys (key_hash, tenant_id, created_at, updated_at)
SELECT t.api_key_hash, t.id, t.created_at, t.created_at
FROM tenants t LEFT JOIN api_keys k ON k.key_hash = t.api_key_hash
WHERE k.key_hash IS NULL
ORDER BY t.id
LIMIT 1000;

-- +goose Down
-- Nothing to undo: 0038 drops the table.
SELECT 1;
