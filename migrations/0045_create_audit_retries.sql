-- audit_retries holds, per scheduled audit (scope), the payments it could not verify
-- (Alipay or Temporal did not answer): the watermark moves past them, so each run first
-- checks the due ones again (activities.AuditRecheck). A payment checked is deleted from
-- it; one still unverifiable is due again later (next_at), until it has been tried for
-- audit.RecheckFor since first_at, when the audit records that it gave up
-- (audit_unverifiable_gave_up) and deletes it.

-- +goose Up
CREATE TABLE audit_retries (
    scope      VARCHAR(191) NOT NULL,
    payment_no VARCHAR(64)  NOT NULL,
    first_at   DATETIME(6)  NOT NULL,
    next_at    DATETIME(6)  NOT NULL,
    attempts   INT          NOT NULL DEFAULT 0,
    detail     VARCHAR(512) NOT NULL DEFAULT '',
    PRIMARY KEY (scope, payment_no),
    KEY idx_audit_retries_due (scope, next_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
-- Dropping it forgets the payments the audit could not verify: their audit_unverifiable
-- anomalies remain, and no run checks them again.
DROP TABLE audit_retries;
