-- As 0025 for refunds: a refund's every change, by paykit or by hand, stamps updated_at,
-- and idx_refunds_updated makes the audit's window of changed refunds a range read.

-- +goose Up
ALTER TABLE refunds
    MODIFY updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
    ADD KEY idx_refunds_updated (updated_at), ALGORITHM = INPLACE, LOCK = NONE;

-- +goose Down
ALTER TABLE refunds DROP KEY idx_refunds_updated, MODIFY updated_at DATETIME(6) NOT NULL;
