-- Tenants are the merchants using the system. Only the SHA-256 of an API key is stored.
-- Every table uses utf8mb4_bin so that identifiers compare exactly (order "A1" is not
-- order "a1") on both MySQL 8 and MariaDB, whose default collations differ.

-- +goose Up
CREATE TABLE tenants (
    id               VARCHAR(64)   NOT NULL,
    name             VARCHAR(255)  NOT NULL DEFAULT '',
    api_key_hash     CHAR(64)      NOT NULL,
    notify_url       VARCHAR(1024) NOT NULL DEFAULT '',
    webhook_secret   VARCHAR(255)  NOT NULL DEFAULT '',
    alipay_app_id    VARCHAR(64)   NOT NULL DEFAULT '',
    alipay_seller_id VARCHAR(64)   NOT NULL DEFAULT '',
    created_at       DATETIME(6)   NOT NULL,
    updated_at       DATETIME(6)   NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_tenants_api_key_hash (api_key_hash)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
-- Dropping these records is refused while there are any (migrations.Options.Force overrides).
-- +paykit down-guard: SELECT 1 FROM tenants LIMIT 1
DROP TABLE tenants;
