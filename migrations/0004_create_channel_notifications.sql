-- Every notification received from a channel is kept for audit. Only verified ones set
-- notify_id, so UNIQUE(channel, notify_id) dedupes genuine retries while a forged
-- notification (notify_id NULL) can never claim, and so block, a real notify_id. The id
-- a notification claimed is kept in claimed_notify_id whatever its fate.

-- +goose Up
CREATE TABLE channel_notifications (
    id                BIGINT        NOT NULL AUTO_INCREMENT,
    channel           VARCHAR(32)   NOT NULL,
    notify_id         VARCHAR(128)  NULL,
    claimed_notify_id VARCHAR(128)  NOT NULL DEFAULT '',
    payment_no        VARCHAR(64)   NOT NULL DEFAULT '',
    trade_no          VARCHAR(64)   NOT NULL DEFAULT '',
    raw_payload       MEDIUMTEXT    NOT NULL,
    verified          TINYINT(1)    NOT NULL DEFAULT 0,
    outcome           VARCHAR(1024) NOT NULL DEFAULT '',
    received_at       DATETIME(6)   NOT NULL,
    updated_at        DATETIME(6)   NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_channel_notifications_notify (channel, notify_id),
    KEY idx_channel_notifications_payment_no (payment_no)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
-- Dropping these records is refused while there are any (migrations.Options.Force overrides).
-- +paykit down-guard: SELECT 1 FROM channel_notifications LIMIT 1
DROP TABLE channel_notifications;
