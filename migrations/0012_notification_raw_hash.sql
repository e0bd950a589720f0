-- Anyone can post to the callback URL, so an unverified notification keeps only the start
-- of its body in raw_payload; raw_sha256 (hex) and raw_len describe the whole body as
-- received, for every notification. Rows from before this migration have '' and 0.

-- +goose Up
ALTER TABLE channel_notifications
    ADD COLUMN raw_sha256 CHAR(64) NOT NULL DEFAULT '' AFTER raw_payload,
    ADD COLUMN raw_len    INT      NOT NULL DEFAULT 0  AFTER raw_sha256;

-- +goose Down
ALTER TABLE channel_notifications
    DROP COLUMN raw_len,
    DROP COLUMN raw_sha256;
