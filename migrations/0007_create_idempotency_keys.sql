-- Idempotency-Key records: state 0 in flight, 1 completed. lock_version is bumped by every
-- takeover so that exactly one of several concurrent takers wins its compare-and-set.

-- +goose Up
CREATE TABLE idempotency_keys (
    id              BIGINT       NOT NULL AUTO_INCREMENT,
    tenant_id       VARCHAR(64)  NOT NULL,
    idem_key        VARCHAR(255) NOT NULL,
    fingerprint     VARCHAR(128) NOT NULL,
    state           TINYINT      NOT NULL DEFAULT 0,
    response_status INT          NOT NULL DEFAULT 0,
    response_body   MEDIUMBLOB   NULL,
    lock_version    BIGINT       NOT NULL DEFAULT 0,
    locked_until    DATETIME(6)  NOT NULL,
    expires_at      DATETIME(6)  NOT NULL,
    created_at      DATETIME(6)  NOT NULL,
    updated_at      DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_idempotency_keys (tenant_id, idem_key),
    KEY idx_idempotency_keys_expires_at (expires_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE idempotency_keys;
