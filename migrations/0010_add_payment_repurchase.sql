-- repurchase marks a payment whose checkout opted in to paying an order again after an
-- earlier payment of it was PAID. Without the opt-in a paid order is final: the store
-- refuses a new payment for it, so a second charge never happens by accident, and the
-- auditor reports two PAID payments of one order as a double charge unless every later
-- one carries this flag.

-- +goose Up
ALTER TABLE payments ADD COLUMN repurchase TINYINT(1) NOT NULL DEFAULT 0 AFTER method;

-- +goose Down
ALTER TABLE payments DROP COLUMN repurchase;
