-- A payment is granted its benefit once, whatever the benefit is called: the grant's
-- identity is the payment. uk_benefit_grants (tenant_id, payment_no, benefit) let a
-- rename of PAYKIT_BENEFIT grant every recent paid payment a second time, under the new
-- name; this key refuses that second row, and the grant repair looks for payments with
-- no grant at all (migration 0022 drops the old key).
--
-- If this migration fails with a duplicate entry, a payment was already granted twice
-- under two names. Find them with
--   SELECT tenant_id, payment_no, GROUP_CONCAT(benefit) FROM benefit_grants
--   GROUP BY tenant_id, payment_no HAVING COUNT(*) > 1;
-- settle them with the merchant, delete the extra rows, and run paykit migrate again.

-- +goose Up
ALTER TABLE benefit_grants ADD UNIQUE KEY uk_benefit_grants_payment (tenant_id, payment_no), ALGORITHM = INPLACE, LOCK = NONE;

-- +goose Down
ALTER TABLE benefit_grants DROP KEY uk_benefit_grants_payment;
