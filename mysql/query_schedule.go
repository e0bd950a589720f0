package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/paykit/paykit/payment"
)

const (
	// qDueQueries reads the due part of idx_payments_next_query (status, next_query_at,
	// and the id InnoDB keeps in it) past a cursor, past expiry left out: the close path
	// asks Alipay about those.
	// Of a store with a run scope, only that scope's payments and those from before
	// scopes ('') are read (inScope); run_scope is read from the row, past the index.
	qDueQueries = `SELECT id, payment_no, workflow_id, tenant_id, COALESCE(alipay_app_id, ''), channel, amount_fen, expire_at, next_query_at, queries, query_step_ms FROM payments
WHERE status = 0 AND next_query_at <= ? AND expire_at > ? AND (next_query_at > ? OR (next_query_at = ? AND id > ?))` + inScope + `
ORDER BY next_query_at, id LIMIT ?`
	// qQueryMade is a compare-and-set on the due time the reconciler read. A query changes
	// nothing of the payment's own: updated_at (ON UPDATE CURRENT_TIMESTAMP, which the
	// audit and the API read) is kept. queries (a SMALLINT) stops at its largest value: an
	// overflow would refuse every claim of the payment from then on.
	qQueryMade = `UPDATE payments SET queries = LEAST(queries + 1, 32767), next_query_at = ?, updated_at = updated_at
WHERE payment_no = ? AND status = 0 AND next_query_at = ?`
)

// firstQueryAt is the first query of a new payment, or NULL when its run keeps its own
// timer (np.QueryInterval zero) or its TTL is too short for one.
func firstQueryAt(now time.Time, np payment.NewPayment) sql.NullTime {
	return nullQueryAt(payment.NextQueryAt(now, np.ExpireAt, np.QueryInterval, np.PaymentNo, 0))
}

// queryStepMS is the first step of a new payment's schedule, in milliseconds, when it has
// a first query.
func queryStepMS(first sql.NullTime, np payment.NewPayment) int64 {
	if !first.Valid {
		return 0
	}
	return np.QueryInterval.Milliseconds()
}

// nullQueryAt is t at next_query_at's millisecond precision, NULL for the zero time.
func nullQueryAt(t time.Time) sql.NullTime {
	if t.IsZero() {
		return sql.NullTime{}
	}
	return sql.NullTime{Time: t.UTC().Truncate(time.Millisecond), Valid: true}
}

// DueQueries returns up to limit pending payments whose next query is due at now, before
// their expiry, from past after, and the cursor that follows them (zero once fewer than
// the limit were left).
func (st *Store) DueQueries(ctx context.Context, now time.Time, after payment.Cursor, limit int) ([]payment.DueQuery, payment.Cursor, error) {
	if limit <= 0 || limit > maxListLimit {
		limit = defaultListLimit
	}
	at, id := walkFrom(after)
	var due []payment.DueQuery
	next := after
	err := st.query(ctx, qDueQueries, []any{dbTime(now), dbTime(now), at, at, id, st.runScope, st.runScope, limit}, func(rows *sql.Rows) error {
		var q payment.DueQuery
		var amount, stepMS int64
		if err := rows.Scan(&next.ID, &q.PaymentNo, &q.WorkflowID, &q.TenantID, &q.AlipayAppID, &q.Channel, &amount, &q.ExpireAt, &q.NextQueryAt, &q.Queries, &stepMS); err != nil {
			return err
		}
		q.Amount, q.ExpireAt, q.NextQueryAt = payment.Amount(amount), q.ExpireAt.UTC(), q.NextQueryAt.UTC()
		q.Step = time.Duration(stepMS) * time.Millisecond
		next.At = q.NextQueryAt
		due = append(due, q)
		return nil
	})
	if err != nil {
		return nil, after, fmt.Errorf("mysql: due queries: %w", err)
	}
	if len(due) < limit {
		next = payment.Cursor{}
	}
	return due, next, nil
}

// QueryMade counts a query of q and sets its next, if q is still as it was read.
func (st *Store) QueryMade(ctx context.Context, q payment.DueQuery, next time.Time) (bool, error) {
	n, err := st.execCount(ctx, "query made", qQueryMade, nullQueryAt(next), q.PaymentNo, dbTime(q.NextQueryAt))
	return n == 1, err
}
