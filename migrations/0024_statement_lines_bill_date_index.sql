-- idx_statement_lines_bill_date serves the retention purge of staged bill lines: after a
-- day is reconciled, its run deletes the lines of every app's days older than the
-- retention, oldest first, a range of old rows only. The runs themselves read the
-- primary key (app_id, bill_date, line_no) and the two match indexes.

-- +goose Up
ALTER TABLE statement_lines ADD KEY idx_statement_lines_bill_date (bill_date), ALGORITHM = INPLACE, LOCK = NONE;

-- +goose Down
ALTER TABLE statement_lines DROP KEY idx_statement_lines_bill_date;
