-- Alipay's notifications are an inbox: a verified one is acknowledged as soon as it is
-- recorded, and paykit hands it to its payment until it is settled by its effect.
-- dispatch_due_at is when an unsettled one is next handed over (NULL once settled, and
-- for unverified ones), dispatch_attempts counts the hand-overs after the first, and
-- settled_at is when its effect was seen. idx_channel_notifications_due serves the
-- re-dispatch sweep (a range of unsettled rows only) and idx_channel_notifications_received
-- the retention purge. Rows from before this migration need nothing more: they were
-- answered failure until handled, so Alipay redelivers any that were not.

-- +goose Up
ALTER TABLE channel_notifications
    ADD COLUMN dispatch_due_at   DATETIME(6) NULL,
    ADD COLUMN dispatch_attempts INT         NOT NULL DEFAULT 0,
    ADD COLUMN settled_at        DATETIME(6) NULL,
    ADD KEY idx_channel_notifications_due (dispatch_due_at),
    ADD KEY idx_channel_notifications_received (received_at);

-- +goose Down
-- An unsettled notification was acknowledged to Alipay, which will not deliver it again:
-- dropping the columns would lose it, so that is refused while there is one.
-- +paykit down-guard: SELECT 1 FROM channel_notifications WHERE dispatch_due_at IS NOT NULL LIMIT 1
ALTER TABLE channel_notifications
    DROP KEY idx_channel_notifications_received,
    DROP KEY idx_channel_notifications_due,
    DROP COLUMN settled_at,
    DROP COLUMN dispatch_attempts,
    DROP COLUMN dispatch_due_at;
