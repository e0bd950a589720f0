-- Per-event redelivery state of the outbox, so that the sweeper backs each event off on
-- its own, gives up on it in the end, and never lets one merchant's backlog hold the
-- others.
--
-- next_attempt_at is when the event is next due; NULL (never failed) or a past time
-- means due now. Every failed attempt, by the payment workflow or by the sweeper, sets
-- it to the failure time + min(base * 2^(attempts-1), max), so the sweeper's backoff
-- continues from where the workflow left off. A sweeper about to deliver an event
-- first moves it to now + a lease, compare-and-set on the value it read, so that a
-- concurrent sweeper skips the event.
--
-- dead is 1 once an event failed its last allowed attempt (the cap is the worker's
-- configuration, not the schema's). A dead event is never picked by the sweeper again;
-- operators find it with WHERE dead = 1. If it is delivered after all (an operator sets
-- dead = 0 to retry it), marking it delivered clears dead.
--
-- idx_payment_events_due covers the sweeper's due query (undelivered, not dead,
-- next_attempt_at up to now), including the tenant_id it is made fair by and the
-- created_at it filters on, so the query reads only that index.

-- +goose Up
ALTER TABLE payment_events
    ADD COLUMN next_attempt_at DATETIME(6) NULL AFTER last_error,
    ADD COLUMN dead TINYINT(1) NOT NULL DEFAULT 0 AFTER next_attempt_at,
    ADD KEY idx_payment_events_due (delivered, dead, next_attempt_at, tenant_id, created_at);

-- +goose Down
ALTER TABLE payment_events
    DROP KEY idx_payment_events_due,
    DROP COLUMN dead,
    DROP COLUMN next_attempt_at;
