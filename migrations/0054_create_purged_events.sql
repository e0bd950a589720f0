-- purged_events records each merchant event the retention purge deleted (its tenant, its
-- feed position and its id), in the transaction that deletes it: the payload goes, this
-- small row stays. It tells two things the payment_events rows can no longer tell:
--   - the events feed's horizon, a tenant's highest purged feed_seq (the primary key's
--     last entry for the tenant): GET /v1/events answers 410 cursor_expired to a cursor
--     below it, since events after that cursor were deleted (api/events.go);
--   - whether a PAID payment's missing payment.paid event was purged
--     (uk_purged_events_event_id) or never written (mysql/audit.go). Before this table
--     the audit could only guess from purge_horizons (0046) and the payment's paid_at,
--     and it still does for the events purged before the purge kept these rows.

-- +goose Up
CREATE TABLE purged_events (
    tenant_id VARCHAR(64)  NOT NULL,
    feed_seq  BIGINT       NOT NULL,
    event_id  VARCHAR(128) NOT NULL,
    purged_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (tenant_id, feed_seq),
    UNIQUE KEY uk_purged_events_event_id (event_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
-- Dropping it makes the events feed follow a cursor past purged events again, and the
-- audit report the payment.paid events purged since as never written.
DROP TABLE purged_events;
