package migrations

import (
	"slices"
	"strings"
	"testing"
)

func TestClausesOf(t *testing.T) {
	for _, c := range []struct {
		stmt string
		want []string
	}{
		{"CREATE TABLE t (a INT, b INT)", []string{"CREATE TABLE t (a INT, b INT)"}},
		{"ALTER TABLE t ADD COLUMN a INT", []string{"ALTER TABLE t ADD COLUMN a INT"}},
		{"ALTER TABLE t ADD KEY k (a), ALGORITHM = INPLACE, LOCK = NONE", []string{"ALTER TABLE t ADD KEY k (a), ALGORITHM = INPLACE, LOCK = NONE"}},
		{
			"ALTER TABLE payments\n    MODIFY updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),\n    ADD KEY idx (updated_at, id), ALGORITHM = INPLACE, LOCK = NONE",
			[]string{
				"ALTER TABLE payments MODIFY updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), ALGORITHM = INPLACE, LOCK = NONE",
				"ALTER TABLE payments ADD KEY idx (updated_at, id), ALGORITHM = INPLACE, LOCK = NONE",
			},
		},
		{
			"ALTER TABLE t ADD COLUMN a VARCHAR(8) NOT NULL DEFAULT 'x,y', ADD COLUMN b INT AFTER a",
			[]string{"ALTER TABLE t ADD COLUMN a VARCHAR(8) NOT NULL DEFAULT 'x,y'", "ALTER TABLE t ADD COLUMN b INT AFTER a"},
		},
	} {
		if got := clausesOf(c.stmt); !slices.Equal(got, c.want) {
			t.Errorf("clausesOf(%q)\n got %q\nwant %q", c.stmt, got, c.want)
		}
	}
}

// Every multi-clause ALTER of the files splits into clauses that each name one change, so
// the TiDB pass of the test command applies exactly what MySQL applies at once.
func TestEveryMultiClauseAlterSplits(t *testing.T) {
	fs, err := files()
	if err != nil {
		t.Fatal(err)
	}
	var split int
	for _, f := range fs {
		for _, s := range append(append([]string{}, f.up...), f.down...) {
			parts := clausesOf(s)
			if len(parts) == 1 {
				continue
			}
			split++
			for _, p := range parts {
				if n := len(splitTopLevel(strings.TrimPrefix(p, "ALTER TABLE "))); n > 1+strings.Count(strings.ToUpper(p), "ALGORITHM")+strings.Count(strings.ToUpper(p), ", LOCK") {
					t.Errorf("%s: %q still holds several changes", f.name, p)
				}
			}
		}
	}
	if split < 8 {
		t.Fatalf("%d multi-clause ALTERs split; the files hold at least 8", split)
	}
}
