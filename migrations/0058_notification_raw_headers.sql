-- A channel that signs its notification's body together with headers (WeChat Pay: the
-- Wechatpay-Timestamp, -Nonce, -Signature and -Serial) needs those headers to verify the
-- recorded notification again, as the inbox and the evidence of a PAID payment do.
-- raw_headers holds them as a JSON object of header name to values, only the signed
-- ones; '' for a notification whose body alone is signed (Alipay's form), and for every
-- row from before.

-- +goose Up
ALTER TABLE channel_notifications ADD COLUMN raw_headers VARCHAR(2048) NOT NULL DEFAULT '', ALGORITHM = INSTANT;

-- +goose Down
-- +paykit down-guard: SELECT 1 FROM channel_notifications WHERE raw_headers <> '' AND settled_at IS NULL AND dispatch_due_at IS NOT NULL LIMIT 1
ALTER TABLE channel_notifications DROP COLUMN raw_headers;
