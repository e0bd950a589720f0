// Package mysql implements the store's interfaces of package payment (Payments, Refunds,
// Outbox, IdempotencyKeys, …, StatementStore) on MySQL 8 or MariaDB 10.11.
//
// Every write is safe to repeat. Duplicates are resolved by unique indexes (never by
// check-then-write), state changes are compare-and-set updates under a row lock, and
// transactions that lose a deadlock or a lock wait are retried a bounded number of times.
// All SQL is parameterised and executed through prepared statements cached per Store.
package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/XSAM/otelsql"
	"github.com/cenkalti/backoff/v5"
	gomysql "github.com/go-sql-driver/mysql"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/paykit/paykit/payment"
)

// MySQL server error numbers the store reacts to.
const (
	errDupEntry        = 1062 // ER_DUP_ENTRY
	errLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT
	errLockDeadlock    = 1213 // ER_LOCK_DEADLOCK

	// TiDB's own: transient conflicts of its distributed transactions, each safe to retry
	// from the start of the transaction.
	tidbErrUnknown            = 1105 // ER_UNKNOWN_ERROR, with tidbPessimisticRetryLimit
	tidbErrForUpdateCantRetry = 8002 // a SELECT … FOR UPDATE lost a write conflict
	tidbErrTxnRetryable       = 8022 // "KV error safe to retry"
	tidbErrInfoSchemaChanged  = 8028 // the schema changed during the transaction (a DDL ran)
	tidbErrWriteConflict      = 9007 // a write conflict
)

// tidbPessimisticRetryLimit is the message of TiDB's 1105 for a statement that lost its
// locks to concurrent writers more often than its retry limit allows (many upserts of one
// key at once); the transaction, not the statement, must be retried.
const tidbPessimisticRetryLimit = "pessimistic lock retry limit reached"

// Retry policy for transactions that lose a deadlock or time out waiting for a lock.
const (
	maxTxAttempts  = 5
	txBackoffBase  = 5 * time.Millisecond
	txBackoffLimit = 200 * time.Millisecond
)

// Pool settings applied by Open. MySQL's default max_connections is 151; several
// processes share it.
const (
	maxOpenConns    = 20
	maxIdleConns    = 20
	connMaxLifetime = 5 * time.Minute
	connMaxIdleTime = time.Minute
	dialTimeout     = 5 * time.Second
	lockWaitTimeout = "10" // seconds
)

// Open connects to the database named in dsn (go-sql-driver format, e.g.
// "user:pass@tcp(127.0.0.1:3306)/paykit"), forcing parseTime=true, loc=UTC and a UTC
// session time zone so that DATETIME(6) columns always hold UTC, and pings it.
func Open(ctx context.Context, dsn string, opts ...OpenOption) (*sql.DB, error) {
	var o openOptions
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	connector, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql: connector: %w", err)
	}
	var db *sql.DB
	if o.tracing {
		// A span per query, statement and transaction, under the caller's span. Rows,
		// connection checks and session resets are left out: they would double the spans
		// and say nothing an operator can act on.
		db = otelsql.OpenDB(connector,
			otelsql.WithAttributes(attribute.String("db.system.name", "mysql")),
			otelsql.WithSpanOptions(otelsql.SpanOptions{
				OmitConnResetSession: true, OmitConnPrepare: true, OmitRows: true, OmitConnectorConnect: true,
				SpanFilter: func(ctx context.Context, _ otelsql.Method, _ string, _ []driver.NamedValue) bool {
					return trace.SpanContextFromContext(ctx).IsValid() // no root spans for background pings
				},
			}))
	} else {
		db = sql.OpenDB(connector)
	}
	db.SetMaxOpenConns(maxOpenConns)
	db.SetMaxIdleConns(maxIdleConns)
	db.SetConnMaxLifetime(connMaxLifetime)
	db.SetConnMaxIdleTime(connMaxIdleTime)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("mysql: ping %s: %w", cfg.Addr, err)
	}
	return db, nil
}

