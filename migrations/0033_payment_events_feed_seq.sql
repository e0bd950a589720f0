-- The events feed's position, given by paykit rather than by AUTO_INCREMENT (this and the
-- next two migrations).
--
-- GET /v1/events paged a tenant's events by payment_events.id. Under the tenant's feed
-- lock (0020) ids grow in commit order only while one server hands them out: a database of
-- several SQL servers that speaks MySQL's protocol (TiDB) gives each server its own batch
-- of ids, so an event committed later through one server can carry a lower id than one
-- already listed through another, and a poller past the higher id never lists it.
-- feed_seq is the tenant's event count (tenant_feed_locks.events), which the feed lock's
-- upsert increments and returns (LAST_INSERT_ID(events + 1)) while it holds the lock: dense
-- per tenant, in commit order, on any number of servers. Events written before it are
-- given feed_seq = id (0035), so a cursor a merchant holds stays valid, and each tenant's
-- count is raised to its highest id (0036), so new events come after.

-- +goose Up
ALTER TABLE payment_events ADD COLUMN feed_seq BIGINT NULL, ALGORITHM = INSTANT;

-- +goose Down
ALTER TABLE payment_events DROP COLUMN feed_seq;
