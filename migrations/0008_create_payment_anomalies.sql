-- Anomalies an operator must look at. UNIQUE(kind, payment_no) makes recording one twice
-- a no-op, so the code that detects it may retry freely.

-- +goose Up
CREATE TABLE payment_anomalies (
    id         BIGINT       NOT NULL AUTO_INCREMENT,
    kind       VARCHAR(64)  NOT NULL,
    tenant_id  VARCHAR(64)  NOT NULL DEFAULT '',
    payment_no VARCHAR(64)  NOT NULL,
    trade_no   VARCHAR(64)  NOT NULL DEFAULT '',
    amount_fen BIGINT       NOT NULL DEFAULT 0,
    detail     TEXT         NOT NULL,
    created_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_payment_anomalies (kind, payment_no),
    KEY idx_payment_anomalies_created (created_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
-- Dropping these records is refused while there are any (migrations.Options.Force overrides).
-- +paykit down-guard: SELECT 1 FROM payment_anomalies LIMIT 1
DROP TABLE payment_anomalies;
