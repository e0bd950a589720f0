-- The list of anomalies (paykit anomalies -since) takes those recorded or seen again
-- since a time, newest seen first: the newest of a range of created_at (0008's key) and
-- of a range of last_seen_at (0049), this key. Without it, an anomaly seen again was
-- found only by reading the whole table.

-- +goose Up
ALTER TABLE payment_anomalies ADD KEY idx_payment_anomalies_last_seen (last_seen_at), ALGORITHM = INPLACE, LOCK = NONE;

-- +goose Down
ALTER TABLE payment_anomalies DROP KEY idx_payment_anomalies_last_seen;
