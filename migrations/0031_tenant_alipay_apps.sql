-- A tenant keeps the keys of every Alipay app it has moved away from, so that the
-- payments opened on an old app are still queried, closed, refunded, verified and
-- reconciled there after the move. A row is written in the transaction that moves the
-- tenant (mysql.Store.UpsertTenant, SetTenantAlipayCredentials), with the app's seller
-- and its keys sealed exactly as tenants.alipay_credentials held them: the same bytes,
-- since the seal is bound to the tenant (payment.AlipayCredentialsAAD), not to the app.
-- left_at is when the tenant last moved off the app; the statements reconcile a kept
-- app for a while after it. The tenant's current app stays in tenants; the row of an app
-- the tenant has come back to is a stale copy, never read while the current one matches.
-- idx_tenant_alipay_apps_app serves the verification of a notification by its app_id.

-- +goose Up
CREATE TABLE tenant_alipay_apps (
    tenant_id          VARCHAR(64) NOT NULL,
    app_id             VARCHAR(64) NOT NULL,
    alipay_seller_id   VARCHAR(64) NOT NULL DEFAULT '',
    alipay_credentials TEXT        NOT NULL,
    created_at         DATETIME(6) NOT NULL,
    left_at            DATETIME(6) NOT NULL,
    PRIMARY KEY (tenant_id, app_id),
    KEY idx_tenant_alipay_apps_app (app_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
-- Dropping kept keys is refused while there are any (migrations.Options.Force overrides):
-- the payments of an old app could no longer be refunded or verified.
-- +paykit down-guard: SELECT 1 FROM tenant_alipay_apps LIMIT 1
DROP TABLE tenant_alipay_apps;
