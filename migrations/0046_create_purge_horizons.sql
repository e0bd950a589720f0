-- purge_horizons records, per purged table, the time before which rows may have been
-- deleted by a retention purge. The purge of delivered merchant events moves it before it
-- deletes, so the audit tells a payment.paid event that was delivered and purged from one
-- that was never written (mysql/audit.go).

-- +goose Up
CREATE TABLE purge_horizons (
    name       VARCHAR(64) NOT NULL,
    horizon    DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NOT NULL,
    PRIMARY KEY (name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
-- Dropping it makes the audit report every purged payment.paid event as never written.
DROP TABLE purge_horizons;
