-- The purge of resolved anomalies reads a range of resolved_at (0047).

-- +goose Up
ALTER TABLE payment_anomalies ADD KEY idx_payment_anomalies_resolved (resolved_at), ALGORITHM = INPLACE, LOCK = NONE;

-- +goose Down
ALTER TABLE payment_anomalies DROP KEY idx_payment_anomalies_resolved;
