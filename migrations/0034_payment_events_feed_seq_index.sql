-- A tenant's events in feed order after a cursor (GET /v1/events), and the proof that no
-- two of a tenant's events share a position. The feed no longer reads
-- idx_payment_events_tenant_feed (tenant_id, id); it stays while binaries older than 0033
-- may still page by id.

-- +goose Up
ALTER TABLE payment_events ADD UNIQUE KEY uk_payment_events_tenant_feed_seq (tenant_id, feed_seq), ALGORITHM = INPLACE, LOCK = NONE;

-- +goose Down
ALTER TABLE payment_events DROP KEY uk_payment_events_tenant_feed_seq;
