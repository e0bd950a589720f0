-- A refund notification (out_biz_no, refund_fee) carries the paid payment's trade_no, so
-- the inbox's "settled once its payment is PAID with its trade_no" (0023) would settle it
-- without its effect ever being seen: a refund FAILED locally that Alipay carried out
-- would never become refund_succeeded_after_fail. refund marks those rows, which only
-- their refund's outcome settles. 0041 marks the unsettled ones recorded before it.

-- +goose Up
ALTER TABLE channel_notifications ADD COLUMN refund TINYINT(1) NOT NULL DEFAULT 0, ALGORITHM = INSTANT;

-- +goose Down
ALTER TABLE channel_notifications DROP COLUMN refund;
