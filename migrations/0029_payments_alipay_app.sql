-- A payment records the Alipay app it was opened on. Before, every query, close,
-- refund, notification check, audit and statement of a payment resolved its tenant's
-- current app, so a tenant moved to a new app sent its old payments' calls to an app
-- that does not know their trades (a refund answered not-exist, then FAILED, while the
-- money sat at the old app), and `paykit tenant` had to refuse the move.
--
-- alipay_app_id is the app_id of the app the payment was opened on: its tenant's own app,
-- or the deployment's default app (ALIPAY_APP_ID, whose keys are the deployment's).
-- Recording the default app's id too keeps a payment on its app if ALIPAY_APP_ID is
-- changed later. '' is the column's default and means the default app as it is
-- configured: 0032 leaves it on the rows of tenants on the default app, so that it does
-- not write the whole table, and the code reads '' and the default app's id alike
-- (payment.Gateways.ForPayment, the statements' scope). Migrations 0029-0032 are one
-- change, one DDL statement each.
--
-- INSTANT: only the table's metadata changes, with no copy of a big table, on MariaDB
-- 10.3+ and MySQL 8.0 alike.

-- +goose Up
ALTER TABLE payments ADD COLUMN alipay_app_id VARCHAR(64) NOT NULL DEFAULT '', ALGORITHM = INSTANT;

-- +goose Down
-- While no tenant has moved (0031's guard), every payment's app is its tenant's current
-- one, which the code before this migration assumes: nothing is lost.
ALTER TABLE payments DROP COLUMN alipay_app_id;
