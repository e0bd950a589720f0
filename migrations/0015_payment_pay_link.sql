-- pay_link keeps the way to pay a pending payment, as its checkout answered it: the
-- cashier URL (page, wap), the QR code content (qr) or the app order string (app), so
-- that GET /v1/payments/{no} can show it again to a client that lost the answer. It is
-- only ever shown while the payment is pending. Rows from before it have NULL.

-- +goose Up
ALTER TABLE payments ADD COLUMN pay_link TEXT NULL;

-- +goose Down
ALTER TABLE payments DROP COLUMN pay_link;
