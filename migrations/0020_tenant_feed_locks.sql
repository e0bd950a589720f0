-- One row per tenant that has events, locked by every transaction that writes one of the
-- tenant's outbox events, right before the INSERT, until it commits.
--
-- GET /v1/events pages a tenant's events by payment_events.id, which InnoDB hands out at
-- INSERT but a reader sees only at COMMIT. Without the lock two transactions of a tenant
-- can commit in the reverse order of their ids, and a poller that read the later id has
-- moved its cursor past the earlier one, which it then never lists. Under the lock the
-- tenant's events are inserted and committed one transaction at a time, so their ids
-- grow in commit order and a cursor never passes an event still to come. events counts
-- the tenant's events (the lock's upsert increments it); nothing reads it for now.

-- +goose Up
CREATE TABLE tenant_feed_locks (
    tenant_id VARCHAR(64) NOT NULL,
    events    BIGINT      NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE tenant_feed_locks;
