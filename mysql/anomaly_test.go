package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
)

// TestListAnomalies_SeenAgainIsListed: an anomaly recorded long ago and recorded again
// now (the problem came back, the statement of its day ran again) is listed by
// `paykit anomalies -since 1h`, first, as the newest seen. Before, the list filtered and
// ordered on created_at, which a record again does not move, and printed "no anomalies".
func TestListAnomalies_SeenAgainIsListed(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	now := time.Now().UTC()
	at := func(no string, created, seen time.Time) {
		t.Helper()
		if _, err := db.ExecContext(ctx, "UPDATE payment_anomalies SET created_at = ?, last_seen_at = ? WHERE payment_no = ?", created, seen, no); err != nil {
			t.Fatal(err)
		}
	}
	for _, no := range []string{"p-again", "p-recent", "p-old", "p-legacy"} {
		if err := st.RecordAnomaly(ctx, payment.Anomaly{Kind: "amount_mismatch", TenantID: "t1", PaymentNo: no, Amount: 100, Detail: no}); err != nil {
			t.Fatal(err)
		}
	}
	at("p-again", now.Add(-2*time.Hour), now.Add(-2*time.Hour))
	at("p-recent", now.Add(-30*time.Minute), now.Add(-30*time.Minute))
	at("p-old", now.Add(-3*time.Hour), now.Add(-3*time.Hour))
	// Recorded before migration 0049 and not since: no last_seen_at.
	if _, err := db.ExecContext(ctx, "UPDATE payment_anomalies SET created_at = ?, last_seen_at = NULL WHERE payment_no = 'p-legacy'", now.Add(-10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	// Seen again now.
	if err := st.RecordAnomaly(ctx, payment.Anomaly{Kind: "amount_mismatch", TenantID: "t1", PaymentNo: "p-again", Amount: 100, Detail: "again"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		since time.Time
		limit int
		want  string
	}{
		{"within_the_hour", now.Add(-time.Hour), 100, "[p-again p-legacy p-recent]"},
		{"limit_takes_the_newest_seen", now.Add(-time.Hour), 1, "[p-again]"},
		{"all", time.Time{}, 100, "[p-again p-legacy p-recent p-old]"},
		{"none_after_now", now.Add(time.Minute), 100, "[]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			list, err := st.ListAnomalies(ctx, c.since, c.limit)
			if err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, a := range list {
				got = append(got, a.PaymentNo)
			}
			if fmt.Sprint(got) != c.want {
				t.Fatalf("ListAnomalies(since %s, limit %d) = %v, want %s (newest seen first)", c.since.Format(time.RFC3339), c.limit, got, c.want)
			}
		})
	}
}

// The list reads the newest of a range of each of idx_payment_anomalies_created and
// idx_payment_anomalies_last_seen (migration 0052), never the whole table.
func TestListAnomalies_ReadsItsKeys(t *testing.T) {
	_, db := newStore(t)
	since := time.Now().Add(-time.Hour).UTC()
	var keys []string
	explainRows(t, db, mysql.QListAnomalies, []any{since, 100, since, 100, 100}, func(cols []string, vals []sql.NullString) {
		var table, key string
		for i, c := range cols {
			switch c {
			case "table":
				table, key = vals[i].String, keyOf(cols, vals)
			case "access object":
				table, key = tidbAccess(vals[i].String)
			}
		}
		if table == "payment_anomalies" && key != "" {
			keys = append(keys, key)
		}
	})
	slices.Sort(keys)
	if want := []string{"idx_payment_anomalies_created", "idx_payment_anomalies_last_seen"}; !slices.Equal(keys, want) {
		t.Fatalf("the list reads payment_anomalies by %v, want %v", keys, want)
	}
}

// keyOf is the key column of a MySQL or MariaDB EXPLAIN row.
func keyOf(cols []string, vals []sql.NullString) string {
	for i, c := range cols {
		if c == "key" {
			return vals[i].String
		}
	}
	return ""
}
