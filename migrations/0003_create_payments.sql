-- Payments are attempts to collect money for an order; payment_no is the Alipay
-- out_trade_no. status: 0 pending, 1 paid, 2 closed, 3 failed.
--
-- active_order_id holds order_id only while the payment is pending and NULL otherwise.
-- NULLs never collide in a unique index, so UNIQUE(tenant_id, active_order_id) allows at
-- most one pending payment per order while any number of paid, closed or failed
-- payments (history, re-purchase) may share the order. It is the last line of defence
-- against duplicate pending payments: it holds even if every layer above it fails.

-- +goose Up
CREATE TABLE payments (
    id              BIGINT        NOT NULL AUTO_INCREMENT,
    payment_no      VARCHAR(64)   NOT NULL,
    tenant_id       VARCHAR(64)   NOT NULL,
    order_id        VARCHAR(64)   NOT NULL,
    amount_fen      BIGINT        NOT NULL,
    currency        CHAR(3)       NOT NULL,
    subject         VARCHAR(256)  NOT NULL,
    status          TINYINT       NOT NULL DEFAULT 0,
    active_order_id VARCHAR(64) AS (IF(status = 0, order_id, NULL)) STORED,
    trade_no        VARCHAR(64)   NULL,
    expire_at       DATETIME(6)   NOT NULL,
    paid_at         DATETIME(6)   NULL,
    close_reason    VARCHAR(512)  NOT NULL DEFAULT '',
    workflow_id     VARCHAR(255)  NOT NULL DEFAULT '',
    version         BIGINT        NOT NULL DEFAULT 0,
    created_at      DATETIME(6)   NOT NULL,
    updated_at      DATETIME(6)   NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_payments_payment_no (payment_no),
    UNIQUE KEY uk_payments_active_order (tenant_id, active_order_id),
    UNIQUE KEY uk_payments_trade_no (trade_no),
    KEY idx_payments_status_created (status, created_at),
    KEY idx_payments_tenant_order (tenant_id, order_id, created_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
-- Dropping these records is refused while there are any (migrations.Options.Force overrides).
-- +paykit down-guard: SELECT 1 FROM payments LIMIT 1
DROP TABLE payments;
