-- Orders mirror the merchant's order: one row per (tenant_id, order_id), whatever the
-- number of payment attempts. status: 0 unpaid, 1 paid, 2 cancelled.

-- +goose Up
CREATE TABLE orders (
    id              BIGINT      NOT NULL AUTO_INCREMENT,
    tenant_id       VARCHAR(64) NOT NULL,
    order_id        VARCHAR(64) NOT NULL,
    amount_fen      BIGINT      NOT NULL,
    currency        CHAR(3)     NOT NULL,
    status          TINYINT     NOT NULL DEFAULT 0,
    paid_payment_no VARCHAR(64) NULL,
    created_at      DATETIME(6) NOT NULL,
    updated_at      DATETIME(6) NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_orders_tenant_order (tenant_id, order_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
-- Dropping these records is refused while there are any (migrations.Options.Force overrides).
-- +paykit down-guard: SELECT 1 FROM orders LIMIT 1
DROP TABLE orders;
