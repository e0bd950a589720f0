-- One anomaly per (kind, payment_no, subject) instead of per (kind, payment_no): two
-- refunds of one payment that both failed locally and were both carried out at Alipay
-- are two anomalies, not one that names the first refund only. Every row recorded before
-- has subject '' (0042) and was unique on (kind, payment_no), so it is unique on the new
-- key and none is lost. The new key is added before the old one is dropped (TiDB applies
-- the clauses one at a time, in this order), so the table is never without one.

-- +goose Up
ALTER TABLE payment_anomalies
    ADD UNIQUE KEY uk_payment_anomalies_subject (kind, payment_no, subject),
    DROP KEY uk_payment_anomalies, ALGORITHM = INPLACE, LOCK = NONE;

-- +goose Down
-- The old key holds one anomaly of a kind per payment: refused while a payment has
-- several (migrations.Options.Force overrides, and then keeps the first recorded of each).
-- +paykit down-guard: SELECT 1 FROM payment_anomalies GROUP BY kind, payment_no HAVING COUNT(*) > 1 LIMIT 1
DELETE a FROM payment_anomalies a
JOIN payment_anomalies b ON b.kind = a.kind AND b.payment_no = a.payment_no AND b.id < a.id;
ALTER TABLE payment_anomalies
    ADD UNIQUE KEY uk_payment_anomalies (kind, payment_no),
    DROP KEY uk_payment_anomalies_subject, ALGORITHM = INPLACE, LOCK = NONE;
