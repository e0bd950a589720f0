-- A tenant may have the money of a paid_after_close anomaly (Alipay took it for a
-- payment that was already closed locally) refunded automatically, through the refund
-- workflow, as soon as the anomaly is recorded. Off by default: the operator resolves
-- it with `paykit anomalies -resolve-refund`.

-- +goose Up
ALTER TABLE tenants
    ADD COLUMN auto_refund_paid_after_close TINYINT(1) NOT NULL DEFAULT 0 AFTER alipay_seller_id;

-- +goose Down
ALTER TABLE tenants DROP COLUMN auto_refund_paid_after_close;
