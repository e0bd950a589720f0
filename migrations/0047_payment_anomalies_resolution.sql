-- An anomaly is open until an operator resolves it (paykit anomalies -resolve): resolved_at
-- and the operator's note say when and how. Resolved anomalies are purged after
-- PAYKIT_ANOMALY_RETENTION by the scheduled purge; open ones are kept whatever their age.
-- 0048 keys resolved_at for that purge.

-- +goose Up
ALTER TABLE payment_anomalies
    ADD COLUMN resolved_at DATETIME(6) NULL DEFAULT NULL,
    ADD COLUMN resolution VARCHAR(512) NOT NULL DEFAULT '', ALGORITHM = INSTANT;

-- +goose Down
-- Dropping the columns reopens every resolved anomaly; refused while one is resolved
-- (migrations.Options.Force overrides).
-- +paykit down-guard: SELECT 1 FROM payment_anomalies WHERE resolved_at IS NOT NULL LIMIT 1
ALTER TABLE payment_anomalies DROP COLUMN resolution, DROP COLUMN resolved_at;
