-- backfilled_at says, on the deployment's own rows (tenant_id ''), that the payments and
-- refunds from before payments named their app (alipay_app_id '', see 0029) have all been
-- written with the deployment's first default app (internal/system.KeepDefaultApp): the
-- time the walk over the payments finished. Before, only the start that recorded the
-- first app did it, so a start killed between the two (or a walk that failed part way)
-- left those rows on '' for good, and they followed ALIPAY_APP_ID when it changed. Every
-- start now walks them while no row of the deployment has it, with the first recorded
-- app (the earliest created_at); the walk finishes by setting it on every row of the
-- deployment, and a row recorded afterwards takes it from the others. NULL on tenants'
-- rows, which nothing backfills. Existing deployments walk once more at the first start
-- after this migration: that walk writes nothing where the first one finished.

-- +goose Up
ALTER TABLE tenant_alipay_apps ADD COLUMN backfilled_at DATETIME(6) NULL DEFAULT NULL, ALGORITHM = INSTANT;

-- +goose Down
-- Dropping the column forgets only that the walk finished: the next start of a build
-- that reads it walks the payments once more, writing nothing.
ALTER TABLE tenant_alipay_apps DROP COLUMN backfilled_at;
