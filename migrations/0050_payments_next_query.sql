-- The scheduled reconciler (workflows.ReconcilerWorkflow) queries Alipay about the pending
-- payments whose next query is due, instead of a timer in each payment's run: next_query_at
-- is when the next one is (NULL: none, the close path at expiry asks, or a payment whose run
-- keeps its own timer), queries how many were made and query_step_ms the first step of its
-- schedule (PAYKIT_RECONCILE_INTERVAL when it was created: a payment keeps its schedule,
-- as a run keeps its timing). A payment is created with its first query, and each query
-- sets the next (payment.NextQueryAt). 0051 keys the due ones.

-- +goose Up
ALTER TABLE payments
    ADD COLUMN next_query_at DATETIME(3) NULL DEFAULT NULL,
    ADD COLUMN queries SMALLINT NOT NULL DEFAULT 0,
    ADD COLUMN query_step_ms INT NOT NULL DEFAULT 0, ALGORITHM = INSTANT;

-- +goose Down
-- Dropping the columns drops the schedule of every pending payment the reconciler queries;
-- refused while one is pending (migrations.Options.Force overrides).
-- +paykit down-guard: SELECT 1 FROM payments WHERE status = 0 AND (next_query_at IS NOT NULL OR queries > 0) LIMIT 1
ALTER TABLE payments DROP COLUMN query_step_ms, DROP COLUMN queries, DROP COLUMN next_query_at;
