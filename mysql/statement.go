package mysql

import (
	"context"
	"crypto/sha1"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/paykit/paykit/payment"
)

var _ payment.StatementStore = (*Store)(nil)

// LockStatement takes a MariaDB named lock for one (app, day), held on a connection of
// its own until unlock, so that two runs of the same day (the schedule and an operator)
// never interleave their staged lines. A lock held elsewhere is ECONFLICT at once.
//
// The connection is kept busy while the lock is held: every StatementLockCheck it
// checks that it still holds the lock (IS_USED_LOCK = CONNECTION_ID()), which also keeps
// a server's wait_timeout from dropping it idle. If the check fails (the connection was
// dropped, killed, or the server restarted, each of which releases the lock), the
// returned context is cancelled with ErrStatementLockLost as its cause: the run working
// under it stops instead of going on with a lock another run may now hold.
func (st *Store) LockStatement(ctx context.Context, appID, billDate string) (context.Context, func(), error) {
	name := statementLockName(appID, billDate)
	conn, err := st.db.Conn(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("mysql: statement lock: %w", err)
	}
	var got, connID sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(?, 0), CONNECTION_ID()`, name).Scan(&got, &connID); err != nil && !lockBusy(err) {
		_ = conn.Close()
		return nil, nil, fmt.Errorf("mysql: statement lock: %w", err)
	}
	if got.Int64 != 1 {
		_ = conn.Close()
		return nil, nil, payment.Errorf(payment.ECONFLICT, "the statement of %s %s is being reconciled by another run", appID, billDate)
	}
	every := st.lockCheck
	if every <= 0 {
		every = StatementLockCheck
	}
	held, lost := context.WithCancelCause(context.WithValue(ctx, lockConnKey{}, connID.Int64))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-held.Done():
				return
			case <-t.C:
			}
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			var mine sql.NullInt64
			err := conn.QueryRowContext(cctx, `SELECT IS_USED_LOCK(?) = CONNECTION_ID()`, name).Scan(&mine)
			cancel()
			if err != nil || mine.Int64 != 1 {
				lost(fmt.Errorf("%w: %s %s (%v)", ErrStatementLockLost, appID, billDate, err))
				return
			}
		}
	}()
	return held, func() {
		close(stop)
		<-done
		lost(nil)
		release := st.releaseLock
		if release == "" {
			release = qReleaseStatementLock
		}
		// Bounded: a dead link must not hold the run past its activity's timeout; the
		// driver then closes the connection, which frees the lock on the server.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := conn.ExecContext(rctx, release, name); err != nil {
			// The connection may still hold the lock: it must not go back to the pool,
			// where it would keep the day held for as long as it idles there.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		_ = conn.Close()
	}, nil
}

// qReleaseStatementLock lets go of a statement lock on the connection that holds it.
const qReleaseStatementLock = `SELECT RELEASE_LOCK(?)`

// lockBusy reports whether GET_LOCK(name, 0) failed because another session holds the
// lock: MariaDB answers 0, TiDB, whose named locks are pessimistic locks on a row of its
// own, answers error 1105 "pessimistic lock retry limit reached".
func lockBusy(err error) bool {
	var me *gomysql.MySQLError
	return errors.As(err, &me) && me.Number == 1105 && strings.Contains(me.Message, "lock")
}

// StatementLockCheck is how often a held statement lock is checked (and its connection
// kept from idling), unless the store is told otherwise (tests shorten it).
const StatementLockCheck = 20 * time.Second

// lockConnKey keys the connection id that holds a statement lock in the lock's context.
type lockConnKey struct{}

// ErrStatementLockLost is the cause of a statement lock's context cancelled because its
// connection no longer holds the lock.
var ErrStatementLockLost = errors.New("mysql: the statement lock was lost")

// statementLockName is the MariaDB named lock of one (app, day): its runs take it, and the
// retention purge takes it before it deletes the day's lines.
func statementLockName(appID, billDate string) string {
	sum := sha1.Sum([]byte(appID + "|" + billDate))
	return "paykit-statement-" + hex.EncodeToString(sum[:])
}

// ClearBillLines deletes the staged lines of a day, in chunks so that no statement holds
// many row locks.
func (st *Store) ClearBillLines(ctx context.Context, appID, billDate string) error {
	for {
		res, err := st.db.ExecContext(ctx, `DELETE FROM statement_lines WHERE app_id = ? AND bill_date = ? LIMIT 5000`, appID, billDate)
		if err != nil {
			return fmt.Errorf("mysql: clear bill lines: %w", err)
		}
		if n, _ := res.RowsAffected(); n < 5000 {
			return nil
		}
	}
}

// qOldStatementDay finds the oldest (app, day) of staged lines before a date, after a
// cursor, through idx_statement_lines_bill_date (whose entries InnoDB extends with the
// primary key's app_id): one index dive per day, however many lines the days hold. The
// optimizer hint is TiDB's (see qPurgeNotifications).
const (
	qOldStatementDay = `SELECT /*+ USE_INDEX(statement_lines, idx_statement_lines_bill_date) */ app_id, DATE_FORMAT(bill_date, '%Y-%m-%d')
FROM statement_lines WHERE bill_date < ? ORDER BY bill_date, app_id LIMIT 1`
	qOldStatementDayAfter = `SELECT /*+ USE_INDEX(statement_lines, idx_statement_lines_bill_date) */ app_id, DATE_FORMAT(bill_date, '%Y-%m-%d')
FROM statement_lines WHERE bill_date < ? AND (bill_date > ? OR bill_date = ? AND app_id > ?) ORDER BY bill_date, app_id LIMIT 1`
)

// qPurgeStatementDay deletes a batch of one (app, day)'s staged lines through the primary key.
const qPurgeStatementDay = `DELETE FROM statement_lines WHERE app_id = ? AND bill_date = ? LIMIT ?`

// PurgeStatementLines deletes up to limit staged lines of the days before before
// (yyyy-MM-dd), of every app, oldest day first, each statement at most limit lines. Only
// the run of a day reads its lines (and a run replaces them), so old ones are kept only
// for looking into a run's anomalies; but a run of an old day (an operator's re-run)
// stages its lines and then reads them. So the purge takes each (app, day) through that
// day's statement lock (LockStatement's, without waiting) and deletes its lines while it
// holds it: a day another run holds is skipped and left whole (the next purge after that
// run takes it), and a run of a day the purge holds for its few statements is refused as
// ECONFLICT and retried like any concurrent run.
func (st *Store) PurgeStatementLines(ctx context.Context, before string, limit int) (int64, error) {
	if limit <= 0 {
		return 0, nil
	}
	conn, err := st.db.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("mysql: purge statement lines: %w", err)
	}
	defer conn.Close()
	var (
		purged     int64
		app, date  string
		pastCursor bool
	)
	for purged < int64(limit) {
		q, args := qOldStatementDay, []any{before}
		if pastCursor {
			q, args = qOldStatementDayAfter, []any{before, date, date, app}
		}
		switch err := conn.QueryRowContext(ctx, q, args...).Scan(&app, &date); {
		case err == sql.ErrNoRows:
			return purged, nil
		case err != nil:
			return purged, fmt.Errorf("mysql: purge statement lines: %w", err)
		}
		pastCursor = true
		n, err := purgeStatementDay(ctx, conn, app, date, int64(limit)-purged)
		purged += n
		if err != nil {
			return purged, fmt.Errorf("mysql: purge statement lines of %s %s: %w", app, date, err)
		}
	}
	return purged, nil
}

// purgeStatementDay deletes up to limit staged lines of one (app, day) on conn while it
// holds the day's statement lock; a day whose lock is held elsewhere is left as it is.
func purgeStatementDay(ctx context.Context, conn *sql.Conn, appID, billDate string, limit int64) (purged int64, err error) {
	name := statementLockName(appID, billDate)
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(?, 0)`, name).Scan(&got); err != nil && !lockBusy(err) {
		return 0, err
	}
	if got.Int64 != 1 {
		return 0, nil // a run of the day holds it
	}
	defer func() {
		if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), `SELECT RELEASE_LOCK(?)`, name); rerr != nil {
			// A connection that may still hold the lock must not go back to the pool.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			if err == nil {
				err = rerr
			}
		}
	}()
	for purged < limit {
		want := limit - purged
		res, err := conn.ExecContext(ctx, qPurgeStatementDay, appID, billDate, want)
		if err != nil {
			return purged, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return purged, err
		}
		purged += n
		if n < want {
			break // the day is empty
		}
	}
	return purged, nil
}

