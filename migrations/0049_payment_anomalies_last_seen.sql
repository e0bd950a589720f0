-- last_seen_at is when an anomaly was last recorded: recording one that exists changes
-- nothing else, so a resolved anomaly recorded again after its resolution (the problem
-- came back, or was never fixed) shows it, and is not purged while it keeps being seen.

-- +goose Up
ALTER TABLE payment_anomalies ADD COLUMN last_seen_at DATETIME(6) NULL DEFAULT NULL, ALGORITHM = INSTANT;

-- +goose Down
ALTER TABLE payment_anomalies DROP COLUMN last_seen_at;
