-- A payment records its channel: channel is where its trade is opened, and where every
-- later query, close, notification check and audit of it goes (payment.Channel,
-- "alipay" or "wechatpay", the method's channel when it was created). Rows from before
-- are Alipay's, the only channel then: the DEFAULT is their value, and the code reads ''
-- as Alipay too. alipay_app_id (0029) holds the merchant account at the channel: an
-- Alipay app_id, or a WeChat Pay mchid.
--
-- method widens to hold the WeChat Pay methods (wechat_native is 13 characters): from 8
-- to 16 characters keeps its one length byte, so neither change copies the table.

-- +goose Up
ALTER TABLE payments
    MODIFY method VARCHAR(16) NOT NULL DEFAULT 'page',
    ADD COLUMN channel VARCHAR(16) NOT NULL DEFAULT 'alipay', ALGORITHM = INPLACE, LOCK = NONE;

-- +goose Down
-- Code from before this migration would take a WeChat Pay payment for an Alipay one, and
-- its method no longer fits: refused while there is one.
-- +paykit down-guard: SELECT 1 FROM payments WHERE channel <> 'alipay' LIMIT 1
ALTER TABLE payments DROP COLUMN channel, MODIFY method VARCHAR(8) NOT NULL DEFAULT 'page';
