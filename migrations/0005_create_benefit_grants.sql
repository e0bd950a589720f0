-- A benefit is granted at most once per (tenant_id, payment_no, benefit).

-- +goose Up
CREATE TABLE benefit_grants (
    id         BIGINT       NOT NULL AUTO_INCREMENT,
    tenant_id  VARCHAR(64)  NOT NULL,
    payment_no VARCHAR(64)  NOT NULL,
    order_id   VARCHAR(64)  NOT NULL,
    benefit    VARCHAR(128) NOT NULL,
    created_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_benefit_grants (tenant_id, payment_no, benefit)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
-- Dropping these records is refused while there are any (migrations.Options.Force overrides).
-- +paykit down-guard: SELECT 1 FROM benefit_grants LIMIT 1
DROP TABLE benefit_grants;
