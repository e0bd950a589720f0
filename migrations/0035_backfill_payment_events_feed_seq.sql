-- Events written before 0033 keep the position they were listed at: their id. The UPDATE
-- touches only events without a position, so it is safe to run again. 0036 raises each
-- tenant's count past these positions.
-- Events that a binary older than 0033 writes after this ran have no position and are not
-- listed by the feed (they are still delivered by webhook): stop the older binaries before
-- migrating, as the upgrade note in docs/operate/upgrades.md says.

-- changed_at = changed_at keeps the change stamp (0027) as it was: giving every event a new
-- one would send the next audit window over every payment that has an event.
-- The UPDATE runs over the outbox's primary key, 10000 ids at a time, each range its own
-- transaction ("+paykit batched-by", migrations/runner.go), so that an outbox of millions
-- of events never makes one transaction bigger than TiDB's limit, and each event is read
-- once. It runs the same UPDATE as the single statement this file held before, one range
-- at a time, so a database migrated with that statement is where this one leaves it.

-- +paykit batched-by: payment_events.id 10000
-- +goose Up
UPDATE payment_events SET feed_seq = id, changed_at = changed_at WHERE id > ? AND id <= ? AND feed_seq IS NULL;

-- +goose Down
UPDATE payment_events SET feed_seq = NULL, changed_at = changed_at;
