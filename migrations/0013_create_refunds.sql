-- Refunds of paid payments, and each payment's running refunded total.
--
-- payments.refunded_fen is the sum of the payment's refunds that have not failed: it is
-- raised in the transaction that inserts a refund, under the payment's row lock, by a
-- compare-and-set that refuses to go above amount_fen, and lowered in the transaction
-- that marks a refund failed. The sum can therefore never exceed what was paid, even if
-- every layer above the database misbehaves.
--
-- refund_no is the merchant's id for a refund, unique per tenant; out_request_no is
-- Alipay's idempotency key for it, derived from (tenant_id, refund_no) and unique
-- everywhere. status: 0 pending, 1 succeeded, 2 failed.

-- Several statements: this file adds a column to payments and creates refunds. It was applied as one
-- migration before the rule of one DDL statement per file; splitting it would renumber
-- applied versions. The runner makes it safe to re-run after an interruption.
-- +goose Up
ALTER TABLE payments
    ADD COLUMN refunded_fen BIGINT NOT NULL DEFAULT 0 AFTER amount_fen;

CREATE TABLE refunds (
    id             BIGINT        NOT NULL AUTO_INCREMENT,
    refund_no      VARCHAR(64)   NOT NULL,
    tenant_id      VARCHAR(64)   NOT NULL,
    payment_no     VARCHAR(64)   NOT NULL,
    out_request_no VARCHAR(64)   NOT NULL,
    amount_fen     BIGINT        NOT NULL,
    reason         VARCHAR(256)  NOT NULL DEFAULT '',
    status         TINYINT       NOT NULL DEFAULT 0,
    fail_reason    VARCHAR(512)  NOT NULL DEFAULT '',
    trade_no       VARCHAR(64)   NOT NULL DEFAULT '',
    workflow_id    VARCHAR(255)  NOT NULL DEFAULT '',
    refunded_at    DATETIME(6)   NULL,
    version        BIGINT        NOT NULL DEFAULT 0,
    created_at     DATETIME(6)   NOT NULL,
    updated_at     DATETIME(6)   NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_refunds_tenant_refund_no (tenant_id, refund_no),
    UNIQUE KEY uk_refunds_out_request_no (out_request_no),
    KEY idx_refunds_payment (payment_no, created_at),
    KEY idx_refunds_status_created (status, created_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
-- Dropping these records is refused while there are any (migrations.Options.Force overrides).
-- +paykit down-guard: SELECT 1 FROM refunds LIMIT 1
DROP TABLE refunds;
ALTER TABLE payments DROP COLUMN refunded_fen;
