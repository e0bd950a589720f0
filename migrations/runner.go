package migrations

import (
	"bufio"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/pressly/goose/v3"
)

// Options tunes how migrations run against a live database.
type Options struct {
	// LockWait bounds how long one DDL statement waits for its table's metadata lock
	// (SET SESSION lock_wait_timeout). While a DDL waits, every new query on that table
	// waits behind it, so this is the longest a migration stalls the application's
	// writes. Zero means DefaultLockWait.
	LockWait time.Duration
	// RetryFor is how long a statement that timed out on its lock is retried (with
	// backoff, the application's queries running in between) before the migration fails.
	// Zero means DefaultRetryFor.
	RetryFor time.Duration
	// Force lets a Down run whose guard finds data it would destroy.
	Force bool
	// Logger reports retries and statements or clauses found already applied (and
	// verified); nil discards.
	Logger *slog.Logger
}

// DefaultLockWait and DefaultRetryFor are the defaults of Options.
const (
	DefaultLockWait = 2 * time.Second
	DefaultRetryFor = 10 * time.Minute
)

func (o Options) withDefaults() Options {
	if o.LockWait <= 0 {
		o.LockWait = DefaultLockWait
	}
	if o.RetryFor <= 0 {
		o.RetryFor = DefaultRetryFor
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// file is one parsed migration file.
type file struct {
	version int64
	name    string
	up      []string
	down    []string
	// guards are queries run before Down: if one returns a row, Down refuses unless
	// forced ("-- +paykit down-guard: SELECT 1 FROM refunds LIMIT 1").
	guards []string
	// batched runs each Up statement again, each run its own transaction, until it changes
	// no row ("-- +paykit batched"): a backfill with a LIMIT that keeps every transaction
	// within TiDB's size limit.
	batched bool
	// ranged runs each Up statement over a table's key, one range of keys at a time
	// ("-- +paykit batched-by: payment_events.id 10000"): the statement's two ? are the
	// range's exclusive low and inclusive high keys. Each range is its own transaction and
	// the walk reads each key once, so a backfill of a big table keeps every transaction
	// within TiDB's size limit and takes time linear in the table, where a LIMIT run again
	// (batched) reads the rows it already changed on every run.
	ranged *keyRange
}

// keyRange is the key a ranged file's statements are run over, and the range's size.
type keyRange struct {
	table, column string
	size          int
}

const (
	guardPrefix   = "-- +paykit down-guard:"
	batchedMarker = "-- +paykit batched"
	rangedPrefix  = "-- +paykit batched-by:"
)

// identifier is a table or column name a ranged file may name.
var identifier = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// parseRange reads "table.column size".
func parseRange(spec string) (*keyRange, error) {
	fields := strings.Fields(spec)
	if len(fields) != 2 {
		return nil, fmt.Errorf("want \"table.column size\", got %q", spec)
	}
	table, column, ok := strings.Cut(fields[0], ".")
	size, err := strconv.Atoi(fields[1])
	if !ok || !identifier.MatchString(table) || !identifier.MatchString(column) || err != nil || size <= 0 {
		return nil, fmt.Errorf("want \"table.column size\", got %q", spec)
	}
	return &keyRange{table: table, column: column, size: size}, nil
}

// next is the query of the high key of the range after a low key: NULL past the last.
func (r keyRange) next() string {
	return fmt.Sprintf("SELECT MAX(%[2]s) FROM (SELECT %[2]s FROM %[1]s WHERE %[2]s > ? ORDER BY %[2]s LIMIT %[3]d) AS r",
		r.table, r.column, r.size)
}

// sections reports whether trimmed opens the Up or Down section of f, and which.
func sections(f *file, trimmed string) (*[]string, bool) {
	switch trimmed {
	case "-- +goose Up":
		return &f.up, true
	case "-- +goose Down":
		return &f.down, true
	}
	return nil, false
}

// annotation takes a comment line: a paykit annotation is recorded in f; skip is true for
// every comment or blank line, and an unsupported goose annotation is an error.
func (f *file) annotation(trimmed string) (skip bool, err error) {
	switch {
	case strings.HasPrefix(trimmed, guardPrefix):
		f.guards = append(f.guards, strings.TrimSpace(strings.TrimPrefix(trimmed, guardPrefix)))
	case trimmed == batchedMarker:
		f.batched = true
	case strings.HasPrefix(trimmed, rangedPrefix):
		r, err := parseRange(strings.TrimPrefix(trimmed, rangedPrefix))
		if err != nil {
			return true, fmt.Errorf("%s %w", rangedPrefix, err)
		}
		f.ranged = r
	case strings.HasPrefix(trimmed, "-- +goose"):
		return true, fmt.Errorf("annotation %q is not supported", trimmed)
	case strings.HasPrefix(trimmed, "--"), trimmed == "":
	default:
		return false, nil
	}
	return true, nil
}

// checkRanged checks that each Up statement of a file batched by a key range takes the
// range's low and high keys.
func (f file) checkRanged() error {
	if f.ranged == nil {
		return nil
	}
	for _, stmt := range f.up {
		if strings.Count(stmt, "?") != 2 {
			return fmt.Errorf("migrations: %s: a statement batched by a key range takes its low and high keys as two ?", f.name)
		}
	}
	return nil
}

// parseFile splits a goose-format file into its Up and Down statements. A statement
// ends with a semicolon at the end of a line; comment lines are dropped. The files hold
// no procedures or string literals spanning lines, which TestEveryFileParses keeps true.
func parseFile(name, text string) (file, error) {
	f := file{name: name}
	n, err := strconv.ParseInt(strings.SplitN(name, "_", 2)[0], 10, 64)
	if err != nil {
		return f, fmt.Errorf("migrations: %s is not numbered", name)
	}
	f.version = n
	var section *[]string
	var stmt strings.Builder
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t\r")
		trimmed := strings.TrimSpace(line)
		if sec, ok := sections(&f, trimmed); ok {
			section = sec
			continue
		}
		if skip, err := f.annotation(trimmed); err != nil || skip {
			if err != nil {
				return f, fmt.Errorf("migrations: %s: %w", name, err)
			}
			continue
		}
		if section == nil {
			return f, fmt.Errorf("migrations: %s: SQL before -- +goose Up", name)
		}
		stmt.WriteString(line)
		stmt.WriteByte('\n')
		if strings.HasSuffix(trimmed, ";") {
			*section = append(*section, strings.TrimSuffix(strings.TrimSpace(stmt.String()), ";"))
			stmt.Reset()
		}
	}
	if strings.TrimSpace(stmt.String()) != "" {
		return f, fmt.Errorf("migrations: %s: last statement has no semicolon", name)
	}
	if len(f.up) == 0 {
		return f, fmt.Errorf("migrations: %s: no Up statement", name)
	}
	if err := f.checkRanged(); err != nil {
		return f, err
	}
	return f, nil
}

// files parses every migration file of FS, in order.
func files() ([]file, error) {
	names, err := fs.Glob(FS, "*.sql")
	if err != nil {
		return nil, err
	}
	out := make([]file, 0, len(names))
	for _, name := range names {
		b, err := fs.ReadFile(FS, name)
		if err != nil {
			return nil, err
		}
		f, err := parseFile(name, string(b))
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// MySQL error numbers the runner reacts to.
const (
	errLockWait       = 1205 // ER_LOCK_WAIT_TIMEOUT: also a metadata lock not granted in lock_wait_timeout
	errTableExists    = 1050 // ER_TABLE_EXISTS_ERROR
	errUnknownTable   = 1051 // ER_BAD_TABLE_ERROR
	errDupColumn      = 1060 // ER_DUP_FIELDNAME
	errDupKey         = 1061 // ER_DUP_KEYNAME
	errCantDropColKey = 1091 // ER_CANT_DROP_FIELD_OR_KEY
	errNoSuchTable    = 1146 // ER_NO_SUCH_TABLE
	errBadField       = 1054 // ER_BAD_FIELD_ERROR

	tidbErrInfoSchemaChanged = 8028 // TiDB: the schema changed under the statement
)

// isLockWait reports whether err is a statement that gave up waiting and may be run again:
// a lock wait timeout, or TiDB's "information schema is changed during the execution of
// the statement" (another DDL, of any database on the server, ran meanwhile).
func isLockWait(err error) bool {
	var me *gomysql.MySQLError
	return errors.As(err, &me) && (me.Number == errLockWait || me.Number == tidbErrInfoSchemaChanged)
}

// run executes stmts one by one on one connection with lock_wait_timeout set. A
// statement whose lock wait timed out is retried with backoff; one whose effect is
// already there, in whole or in part (an earlier, interrupted run got that far, or a DBA
// applied it ahead), is skipped as far as settle verifies it, and what is missing is
// run. So a migration stopped at any point completes when run again. With batched, each
// statement is run again until it changes no row.
func (f file) run(ctx context.Context, db *sql.DB, stmts []string, batched, ranged bool, o Options) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	restore, err := f.setLockWait(ctx, conn, o.LockWait)
	defer restore()
	if err != nil {
		return err
	}
	if ranged && f.ranged != nil {
		for i, stmt := range stmts {
			if err := f.runRanged(ctx, conn, i, stmt, o); err != nil {
				return err
			}
		}
		return nil
	}
	stmts, err = f.forServer(ctx, conn, stmts)
	if err != nil {
		return err
	}
	for i, stmt := range stmts {
		if err := f.runStatement(ctx, conn, i, stmt, batched, o); err != nil {
			return err
		}
	}
	return nil
}

// setLockWait sets conn's lock_wait_timeout to wait, rounded up to whole seconds, and
// returns the function that sets it back: the connection goes back to db's pool, so it is
// left as it was found, or, if that fails, it is not given back with a short lock wait.
// Once the old value is read, restore is returned even with an error, and must be called.
func (f file) setLockWait(ctx context.Context, conn *sql.Conn, wait time.Duration) (restore func(), err error) {
	var before int64
	if err := conn.QueryRowContext(ctx, "SELECT @@SESSION.lock_wait_timeout").Scan(&before); err != nil {
		return func() {}, fmt.Errorf("%s: read lock_wait_timeout: %w", f.name, err)
	}
	restore = func() {
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), "SET SESSION lock_wait_timeout = "+strconv.FormatInt(before, 10)); err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}
	secs := int(math.Ceil(wait.Seconds()))
	if _, err := conn.ExecContext(ctx, "SET SESSION lock_wait_timeout = "+strconv.Itoa(secs)); err != nil {
		return restore, fmt.Errorf("%s: set lock_wait_timeout: %w", f.name, err)
	}
	return restore, nil
}

