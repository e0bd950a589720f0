-- audit_watermarks holds, per scheduled audit (scope), the end of the last window it
-- audited to the end. Each run starts at the watermark, so a run that was skipped, paused
-- or failed leaves no window unaudited: the next run catches up from it.

-- +goose Up
CREATE TABLE audit_watermarks (
    scope         VARCHAR(191) NOT NULL,
    audited_until DATETIME(6)  NOT NULL,
    updated_at    DATETIME(6)  NOT NULL,
    PRIMARY KEY (scope)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
-- Dropping the watermarks makes the next scheduled audit start over from one window back.
DROP TABLE audit_watermarks;
