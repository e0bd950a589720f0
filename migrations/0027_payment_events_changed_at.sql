-- As 0025 for the outbox, which had no such column: changed_at is NULL until the row is
-- first updated (a delivery attempt, dead, delivered, a redelivery by an operator), and
-- the database stamps every update. An event's creation is covered by its payment's
-- updated_at, written in the same transaction. idx_payment_events_changed makes the
-- audit's window of changed events a range read.

-- +goose Up
ALTER TABLE payment_events
    ADD COLUMN changed_at DATETIME(6) NULL DEFAULT NULL ON UPDATE CURRENT_TIMESTAMP(6) AFTER delivered_at,
    ADD KEY idx_payment_events_changed (changed_at), ALGORITHM = INPLACE, LOCK = NONE;

-- +goose Down
ALTER TABLE payment_events DROP KEY idx_payment_events_changed, DROP COLUMN changed_at;