// OpenOption changes how Open connects.
type OpenOption func(*openOptions)

type openOptions struct{ tracing bool }

// WithTracing traces every SQL call with the process's OpenTelemetry tracer provider.
func WithTracing() OpenOption { return func(o *openOptions) { o.tracing = true } }

// ParseDSN parses dsn and applies the settings the store relies on: parseTime=true,
// loc=UTC, time_zone='+00:00', a dial timeout and, unless the DSN sets it, a 10 s
// innodb_lock_wait_timeout. It is exported for tools that build DSNs for other databases
// on the same server (tests, the dev command).
func ParseDSN(dsn string) (*gomysql.Config, error) {
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql: parse dsn: %w", err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	if _, ok := cfg.Params["innodb_lock_wait_timeout"]; !ok {
		// A payment request should not sit 50 s (the server default) behind a lock;
		// the transaction is retried instead.
		cfg.Params["innodb_lock_wait_timeout"] = lockWaitTimeout
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = dialTimeout
	}
	return cfg, nil
}

// Store implements every store interface of package payment on a *sql.DB opened with Open.
type Store struct {
	db    *sql.DB
	stmts stmtCache
	// afterEventInsert, when a test sets it, runs inside the transaction right after it
	// wrote an outbox event, before the commit.
	afterEventInsert func(paymentNo string)
	// eventIDs, when a test sets it, gives each outbox event its id, as a second SQL
	// server allocating from its own batch would.
	eventIDs func() int64
	// lockCheck, when a test sets it, is how often a held statement lock is checked
	// (StatementLockCheck otherwise).
	lockCheck time.Duration
	// releaseLock, when a test sets it, is the statement that lets go of a statement
	// lock (qReleaseStatementLock otherwise).
	releaseLock string
	// runScope is the stack's payment.RunScope (SetRunScope); '' for none.
	runScope string
}

var (
	_ payment.Payments           = (*Store)(nil)
	_ payment.PaymentTransitions = (*Store)(nil)
	_ payment.PayLinks           = (*Store)(nil)
	_ payment.Notifications      = (*Store)(nil)
	_ payment.Inbox              = (*Store)(nil)
	_ payment.Grants             = (*Store)(nil)
	_ payment.Outbox             = (*Store)(nil)
	_ payment.EventFeed          = (*Store)(nil)
	_ payment.IdempotencyKeys    = (*Store)(nil)
	_ payment.Refunds            = (*Store)(nil)
	_ payment.RefundTransitions  = (*Store)(nil)
	_ payment.Anomalies          = (*Store)(nil)
	_ payment.Tenants            = (*Store)(nil)
	_ payment.APIKeys            = (*Store)(nil)
	_ payment.APIKeyAdmin        = (*Store)(nil)
	_ payment.TenantSettings     = (*Store)(nil)
	_ payment.Pinger             = (*Store)(nil)
)

// NewStore returns a store on db. The schema must have been migrated (migrations.Up).
// Statements are prepared on first use and reused; Close releases them.
func NewStore(db *sql.DB) *Store {
	return &Store{
		db:    db,
		stmts: stmtCache{m: map[string]*sql.Stmt{}},
	}
}

// SetRunScope gives the store the run scope (payment.RunScope) of the stack it serves,
// before its first use: the payments it creates carry it, and its due queries and pending
// walk read only that scope's payments and those from before scopes. A store without one
// (the commands that create no payment) reads every payment.
func (st *Store) SetRunScope(scope string) { st.runScope = scope }

// DB returns the underlying database handle.
func (st *Store) DB() *sql.DB { return st.db }

// Close closes the prepared statements. It does not close the *sql.DB, which belongs to
// the caller.
func (st *Store) Close() error { return st.stmts.close() }

// Ping checks the connection.
func (st *Store) Ping(ctx context.Context) error {
	if err := st.db.PingContext(ctx); err != nil {
		return fmt.Errorf("mysql: ping: %w", err)
	}
	return nil
}

