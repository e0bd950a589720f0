-- An anomaly's identity is what it is about, not only its kind and payment: subject names
-- it within the payment (a refund's out_request_no, a notification's notify_id, a bill
-- line's reference; '' for the payment as a whole). The rows recorded before keep ''.
-- 0043 moves the unique key onto it.

-- +goose Up
ALTER TABLE payment_anomalies ADD COLUMN subject VARCHAR(128) NOT NULL DEFAULT '', ALGORITHM = INSTANT;

-- +goose Down
-- Dropping the column forgets which refund or notification each anomaly is about; refused
-- while an anomaly names one (migrations.Options.Force overrides).
-- +paykit down-guard: SELECT 1 FROM payment_anomalies WHERE subject <> '' LIMIT 1
ALTER TABLE payment_anomalies DROP COLUMN subject;
