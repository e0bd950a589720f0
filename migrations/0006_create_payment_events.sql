-- The outbox: merchant-facing events written in the same transaction as the state change
-- they describe and delivered after the commit. payload is MEDIUMTEXT rather than JSON
-- because MySQL's JSON type rewrites the document (key order, spacing) and the bytes
-- delivered must be the bytes that were stored and signed.

-- +goose Up
CREATE TABLE payment_events (
    id           BIGINT        NOT NULL AUTO_INCREMENT,
    event_id     VARCHAR(128)  NOT NULL,
    tenant_id    VARCHAR(64)   NOT NULL,
    payment_no   VARCHAR(64)   NOT NULL,
    type         VARCHAR(64)   NOT NULL,
    payload      MEDIUMTEXT    NOT NULL,
    delivered    TINYINT(1)    NOT NULL DEFAULT 0,
    attempts     INT           NOT NULL DEFAULT 0,
    last_error   VARCHAR(1024) NOT NULL DEFAULT '',
    created_at   DATETIME(6)   NOT NULL,
    delivered_at DATETIME(6)   NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_payment_events_event_id (event_id),
    KEY idx_payment_events_undelivered (delivered, created_at),
    KEY idx_payment_events_payment_no (payment_no)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
-- Dropping these records is refused while there are any (migrations.Options.Force overrides).
-- +paykit down-guard: SELECT 1 FROM payment_events LIMIT 1
DROP TABLE payment_events;