// StageBillLines inserts a batch of bill lines in one statement. A line staged before
// (a retried batch) is left as it is.
func (st *Store) StageBillLines(ctx context.Context, appID, billDate string, lines []payment.BillLine) error {
	if len(lines) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString(`INSERT IGNORE INTO statement_lines (app_id, bill_date, line_no, kind, out_trade_no, out_request_no, trade_no, amount_fen) VALUES `)
	args := make([]any, 0, len(lines)*8)
	for i, l := range lines {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,?,?)")
		args = append(args, appID, billDate, l.LineNo, l.Kind, truncate(l.OutTradeNo, maxRef),
			truncate(l.OutRequestNo, maxRef), truncate(l.TradeNo, maxRef), int64(l.Amount))
	}
	if _, err := st.db.ExecContext(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("mysql: stage bill lines: %w", err)
	}
	return nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

func anyStrings(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// PaymentsByNo returns the payments among paymentNos, by payment_no, in one query.
func (st *Store) PaymentsByNo(ctx context.Context, paymentNos []string) (map[string]payment.Payment, error) {
	out := make(map[string]payment.Payment, len(paymentNos))
	if len(paymentNos) == 0 {
		return out, nil
	}
	rows, err := st.db.QueryContext(ctx, `SELECT `+paymentColumns+` FROM payments WHERE payment_no IN (`+placeholders(len(paymentNos))+`)`,
		anyStrings(paymentNos)...)
	if err != nil {
		return nil, fmt.Errorf("mysql: payments by no: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		p, err := scanPayment(rows)
		if err != nil {
			return nil, fmt.Errorf("mysql: payments by no: %w", err)
		}
		out[p.PaymentNo] = p
	}
	return out, rows.Err()
}

// RefundsByOutRequestNo returns the refunds among outRequestNos, by out_request_no.
func (st *Store) RefundsByOutRequestNo(ctx context.Context, outRequestNos []string) (map[string]payment.Refund, error) {
	out := make(map[string]payment.Refund, len(outRequestNos))
	if len(outRequestNos) == 0 {
		return out, nil
	}
	rows, err := st.db.QueryContext(ctx, `SELECT `+refundColumns+` FROM refunds WHERE out_request_no IN (`+placeholders(len(outRequestNos))+`)`,
		anyStrings(outRequestNos)...)
	if err != nil {
		return nil, fmt.Errorf("mysql: refunds by out_request_no: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		r, err := scanRefund(rows)
		if err != nil {
			return nil, fmt.Errorf("mysql: refunds by out_request_no: %w", err)
		}
		out[r.OutRequestNo] = r
	}
	return out, rows.Err()
}

// onApp selects the rows opened on an app, by the app they recorded (alipay_app_id; an
// empty one counts for the default app, see migration 0032), not by their tenant's
// current app: a tenant that moved has its older payments and refunds in the old app's
// bills.
func onApp(alias string) string {
	return "(" + alias + ".alipay_app_id = ? OR (" + alias + ".alipay_app_id = '' AND ?))"
}

// EachPaymentNotInBill streams the scope's PAID payments that no staged payment line
// names with their trade_no (any line of their payment_no if they have none: a line of
// another trade under the same order number is not theirs). It reads through
// idx_payments_paid_at and the staged lines' index.
func (st *Store) EachPaymentNotInBill(ctx context.Context, sc payment.StatementScope, fn func(payment.Payment) error) error {
	q := `SELECT ` + paymentColumns + ` FROM payments p
WHERE p.paid_at >= ? AND p.paid_at < ? AND p.status = 1 AND ` + onApp("p") + `
AND NOT EXISTS (SELECT 1 FROM statement_lines l WHERE l.app_id = ? AND l.bill_date = ? AND l.out_trade_no = p.payment_no AND l.kind = 1
	AND (COALESCE(p.trade_no, '') = '' OR l.trade_no = p.trade_no))`
	rows, err := st.db.QueryContext(ctx, q, dbTime(sc.From), dbTime(sc.To), sc.AppID, sc.DefaultApp, sc.AppID, sc.BillDate)
	if err != nil {
		return fmt.Errorf("mysql: payments not in bill: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		p, err := scanPayment(rows)
		if err != nil {
			return fmt.Errorf("mysql: payments not in bill: %w", err)
		}
		if err := fn(p); err != nil {
			return err
		}
	}
	return rows.Err()
}

// EachRefundNotInBill streams the scope's refunds that succeeded in the day and that no
// staged refund line names with their trade_no (where they have one).
func (st *Store) EachRefundNotInBill(ctx context.Context, sc payment.StatementScope, fn func(payment.Refund) error) error {
	q := `SELECT ` + refundColumns + ` FROM refunds r
WHERE r.refunded_at >= ? AND r.refunded_at < ? AND r.status = 1 AND ` + onApp("r") + `
AND NOT EXISTS (SELECT 1 FROM statement_lines l WHERE l.app_id = ? AND l.bill_date = ? AND l.out_request_no = r.out_request_no AND l.kind = 2
	AND (r.trade_no = '' OR l.trade_no = r.trade_no))`
	rows, err := st.db.QueryContext(ctx, q, dbTime(sc.From), dbTime(sc.To), sc.AppID, sc.DefaultApp, sc.AppID, sc.BillDate)
	if err != nil {
		return fmt.Errorf("mysql: refunds not in bill: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		r, err := scanRefund(rows)
		if err != nil {
			return fmt.Errorf("mysql: refunds not in bill: %w", err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// EachDuplicateBillLine streams the staged payments (by out_trade_no) and refunds (by
// out_request_no) that appear on more than one line.
func (st *Store) EachDuplicateBillLine(ctx context.Context, appID, billDate string, fn func(payment.BillLine, int) error) error {
	q := `SELECT kind, out_trade_no, MAX(out_request_no), COUNT(*) FROM statement_lines
WHERE app_id = ? AND bill_date = ?
GROUP BY kind, IF(kind = 1, out_trade_no, out_request_no) HAVING COUNT(*) > 1`
	rows, err := st.db.QueryContext(ctx, q, appID, billDate)
	if err != nil {
		return fmt.Errorf("mysql: duplicate bill lines: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			l payment.BillLine
			n int
		)
		if err := rows.Scan(&l.Kind, &l.OutTradeNo, &l.OutRequestNo, &n); err != nil {
			return fmt.Errorf("mysql: duplicate bill lines: %w", err)
		}
		if err := fn(l, n); err != nil {
			return err
		}
	}
	return rows.Err()
}

// LocalStatementTotals counts and sums the scope's PAID payments and succeeded refunds.
func (st *Store) LocalStatementTotals(ctx context.Context, sc payment.StatementScope) (payment.StatementTotals, error) {
	var t payment.StatementTotals
	err := st.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(amount_fen), 0) FROM payments
WHERE paid_at >= ? AND paid_at < ? AND status = 1 AND `+onApp("payments"),
		dbTime(sc.From), dbTime(sc.To), sc.AppID, sc.DefaultApp).Scan(&t.Trades, &t.TradeFen)
	if err != nil {
		return t, fmt.Errorf("mysql: local statement totals: %w", err)
	}
	err = st.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(amount_fen), 0) FROM refunds
WHERE refunded_at >= ? AND refunded_at < ? AND status = 1 AND `+onApp("refunds"),
		dbTime(sc.From), dbTime(sc.To), sc.AppID, sc.DefaultApp).Scan(&t.Refunds, &t.RefundFen)
	if err != nil {
		return t, fmt.Errorf("mysql: local statement totals: %w", err)
	}
	return t, nil
}

const statementColumns = `app_id, DATE_FORMAT(bill_date, '%Y-%m-%d'), status, bill_lines, bill_trade_count, bill_trade_fen,
	bill_refund_count, bill_refund_fen, bill_fee_fen, local_trade_count, local_trade_fen, local_refund_count,
	local_refund_fen, diff_fen, discrepancies, by_kind, runs, started_at, finished_at`

// SaveStatementReport stores the one report of (AppID, BillDate): the first run inserts
// it, every later run overwrites it and counts itself in runs.
func (st *Store) SaveStatementReport(ctx context.Context, r payment.StatementReport) (payment.StatementReport, error) {
	kinds, err := json.Marshal(r.ByKind)
	if err != nil {
		return r, fmt.Errorf("mysql: save statement report: %w", err)
	}
	_, err = st.db.ExecContext(ctx, `INSERT INTO statement_reports (app_id, bill_date, status, bill_lines, bill_trade_count,
	bill_trade_fen, bill_refund_count, bill_refund_fen, bill_fee_fen, local_trade_count, local_trade_fen,
	local_refund_count, local_refund_fen, diff_fen, discrepancies, by_kind, runs, started_at, finished_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)
ON DUPLICATE KEY UPDATE status = VALUES(status), bill_lines = VALUES(bill_lines), bill_trade_count = VALUES(bill_trade_count),
	bill_trade_fen = VALUES(bill_trade_fen), bill_refund_count = VALUES(bill_refund_count),
	bill_refund_fen = VALUES(bill_refund_fen), bill_fee_fen = VALUES(bill_fee_fen),
	local_trade_count = VALUES(local_trade_count), local_trade_fen = VALUES(local_trade_fen),
	local_refund_count = VALUES(local_refund_count), local_refund_fen = VALUES(local_refund_fen),
	diff_fen = VALUES(diff_fen), discrepancies = VALUES(discrepancies), by_kind = VALUES(by_kind),
	runs = runs + 1, started_at = VALUES(started_at), finished_at = VALUES(finished_at)`,
		r.AppID, r.BillDate, r.Status, r.BillLines, r.BillTradeCount, r.BillTradeFen, r.BillRefundCount, r.BillRefundFen,
		r.BillFeeFen, r.LocalTradeCount, r.LocalTradeFen, r.LocalRefundCount, r.LocalRefundFen, r.DiffFen,
		r.Discrepancies, string(kinds), dbTime(r.StartedAt), dbTime(r.FinishedAt))
	if err != nil {
		return r, fmt.Errorf("mysql: save statement report %s %s: %w", r.AppID, r.BillDate, err)
	}
	return st.GetStatementReport(ctx, r.AppID, r.BillDate)
}

// GetStatementReport returns the report of one app and day, or an error wrapping
// payment.ErrNotFound.
func (st *Store) GetStatementReport(ctx context.Context, appID, billDate string) (payment.StatementReport, error) {
	row := st.db.QueryRowContext(ctx, `SELECT `+statementColumns+` FROM statement_reports WHERE app_id = ? AND bill_date = ?`, appID, billDate)
	r, err := scanStatementReport(row)
	if err == sql.ErrNoRows {
		return r, fmt.Errorf("mysql: statement report %s %s: %w", appID, billDate, payment.ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("mysql: statement report %s %s: %w", appID, billDate, err)
	}
	return r, nil
}

// ListStatementReports returns the reports of the days from..to (yyyy-MM-dd, inclusive),
// of one app or of every app when appID is empty, newest day first.
func (st *Store) ListStatementReports(ctx context.Context, appID, from, to string) ([]payment.StatementReport, error) {
	rows, err := st.db.QueryContext(ctx, `SELECT `+statementColumns+` FROM statement_reports
WHERE bill_date BETWEEN ? AND ? AND (app_id = ? OR ? = '') ORDER BY bill_date DESC, app_id LIMIT 1000`, from, to, appID, appID)
	if err != nil {
		return nil, fmt.Errorf("mysql: list statement reports: %w", err)
	}
	defer rows.Close()
	out := []payment.StatementReport{}
	for rows.Next() {
		r, err := scanStatementReport(rows)
		if err != nil {
			return nil, fmt.Errorf("mysql: list statement reports: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func scanStatementReport(s scanner) (payment.StatementReport, error) {
	var (
		r     payment.StatementReport
		kinds string
	)
	err := s.Scan(&r.AppID, &r.BillDate, &r.Status, &r.BillLines, &r.BillTradeCount, &r.BillTradeFen, &r.BillRefundCount,
		&r.BillRefundFen, &r.BillFeeFen, &r.LocalTradeCount, &r.LocalTradeFen, &r.LocalRefundCount, &r.LocalRefundFen,
		&r.DiffFen, &r.Discrepancies, &kinds, &r.Runs, &r.StartedAt, &r.FinishedAt)
	if err != nil {
		return r, err
	}
	if kinds != "" && kinds != "null" {
		_ = json.Unmarshal([]byte(kinds), &r.ByKind)
	}
	return r, nil
}

// ListStatementAnomalies returns the anomalies that the reconciliation of one app and
// day recorded first (a later day finding the same one does not repeat it), oldest first.
func (st *Store) ListStatementAnomalies(ctx context.Context, appID, billDate string) ([]payment.Anomaly, error) {
	prefix := "statement " + appID + " " + billDate + ": "
	rows, err := st.db.QueryContext(ctx, `SELECT kind, tenant_id, payment_no, subject, trade_no, amount_fen, detail, created_at
FROM payment_anomalies WHERE kind LIKE 'statement\_%' AND LEFT(detail, ?) = ? ORDER BY id LIMIT 10000`, len(prefix), prefix)
	if err != nil {
		return nil, fmt.Errorf("mysql: statement anomalies: %w", err)
	}
	defer rows.Close()
	out := []payment.Anomaly{}
	for rows.Next() {
		var (
			a      payment.Anomaly
			amount int64
		)
		if err := rows.Scan(&a.Kind, &a.TenantID, &a.PaymentNo, &a.Subject, &a.TradeNo, &amount, &a.Detail, &a.CreatedAt); err != nil {
			return nil, fmt.Errorf("mysql: statement anomalies: %w", err)
		}
		a.Amount = payment.Amount(amount)
		out = append(out, a)
	}
	return out, rows.Err()
}

// StatementReportDates returns the days in [from, to] (yyyy-MM-dd) an app has a report
// of, in order.
func (st *Store) StatementReportDates(ctx context.Context, appID, from, to string) ([]string, error) {
	var out []string
	err := st.query(ctx, `SELECT DATE_FORMAT(bill_date, '%Y-%m-%d') FROM statement_reports
WHERE app_id = ? AND bill_date BETWEEN ? AND ? ORDER BY bill_date`, []any{appID, from, to}, func(rows *sql.Rows) error {
		var d string
		err := rows.Scan(&d)
		out = append(out, d)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: statement report dates of %s: %w", appID, err)
	}
	return out, nil
}

// PurgeStatementReports deletes the reports of an app's days before before (yyyy-MM-dd),
// at most limit, and says how many. Through the primary key (app_id, bill_date): one
// range per app.
func (st *Store) PurgeStatementReports(ctx context.Context, appID, before string, limit int) (int64, error) {
	return st.execCount(ctx, "purge statement reports", `DELETE FROM statement_reports WHERE app_id = ? AND bill_date < ? LIMIT ?`, appID, before, limit)
}
