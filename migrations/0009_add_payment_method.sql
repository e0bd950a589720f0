-- method is how the buyer was asked to pay (page: the cashier URL; qr: a precreated QR
-- code), so that a run re-driven from this row opens the same kind of trade. Rows from
-- before it existed were page payments or are treated as such.

-- +goose Up
ALTER TABLE payments ADD COLUMN method VARCHAR(8) NOT NULL DEFAULT 'page' AFTER subject;

-- +goose Down
ALTER TABLE payments DROP COLUMN method;
