-- A refund records the Alipay app its payment was opened on (payments.alipay_app_id, ''
-- the default app as 0029 says), copied from the payment when it is created: Alipay
-- refunds a trade only through the app that holds it.

-- +goose Up
ALTER TABLE refunds ADD COLUMN alipay_app_id VARCHAR(64) NOT NULL DEFAULT '', ALGORITHM = INSTANT;

-- +goose Down
ALTER TABLE refunds DROP COLUMN alipay_app_id;
