-- last_seen_at is when an anomaly was last recorded: recording one that exists changes
-- nothing else, so a resolved anomaly recorded again after its resolution (the problem
-- came back, or was never fixed) shows it, and is not purged while it keeps being seen.

-- +goose Up
ALTER TABLE payment_anomalies ADD COLUMN last_seen_at DATETIME(6) NULL DEFAULT NULL, ALGORITHM = INSTANT;

-- +goose Down
-- Dropping the column forgets that a resolved anomaly was seen again after its resolution:
-- it shows as resolved, and the purge deletes it once its resolution is past the
-- retention, however recently it came back. Refused while one was (migrations.Options.Force
-- overrides).
-- +paykit down-guard: SELECT 1 FROM payment_anomalies WHERE last_seen_at > resolved_at LIMIT 1
ALTER TABLE payment_anomalies DROP COLUMN last_seen_at;