// clock returns the current time in UTC at the microsecond precision of DATETIME(6), so
// that a value written and read back compares equal to the one returned to the caller.
func (st *Store) clock() time.Time { return dbTime(time.Now()) }

// dbTime converts t to what a DATETIME(6) column stores: UTC, truncated to microseconds.
// MySQL would round rather than truncate, so the truncation is done here.
func dbTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// IsRetryable reports whether err is a transient lock conflict (deadlock 1213 or lock
// wait timeout 1205; on TiDB also a write conflict, a lost FOR UPDATE, a schema change or
// the pessimistic lock retry limit) after which the whole transaction may be retried.
func IsRetryable(err error) bool {
	var me *gomysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case errLockDeadlock, errLockWaitTimeout,
		tidbErrForUpdateCantRetry, tidbErrTxnRetryable, tidbErrInfoSchemaChanged, tidbErrWriteConflict:
		return true
	case tidbErrUnknown:
		return strings.Contains(me.Message, tidbPessimisticRetryLimit)
	}
	return false
}

// IsDuplicate reports whether err is a duplicate-key violation (1062).
func IsDuplicate(err error) bool {
	var me *gomysql.MySQLError
	return errors.As(err, &me) && me.Number == errDupEntry
}

// inTx runs fn in a transaction and commits it. A transaction that fails with a
// retryable lock conflict is rolled back and run again, up to maxTxAttempts times with a
// jittered exponential backoff, so fn must not keep state between runs.
func (st *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	var err error
	wait := txBackOff()
	for attempt := range maxTxAttempts {
		if attempt > 0 {
			if serr := sleep(ctx, wait.NextBackOff()); serr != nil {
				return fmt.Errorf("mysql: retry: %w", errors.Join(serr, err))
			}
		}
		err = st.runTx(ctx, fn)
		if err == nil || !IsRetryable(err) {
			return err
		}
	}
	return &payment.Error{
		Code:    payment.ETOOMANYRETRIES,
		Message: "the database is busy; retry later",
		Err:     fmt.Errorf("mysql: transaction failed %d times: %w", maxTxAttempts, err),
	}
}

// txQueries are the statements used inside transactions. They are prepared before the
// first transaction begins: preparing on the pool needs a free connection, and a
// transaction that waited for one while holding its own could deadlock a full pool.
func txQueries() []string {
	return []string{
		qUpsertOrder, qOrderState, qInsertPayment, qPaymentByNoForUpdate, qMarkPaid, qClose, qFail, qOrderPaid,
		qOrderCancelled, qLockTenantFeed, qInsertEvent, qTenantByIDForUpdate, qUpdateTenant, qInsertTenant,
		qKeepAlipayApp, qSetTenantCredentials,
		qEventByIDForUpdate, qEventFailed, qDeliveredEventsToPurge,
		qRefundByNo, qRefundByNoForUpdate, qTenantPaymentForUpdate, qReserveRefund, qReserveClosedRefund, qReleaseRefund, qInsertRefund,
		qRefundSucceeded, qRefundFailed,
	}
}

func (st *Store) runTx(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	if !st.stmts.prepared.Load() {
		if err := st.stmts.prepareAll(ctx, st.db, txQueries()); err != nil {
			return err
		}
	}
	tx, err := st.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("mysql: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("mysql: commit: %w", err)
	}
	return nil
}

