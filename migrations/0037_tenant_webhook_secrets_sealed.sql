-- A tenant's webhook secrets are sealed at rest, as its Alipay keys are (0016): AES-256-GCM
-- under the secrets keyring (PAYKIT_SECRETS_KEYS), bound to the tenant
-- (payment.WebhookSecretAAD). webhook_secret_sealed is the current secret,
-- previous_webhook_secret_sealed the one a rotation replaced (0017); the seal is bound to
-- the tenant and not to the column, so a rotation moves the current ciphertext to the
-- previous column as it is. NULL means the secret is in the clear column of before
-- (webhook_secret, previous_webhook_secret), read as well until `paykit tenant -reencrypt`
-- seals it and empties the clear column.
--
-- INSTANT: only the table's metadata changes, on MariaDB 10.3+, MySQL 8.0 and TiDB.

-- +goose Up
ALTER TABLE tenants
    ADD COLUMN webhook_secret_sealed TEXT NULL,
    ADD COLUMN previous_webhook_secret_sealed TEXT NULL, ALGORITHM = INSTANT;

-- +goose Down
-- Dropping sealed secrets is refused while there are any (migrations.Options.Force overrides):
-- their tenants' webhooks could no longer be signed.
-- +paykit down-guard: SELECT 1 FROM tenants WHERE webhook_secret_sealed IS NOT NULL OR previous_webhook_secret_sealed IS NOT NULL LIMIT 1
ALTER TABLE tenants DROP COLUMN previous_webhook_secret_sealed, DROP COLUMN webhook_secret_sealed;
