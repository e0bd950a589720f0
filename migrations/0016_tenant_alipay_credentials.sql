-- A tenant may have its own Alipay app: its app private key, Alipay public key or
-- certificates, sealed with AES-256-GCM under the secrets keyring (PAYKIT_SECRETS_KEYS)
-- and bound to the tenant, so the database never holds them in the clear. NULL means
-- the tenant's payments go through the deployment's default app. Notifications are
-- routed to an app by app_id, hence the index.

-- +goose Up
ALTER TABLE tenants
    ADD COLUMN alipay_credentials TEXT NULL AFTER alipay_seller_id,
    ADD KEY idx_tenants_alipay_app_id (alipay_app_id);

-- +goose Down
ALTER TABLE tenants DROP KEY idx_tenants_alipay_app_id, DROP COLUMN alipay_credentials;