// txBackOff is the jittered exponential wait between the runs of a transaction: from
// txBackoffBase, doubling up to txBackoffLimit, each wait drawn within half of it either
// way.
func txBackOff() *backoff.ExponentialBackOff {
	b := &backoff.ExponentialBackOff{
		InitialInterval: txBackoffBase, RandomizationFactor: 0.5, Multiplier: 2, MaxInterval: txBackoffLimit,
	}
	b.Reset()
	return b
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// stmtCache prepares each query once on the pool and hands it out to every caller;
// database/sql re-prepares it transparently on connections that have not seen it. Its
// mutex is never held across a call that can wait on the database.
type stmtCache struct {
	mu       sync.Mutex
	m        map[string]*sql.Stmt
	prepared atomic.Bool // prepareAll succeeded
}

func (c *stmtCache) lookup(query string) (*sql.Stmt, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.m[query]
	return s, ok
}

// prepareAll prepares queries on the pool once; it is retried on the next call if it
// failed.
func (c *stmtCache) prepareAll(ctx context.Context, db *sql.DB, queries []string) error {
	for _, q := range queries {
		if _, err := c.get(ctx, db, q); err != nil {
			return err
		}
	}
	c.prepared.Store(true)
	return nil
}

// get returns the cached statement for query, preparing it on the pool if needed. It
// must not be called while holding a connection (inside a transaction).
func (c *stmtCache) get(ctx context.Context, db *sql.DB, query string) (*sql.Stmt, error) {
	if s, ok := c.lookup(query); ok {
		return s, nil
	}
	s, err := db.PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("mysql: prepare: %w", err)
	}
	c.mu.Lock()
	prev, ok := c.m[query]
	if !ok {
		c.m[query] = s
	}
	c.mu.Unlock()
	if ok {
		// Lost a race to prepare it. Close outside the mutex: closing waits for the
		// connections using the statement, and a transaction holding row locks may be
		// waiting on the mutex in lookup.
		_ = s.Close()
		return prev, nil
	}
	return s, nil
}

func (c *stmtCache) close() error {
	c.mu.Lock()
	c.prepared.Store(false)
	stmts := c.m
	c.m = map[string]*sql.Stmt{}
	c.mu.Unlock()
	var errs []error
	for _, s := range stmts {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("mysql: close statements: %w", err)
	}
	return nil
}

// stmt returns the cached prepared statement for query, bound to tx when tx is not nil.
// Inside a transaction a statement missing from the cache is prepared on the
// transaction's own connection (and closed with it) rather than on the pool.
func (st *Store) stmt(ctx context.Context, tx *sql.Tx, query string) (*sql.Stmt, error) {
	if tx == nil {
		return st.stmts.get(ctx, st.db, query)
	}
	if s, ok := st.stmts.lookup(query); ok {
		return tx.StmtContext(ctx, s), nil
	}
	s, err := tx.PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("mysql: prepare: %w", err)
	}
	return s, nil
}

// exec runs a prepared write, in tx if tx is not nil.
func (st *Store) exec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	s, err := st.stmt(ctx, tx, query)
	if err != nil {
		return nil, err
	}
	return s.ExecContext(ctx, args...)
}

// execCount runs a prepared write outside a transaction and returns how many rows it
// changed; what names the write in its errors.
func (st *Store) execCount(ctx context.Context, what, query string, args ...any) (int64, error) {
	res, err := st.exec(ctx, nil, query, args...)
	if err != nil {
		return 0, fmt.Errorf("mysql: %s: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("mysql: %s: %w", what, err)
	}
	return n, nil
}

// queryRow runs a prepared single-row query, in tx if tx is not nil, and scans it with
// scan. sql.ErrNoRows is turned into an error wrapping payment.ErrNotFound.
func (st *Store) queryRow(ctx context.Context, tx *sql.Tx, query string, args []any, scan func(*sql.Row) error) error {
	s, err := st.stmt(ctx, tx, query)
	if err != nil {
		return err
	}
	if err := scan(s.QueryRowContext(ctx, args...)); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return payment.ErrNotFound
		}
		return err
	}
	return nil
}

// query runs a prepared multi-row query and calls each for every row.
func (st *Store) query(ctx context.Context, query string, args []any, each func(*sql.Rows) error) error {
	s, err := st.stmt(ctx, nil, query)
	if err != nil {
		return err
	}
	rows, err := s.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// truncate cuts s to at most n bytes on a UTF-8 boundary, so that free text (reasons,
// errors, outcomes) never fails an insert in strict mode.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// nullString maps "" to NULL.
func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// nullTime maps the zero time to NULL and any other to what DATETIME(6) stores.
func nullTime(t time.Time) sql.NullTime { return sql.NullTime{Time: dbTime(t), Valid: !t.IsZero()} }