// forServer returns stmts as the server on conn is to run them: on TiDB, which refuses an
// ALTER whose clauses depend on each other, each clause of an ALTER is a statement of its
// own (tidb.go).
func (f file) forServer(ctx context.Context, conn *sql.Conn, stmts []string) ([]string, error) {
	tidb, err := IsTiDB(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("%s: read the server's version: %w", f.name, err)
	}
	if !tidb {
		return stmts, nil
	}
	var split []string
	for _, stmt := range stmts {
		split = append(split, clausesOf(stmt)...)
	}
	return split, nil
}

// runStatement runs stmt (statement i+1) until it is done: again while batched and it
// changes rows, without what settle finds applied, and again with backoff while its lock
// wait times out, for as long as o.RetryFor.
func (f file) runStatement(ctx context.Context, conn *sql.Conn, i int, stmt string, batched bool, o Options) error {
	deadline := time.Now().Add(o.RetryFor)
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		res, err := conn.ExecContext(ctx, stmt)
		if err == nil {
			if n, _ := res.RowsAffected(); batched && n > 0 {
				attempt, backoff = 0, 100*time.Millisecond
				continue
			}
			return nil
		}
		if foundApplied(err) {
			// Part of the statement's effect is there: what is there is verified, and
			// what is not is run (settle).
			rest, err := f.settle(ctx, conn, stmt, err, o.Logger, i+1)
			if err != nil {
				return err
			}
			if rest == "" {
				return nil
			}
			stmt = rest
			continue
		}
		if !isLockWait(err) || time.Now().After(deadline) {
			return fmt.Errorf("%s: statement %d: %w", f.name, i+1, err)
		}
		o.Logger.Warn("migration waited too long for a table lock; retrying", "file", f.name, "statement", i+1,
			"attempt", attempt, "lock_wait", o.LockWait, "backoff", backoff)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// runRanged runs stmt (statement i+1) over f.ranged's key one range at a time, from the
// lowest key to the highest, retrying a range whose lock wait timed out. Run again after
// an interruption it walks every range again: the statement must change nothing twice.
func (f file) runRanged(ctx context.Context, conn *sql.Conn, i int, stmt string, o Options) error {
	next := f.ranged.next()
	lo := int64(math.MinInt64)
	for {
		var hi sql.NullInt64
		if err := conn.QueryRowContext(ctx, next, lo).Scan(&hi); err != nil {
			return fmt.Errorf("%s: statement %d: the range after %d: %w", f.name, i+1, lo, err)
		}
		if !hi.Valid {
			return nil
		}
		deadline := time.Now().Add(o.RetryFor)
		backoff := 100 * time.Millisecond
		for {
			_, err := conn.ExecContext(ctx, stmt, lo, hi.Int64)
			if err == nil {
				break
			}
			if !isLockWait(err) || time.Now().After(deadline) {
				return fmt.Errorf("%s: statement %d over (%d, %d]: %w", f.name, i+1, lo, hi.Int64, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
		}
		lo = hi.Int64
	}
}

// ErrDestroysData is returned by a Down whose guard found data it would destroy.
var ErrDestroysData = errors.New("migrations: down would destroy data")

func (f file) checkGuards(ctx context.Context, db *sql.DB, o Options) error {
	for _, q := range f.guards {
		var one int
		err := db.QueryRowContext(ctx, q).Scan(&one)
		var me *gomysql.MySQLError
		if errors.Is(err, sql.ErrNoRows) || (errors.As(err, &me) && (me.Number == errNoSuchTable || me.Number == errBadField)) {
			// No rows, or the table or column is gone already (an interrupted down run
			// again): nothing to destroy.
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: guard %q: %w", f.name, q, err)
		}
		if !o.Force {
			return fmt.Errorf("%w: %s (%s finds rows); force it (paykit migrate -down-to N -force) to drop them", ErrDestroysData, f.name, q)
		}
		o.Logger.Warn("down migration destroys data (forced)", "file", f.name, "guard", q)
	}
	return nil
}

// goMigrations turns the files into goose migrations run by the runner.
func goMigrations(o Options) ([]*goose.Migration, error) {
	fs, err := files()
	if err != nil {
		return nil, err
	}
	out := make([]*goose.Migration, 0, len(fs))
	for _, f := range fs {
		up := &goose.GoFunc{RunDB: func(ctx context.Context, db *sql.DB) error { return f.run(ctx, db, f.up, f.batched, true, o) }}
		down := &goose.GoFunc{RunDB: func(ctx context.Context, db *sql.DB) error {
			if err := f.checkGuards(ctx, db, o); err != nil {
				return err
			}
			return f.run(ctx, db, f.down, false, false, o)
		}}
		out = append(out, goose.NewGoMigration(f.version, up, down))
	}
	return out, nil
}
