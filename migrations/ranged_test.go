package migrations_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/migrations"
)

// A statement batched by a key range runs once per range of the key, in order, each range
// its own statement with its exclusive low and inclusive high keys, over keys with gaps;
// run again after an interruption it changes nothing twice.
func TestBatchedByKeyRange(t *testing.T) {
	ctx := context.Background()
	db, _ := testenv.EmptyMySQL(t)
	for _, q := range []string{
		"CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, v BIGINT NULL)",
		"CREATE TABLE seen (n INT NOT NULL AUTO_INCREMENT PRIMARY KEY, lo BIGINT NOT NULL, hi BIGINT NOT NULL)",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var rows []string
	for i := 1; i <= 25; i++ {
		rows = append(rows, fmt.Sprintf("(%d, NULL)", i*3)) // 3, 6, ... 75
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES "+strings.Join(rows, ",")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "UPDATE t SET v = -1 WHERE id = 33"); err != nil { // done before
		t.Fatal(err)
	}
	update := "-- +paykit batched-by: t.id 10\n-- +goose Up\nUPDATE t SET v = id WHERE id > ? AND id <= ? AND v IS NULL;\n-- +goose Down\nSELECT 1;\n"
	record := "-- +paykit batched-by: t.id 10\n-- +goose Up\nINSERT INTO seen (lo, hi) VALUES (?, ?);\n-- +goose Down\nSELECT 1;\n"
	for _, text := range []string{update, update, record} {
		if err := migrations.RunFile(ctx, db, "0001_ranged.sql", text); err != nil {
			t.Fatal(err)
		}
	}
	var set, kept int
	if err := db.QueryRowContext(ctx, "SELECT COALESCE(SUM(v = id), 0), COALESCE(SUM(v = -1), 0) FROM t").Scan(&set, &kept); err != nil {
		t.Fatal(err)
	}
	if set != 24 || kept != 1 {
		t.Fatalf("%d rows set and %d left as they were; want 24 and the one done before", set, kept)
	}
	var got []string
	r, err := db.QueryContext(ctx, "SELECT lo, hi FROM seen ORDER BY n")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for r.Next() {
		var lo, hi int64
		if err := r.Scan(&lo, &hi); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("(%d,%d]", lo, hi))
	}
	if want := "[(-9223372036854775808,30] (30,60] (60,75]]"; fmt.Sprint(got) != want {
		t.Fatalf("ranges %v, want %s", got, want)
	}
	for name, text := range map[string]string{
		"one placeholder": "-- +paykit batched-by: t.id 10\n-- +goose Up\nUPDATE t SET v = id WHERE id > ?;\n-- +goose Down\nSELECT 1;\n",
		"no size":         "-- +paykit batched-by: t.id\n-- +goose Up\nUPDATE t SET v = id WHERE id > ? AND id <= ?;\n-- +goose Down\nSELECT 1;\n",
		"a bad name":      "-- +paykit batched-by: t;x.id 10\n-- +goose Up\nUPDATE t SET v = id WHERE id > ? AND id <= ?;\n-- +goose Down\nSELECT 1;\n",
	} {
		if err := migrations.RunFile(ctx, db, "0001_bad.sql", text); err == nil {
			t.Errorf("%s: ran; want a parse error", name)
		}
	}
}
