-- The scheduled reconciler reads the due head of the pending payments' next queries (0050).

-- +goose Up
ALTER TABLE payments ADD KEY idx_payments_next_query (status, next_query_at), ALGORITHM = INPLACE, LOCK = NONE;

-- +goose Down
ALTER TABLE payments DROP KEY idx_payments_next_query;
