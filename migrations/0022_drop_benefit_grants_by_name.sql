-- The key of a grant by (tenant_id, payment_no, benefit) is covered by
-- uk_benefit_grants_payment (migration 0021), which is stricter.

-- +goose Up
ALTER TABLE benefit_grants DROP KEY uk_benefit_grants, ALGORITHM = INPLACE, LOCK = NONE;

-- +goose Down
ALTER TABLE benefit_grants ADD UNIQUE KEY uk_benefit_grants (tenant_id, payment_no, benefit);
