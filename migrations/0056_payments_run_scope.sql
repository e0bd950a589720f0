-- run_scope names where a payment's runs live: the Temporal namespace and task queue of
-- the stack that created it (payment.RunScope, "namespace/task queue"). Stacks that share
-- one database (two task queues, two namespaces, the end-to-end tests' stacks) reconcile
-- and re-drive only their own payments; before, each one's scheduled reconciler claimed
-- and queried the others' payments, and its sweeper started runs for them on its own task
-- queue. Payments from before have '' and stay everyone's, as they were. Not indexed: the
-- reconciler's and the sweeper's scans read it from the rows of their index ranges, and a
-- database with one stack skips nothing.

-- +goose Up
ALTER TABLE payments ADD COLUMN run_scope VARCHAR(191) NOT NULL DEFAULT '', ALGORITHM = INSTANT;

-- +goose Down
-- Without it every stack on the database reconciles every payment again.
ALTER TABLE payments DROP COLUMN run_scope;
