package migrations

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"
)

// TestEveryFileParses: every file splits into statements, the newer ones into exactly
// one Up statement, and an older file with several says why.
func TestEveryFileParses(t *testing.T) {
	fs, err := files()
	if err != nil {
		t.Fatal(err)
	}
	const lastSeveral = 18 // files after this one hold one DDL statement each
	for _, f := range fs {
		if len(f.down) == 0 {
			t.Errorf("%s: no Down statement", f.name)
		}
		for _, s := range append(append([]string{}, f.up...), f.down...) {
			if strings.Contains(s, ";") {
				t.Errorf("%s: statement holds a semicolon, which the splitter does not support: %q", f.name, s)
			}
		}
		if len(f.up) > 1 {
			raw, _ := FS.ReadFile(f.name)
			if f.version > lastSeveral {
				t.Errorf("%s: %d Up statements; a new migration is one DDL statement", f.name, len(f.up))
			} else if !strings.Contains(string(raw), "-- Several statements:") {
				t.Errorf("%s: %d Up statements and no \"-- Several statements:\" comment saying why", f.name, len(f.up))
			}
		}
	}
}

func TestParseFile(t *testing.T) {
	f, err := parseFile("0042_x.sql", `-- a comment; with a semicolon
-- +goose Up
CREATE TABLE a (
    id INT -- the id
);
ALTER TABLE b ADD COLUMN c INT;

-- +goose Down
-- +paykit down-guard: SELECT 1 FROM a LIMIT 1
DROP TABLE a;
`)
	if err != nil {
		t.Fatal(err)
	}
	if f.version != 42 || len(f.up) != 2 || len(f.down) != 1 || len(f.guards) != 1 ||
		f.up[1] != "ALTER TABLE b ADD COLUMN c INT" || f.guards[0] != "SELECT 1 FROM a LIMIT 1" {
		t.Fatalf("%+v", f)
	}
	for name, text := range map[string]string{
		"0001_a.sql": "CREATE TABLE a (id INT);",
		"0001_b.sql": "-- +goose Up\nCREATE TABLE a (id INT)",
		"0001_c.sql": "-- +goose Up\n-- +goose StatementBegin\nCREATE TABLE a (id INT);",
		"x_d.sql":    "-- +goose Up\nCREATE TABLE a (id INT);",
	} {
		if _, err := parseFile(name, text); err == nil {
			t.Errorf("%s parsed; want an error", name)
		}
	}
}

// A statement that timed out on its lock, or that TiDB refused because another DDL changed
// the schema under it (any database on the server: tests migrate theirs side by side), is
// run again; other errors are not.
func TestRetriedStatementErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&gomysql.MySQLError{Number: 1205}, true},
		{fmt.Errorf("x: %w", &gomysql.MySQLError{Number: 8028, Message: "Information schema is changed"}), true},
		{&gomysql.MySQLError{Number: 1064}, false},
		{errors.New("Error 8028"), false},
	} {
		if got := isLockWait(c.err); got != c.want {
			t.Errorf("isLockWait(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
