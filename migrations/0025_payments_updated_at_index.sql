-- The scheduled audit checks what changed, not what was created: every payment whose row,
-- refunds or outbox events changed in its window (this and the next three migrations). A
-- late PAID, money arriving for a CLOSED payment, a refund made weeks later or an event
-- given up on is therefore checked once it happens, not only once an hour after the
-- payment was created.
--
-- paykit writes updated_at itself, with its own clock, on every change. ON UPDATE
-- CURRENT_TIMESTAMP(6) makes the database stamp every other change too: a row corrected
-- by hand, or by a tool that does not know the column, still lands in the next window.
-- paykit's sessions run with time_zone '+00:00'; a session changing rows by hand should
-- too (or the server's time zone be UTC), so that its stamp is in the same zone.
-- idx_payments_updated makes a window a range read, paged by (updated_at, id).

-- +goose Up
ALTER TABLE payments
    MODIFY updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
    ADD KEY idx_payments_updated (updated_at), ALGORITHM = INPLACE, LOCK = NONE;

-- +goose Down
ALTER TABLE payments DROP KEY idx_payments_updated, MODIFY updated_at DATETIME(6) NOT NULL;
