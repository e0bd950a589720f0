-- Marks the refund notifications still waiting in the inbox (0040): only unsettled rows
-- matter, and they are the dispatch_due_at range of idx_channel_notifications_due, so the
-- statement never reads the settled history. A refund notification is the one whose body
-- carries out_biz_no (Alipay's name for the refund's out_request_no). Run again, it
-- changes nothing.

-- +goose Up
UPDATE channel_notifications FORCE INDEX (idx_channel_notifications_due)
SET refund = 1
WHERE dispatch_due_at IS NOT NULL AND verified = 1 AND refund = 0
  AND (raw_payload LIKE 'out\_biz\_no=%' OR raw_payload LIKE '%&out\_biz\_no=%');

-- +goose Down
-- Nothing to undo: 0040 drops the column.
SELECT 1;
