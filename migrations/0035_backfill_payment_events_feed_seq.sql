-- Events written before 0033 keep the position they were listed at: their id. The UPDATE
-- touches only events without a position, so it is safe to run again. 0036 raises each
-- tenant's count past these positions.
-- Events that a binary older than 0033 writes after this ran have no position and are not
-- listed by the feed (they are still delivered by webhook): stop the older binaries before
-- migrating, as the README's upgrade note says.

-- +goose Up
UPDATE payment_events SET feed_seq = id WHERE feed_seq IS NULL;

-- +goose Down
UPDATE payment_events SET feed_seq = NULL;
