-- The payments and refunds recorded before 0029 are on their tenant's current app, the
-- one every call about them went to until now: the tenant's own app_id for a tenant with
-- its own keys, and the default app for every other, which they already read as: ''
-- (the columns' default) is the default app as it is configured (see 0029). A refund
-- takes its payment's, in the same statement.
--
-- It is safe on a big table: it is driven from the few tenants that have their own keys
-- and reaches their payments through idx_payments_tenant_order and their refunds through
-- idx_refunds_payment, never scanning the default app's rows; it locks only the rows it
-- writes, for the one statement; and run again (after an interruption, or by hand) it
-- changes nothing, since a row it wrote is no longer ''. Binaries older than 0029 must be
-- stopped before it runs (`paykit migrate` runs it before the new ones start): a payment
-- such a binary opened afterwards for a tenant with its own app would read as the
-- default app's.

-- +goose Up
UPDATE payments p
JOIN tenants t ON t.id = p.tenant_id
LEFT JOIN refunds r ON r.payment_no = p.payment_no
SET p.alipay_app_id = t.alipay_app_id, r.alipay_app_id = t.alipay_app_id
WHERE t.alipay_credentials IS NOT NULL AND t.alipay_app_id <> '' AND p.alipay_app_id = '';

-- +goose Down
-- Nothing to undo: 0029 and 0030 drop the columns.
SELECT 1;
