package migrations_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/migrations"
)

// TestAnomalySubjectKey: 0042 and 0043 keep every anomaly recorded before them, with
// an empty subject, and let a payment hold two anomalies of one kind about two subjects; going
// back down is refused while it would merge them, and forced keeps the first of each.
func TestAnomalySubjectKey(t *testing.T) {
	ctx := context.Background()
	db, _ := testenv.EmptyMySQL(t)
	if err := migrations.UpTo(ctx, db, 41, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	insert := func(kind, paymentNo, subject string) error {
		q, args := `INSERT INTO payment_anomalies (kind, payment_no, detail, created_at) VALUES (?, ?, '', ?)`, []any{kind, paymentNo, now}
		if subject != "" {
			q, args = `INSERT INTO payment_anomalies (kind, payment_no, subject, detail, created_at) VALUES (?, ?, ?, '', ?)`,
				[]any{kind, paymentNo, subject, now}
		}
		_, err := db.ExecContext(ctx, q, args...)
		return err
	}
	count := func(where string) int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM payment_anomalies WHERE "+where).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, a := range [][2]string{{"refund_succeeded_after_fail", "P1"}, {"paid_after_close", "P1"}, {"refund_succeeded_after_fail", "P2"}} {
		if err := insert(a[0], a[1], ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatal(err)
	}
	if n := count("subject = ''"); n != 3 {
		t.Fatalf("%d rows with subject '' after 0043, want the 3 recorded before", n)
	}
	if err := insert("refund_succeeded_after_fail", "P1", "r2"); err != nil {
		t.Fatalf("a second subject of one kind and payment: %v", err)
	}
	if err := insert("refund_succeeded_after_fail", "P1", "r2"); err == nil {
		t.Fatal("the same (kind, payment_no, subject) twice was accepted")
	}

	err := migrations.DownTo(ctx, db, 41, migrations.Options{})
	if !errors.Is(err, migrations.ErrDestroysData) {
		t.Fatalf("DownTo(41) with two anomalies of one kind on P1: %v, want ErrDestroysData", err)
	}
	if n := count("payment_no = 'P1'"); n != 3 {
		t.Fatalf("%d anomalies of P1 after a refused down, want 3", n)
	}
	if err := migrations.DownTo(ctx, db, 41, migrations.Options{Force: true}); err != nil {
		t.Fatalf("forced DownTo(41): %v", err)
	}
	if n := count("kind = 'refund_succeeded_after_fail' AND payment_no = 'P1'"); n != 1 {
		t.Fatalf("%d refund_succeeded_after_fail anomalies of P1 after the forced down, want the first", n)
	}
	if n := count("1 = 1"); n != 3 {
		t.Fatalf("%d anomalies after the forced down, want 3", n)
	}
	if err := insert("paid_after_close", "P2", ""); err != nil {
		t.Fatal(err)
	}
	if err := insert("paid_after_close", "P2", ""); err == nil {
		t.Fatal("the old key is not back after the down")
	}
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatalf("up again: %v", err)
	}
}

// TestAnomalyLastSeenDownGuard: going back below 0049 drops last_seen_at, and with it the
// only mark of a resolved anomaly that was seen again after its resolution: the list
// shows it resolved, and the purge deletes it once its old resolution is past the
// retention. So the down is refused while such an anomaly exists (forced, it drops the
// column), and goes through when every anomaly is open, or resolved and not seen since.
// Before, the down dropped the column unguarded.
func TestAnomalyLastSeenDownGuard(t *testing.T) {
	ctx := context.Background()
	resolvedAt := time.Now().Add(-30 * 24 * time.Hour).UTC()
	for _, c := range []struct {
		name    string
		seen    time.Time // last_seen_at of the resolved anomaly
		refused bool
	}{
		{"resolved_and_seen_again", resolvedAt.Add(29 * 24 * time.Hour), true},
		{"resolved_not_seen_since", resolvedAt.Add(-time.Hour), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, _ := testenv.MySQL(t)
			insert := func(paymentNo string, created time.Time, resolved, seen any) {
				t.Helper()
				if _, err := db.ExecContext(ctx, `INSERT INTO payment_anomalies (kind, payment_no, detail, created_at, resolved_at, resolution, last_seen_at)
					VALUES ('amount_mismatch', ?, '', ?, ?, 'fixed', ?)`, paymentNo, created, resolved, seen); err != nil {
					t.Fatal(err)
				}
			}
			created := resolvedAt.Add(-2 * time.Hour)
			insert("P1", created, resolvedAt, c.seen)
			// An open anomaly seen again is kept, open, whatever the down drops.
			insert("P2", created, nil, time.Now().UTC())
			err := migrations.DownTo(ctx, db, 48, migrations.Options{})
			if !c.refused {
				if err != nil {
					t.Fatalf("DownTo(48): %v", err)
				}
				if got := columnOf(t, db, "payment_anomalies", "last_seen_at"); got != "" {
					t.Fatalf("last_seen_at (%s) is still there after 0049's down", got)
				}
				return
			}
			if !errors.Is(err, migrations.ErrDestroysData) {
				t.Fatalf("DownTo(48) with a resolved anomaly seen again: %v, want ErrDestroysData", err)
			}
			if got := columnOf(t, db, "payment_anomalies", "last_seen_at"); got == "" {
				t.Fatal("last_seen_at was dropped by a refused down")
			}
			if err := migrations.DownTo(ctx, db, 48, migrations.Options{Force: true}); err != nil {
				t.Fatalf("forced DownTo(48): %v", err)
			}
			if got := columnOf(t, db, "payment_anomalies", "last_seen_at"); got != "" {
				t.Fatalf("last_seen_at (%s) is still there after a forced down", got)
			}
			if err := migrations.Up(ctx, db); err != nil {
				t.Fatalf("up again: %v", err)
			}
		})
	}
}
