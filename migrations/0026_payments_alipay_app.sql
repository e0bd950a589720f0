-- A payment records the Alipay app it was opened on. Before, every query, close,
-- refund, notification check, audit and statement of a payment resolved its tenant's
-- current app, so a tenant moved to a new app sent its old payments' calls to an app
-- that does not know their trades (a refund answered not-exist, then FAILED, while the
-- money sat at the old app), and `paykit tenant` had to refuse the move.
--
-- alipay_app_id is the app_id of the tenant's own app the payment was opened on, or ''
-- for the deployment's default app (ALIPAY_APP_ID, whose keys are the deployment's).
-- '' means the default app and nothing else; it is the column's default, so the rows
-- of the many tenants on the default app are right as they are, and 0029 fills in only
-- the others. Migrations 0026-0029 are one change, one DDL statement each.
--
-- INSTANT: only the table's metadata changes, with no copy of a big table, on MariaDB
-- 10.3+ and MySQL 8.0 alike.

-- +goose Up
ALTER TABLE payments ADD COLUMN alipay_app_id VARCHAR(64) NOT NULL DEFAULT '', ALGORITHM = INSTANT;

-- +goose Down
-- While no tenant has moved (0028's guard), every payment's app is its tenant's current
-- one, which the code before this migration assumes: nothing is lost.
ALTER TABLE payments DROP COLUMN alipay_app_id;
