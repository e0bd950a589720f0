package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
)

func TestRetryClassifier(t *testing.T) {
	tests := []struct {
		name          string
		err           error
		wantRetryable bool
		wantDuplicate bool
	}{
		{"deadlock", &gomysql.MySQLError{Number: 1213}, true, false},
		{"lock wait timeout", &gomysql.MySQLError{Number: 1205}, true, false},
		{"wrapped deadlock", fmt.Errorf("mysql: mark paid: %w", &gomysql.MySQLError{Number: 1213}), true, false},
		{"joined lock wait timeout", errors.Join(errors.New("x"), &gomysql.MySQLError{Number: 1205}), true, false},
		{"TiDB write conflict", &gomysql.MySQLError{Number: 9007}, true, false},
		{"TiDB FOR UPDATE lost a conflict", &gomysql.MySQLError{Number: 8002}, true, false},
		{"TiDB schema changed", &gomysql.MySQLError{Number: 8028}, true, false},
		{"TiDB pessimistic lock retry limit", &gomysql.MySQLError{Number: 1105, Message: "pessimistic lock retry limit reached"}, true, false},
		{"another unknown error", &gomysql.MySQLError{Number: 1105, Message: "out of memory"}, false, false},
		{"duplicate key", &gomysql.MySQLError{Number: 1062}, false, true},
		{"wrapped duplicate key", fmt.Errorf("insert: %w", &gomysql.MySQLError{Number: 1062}), false, true},
		{"syntax error", &gomysql.MySQLError{Number: 1064}, false, false},
		{"no rows", sql.ErrNoRows, false, false},
		{"context deadline", context.DeadlineExceeded, false, false},
		{"plain error mentioning 1213", errors.New("Error 1213: Deadlock found"), false, false},
		{"nil", nil, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mysql.IsRetryable(tt.err); got != tt.wantRetryable {
				t.Errorf("IsRetryable = %v, want %v", got, tt.wantRetryable)
			}
			if got := mysql.IsDuplicate(tt.err); got != tt.wantDuplicate {
				t.Errorf("IsDuplicate = %v, want %v", got, tt.wantDuplicate)
			}
		})
	}
}

// TestRetryClassifierOnRealErrors provokes a real deadlock and a real lock wait timeout
// on the server and checks that the errors the driver returns are classified retryable.
func TestRetryClassifierOnRealErrors(t *testing.T) {
	db, _ := testenv.MySQL(t)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `INSERT INTO benefit_grants (tenant_id, payment_no, order_id, benefit, created_at)
		VALUES ('t', 'a', 'o', 'b', NOW(6)), ('t', 'b', 'o', 'b', NOW(6))`); err != nil {
		t.Fatal(err)
	}
	// Lock by the unique key so that each statement locks exactly one row.
	lock := func(tx *sql.Tx, paymentNo string) error {
		var id int64
		return tx.QueryRowContext(ctx, `SELECT id FROM benefit_grants
			WHERE tenant_id = 't' AND payment_no = ? AND benefit = 'b' FOR UPDATE`, paymentNo).Scan(&id)
	}

	t.Run("deadlock", func(t *testing.T) {
		tx1, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx1.Rollback()
		tx2, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx2.Rollback()
		if err := lock(tx1, "a"); err != nil {
			t.Fatal(err)
		}
		if err := lock(tx2, "b"); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		wg.Go(func() { errs[0] = lock(tx1, "b") })
		time.Sleep(100 * time.Millisecond) // let tx1 wait first
		wg.Go(func() { errs[1] = lock(tx2, "a") })
		// InnoDB picks a victim at once and the survivor gets its lock.
		wg.Wait()
		victim := errors.Join(errs...)
		t.Logf("deadlock victim error: %v", victim)
		if !mysql.IsRetryable(victim) || mysql.IsDuplicate(victim) {
			t.Fatalf("deadlock error %v not classified retryable", victim)
		}
	})

	t.Run("lock wait timeout", func(t *testing.T) {
		holder, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Rollback()
		if err := lock(holder, "a"); err != nil {
			t.Fatal(err)
		}
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 1"); err != nil {
			t.Fatal(err)
		}
		waiter, err := conn.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer waiter.Rollback()
		err = lock(waiter, "a")
		t.Logf("lock wait error: %v", err)
		if !mysql.IsRetryable(err) {
			t.Fatalf("lock wait error %v not classified retryable", err)
		}
	})
}

// TestTransactionRetriedAfterLockWaitTimeout holds the order row from outside while
// MarkPaid runs with a 1 s lock wait timeout: its first attempt fails with 1205, the
// retry after the row is released succeeds, and exactly one transition is recorded.
func TestTransactionRetriedAfterLockWaitTimeout(t *testing.T) {
	_, dsn := testenv.MySQL(t)
	ctx := context.Background()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Params["innodb_lock_wait_timeout"] = "1"
	db, err := mysql.Open(ctx, cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st := mysql.NewStore(db)
	defer st.Close()
	createPending(t, st, "t1", "o1", "p1")

	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.ExecContext(ctx, "SELECT id FROM orders WHERE tenant_id = 't1' AND order_id = 'o1' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() {
		time.Sleep(3 * time.Second) // longer than one lock wait (1-2 s)
		_ = holder.Rollback()
		close(released)
	}()

	start := time.Now()
	tr, err := st.MarkPaid(ctx, "p1", "T1", time.Time{})
	elapsed := time.Since(start)
	<-released
	if err != nil {
		t.Fatalf("MarkPaid: %v", err)
	}
	events := count(t, db, "SELECT COUNT(*) FROM payment_events WHERE payment_no = 'p1'")
	t.Logf("MarkPaid behind a held order lock: changed=%v after %v, events=%d", tr.Changed, elapsed.Round(time.Millisecond), events)
	if !tr.Changed || events != 1 || elapsed < 3*time.Second {
		t.Fatal("want one transition after at least one lock wait timeout")
	}
}
