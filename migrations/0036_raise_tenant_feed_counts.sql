-- Each tenant's event count (tenant_feed_locks.events, the next event's feed_seq less one)
-- is raised to its highest position (0035), so the tenant's next event comes after every
-- cursor already handed out. GREATEST never lowers a count: safe to run again.

-- +goose Up
INSERT INTO tenant_feed_locks (tenant_id, events)
SELECT tenant_id, last_seq FROM (SELECT tenant_id, MAX(feed_seq) AS last_seq FROM payment_events GROUP BY tenant_id) AS highest
ON DUPLICATE KEY UPDATE events = GREATEST(events, VALUES(events));

-- +goose Down
-- The counts stay: a count above the events is harmless, and lowering one could give a
-- position twice.
SELECT 1;
