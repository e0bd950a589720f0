-- A tenant may have its own Alipay app: its app private key, Alipay public key or
-- certificates, sealed with AES-256-GCM under the secrets keyring (PAYKIT_SECRETS_KEYS)
-- and bound to the tenant, so the database never holds them in the clear. NULL means
-- the tenant's payments go through the deployment's default app. A notification is
-- routed to the tenants that hold their own keys for its app_id, hence the index (the
-- prefix of the ciphertext only serves IS NOT NULL, so that the many tenants on the
-- default app are not read for each notification).

-- +goose Up
ALTER TABLE tenants
    ADD COLUMN alipay_credentials TEXT NULL AFTER alipay_seller_id,
    ADD KEY idx_tenants_alipay_app (alipay_app_id, alipay_credentials(8));

-- +goose Down
-- Dropping these records is refused while there are any (migrations.Options.Force overrides).
-- +paykit down-guard: SELECT 1 FROM tenants WHERE alipay_credentials IS NOT NULL LIMIT 1
ALTER TABLE tenants DROP KEY idx_tenants_alipay_app, DROP COLUMN alipay_credentials;
