package migrations

import (
	"database/sql"
	"strings"
	"testing"
)

func TestNormalType(t *testing.T) {
	for in, want := range map[string]string{
		"BIGINT":              "bigint",
		"bigint(20)":          "bigint",
		"INT(11) unsigned":    "int unsigned",
		"INTEGER":             "int",
		"TINYINT(1)":          "tinyint",
		"BOOLEAN":             "tinyint",
		"VARCHAR(64)":         "varchar(64)",
		"varchar(64)":         "varchar(64)",
		"DECIMAL(10, 2)":      "decimal(10,2)",
		"DATETIME(6)":         "datetime(6)",
		"MEDIUMTEXT":          "mediumtext",
		"CHAR(64)":            "char(64)",
		"bigint(20) zerofill": "bigint zerofill",
	} {
		if got := normalType(in); got != want {
			t.Errorf("normalType(%q) = %q, want %q", in, got, want)
		}
	}
	if normalType("VARCHAR(8)") == normalType("VARCHAR(16)") || normalType("INT") == normalType("BIGINT") {
		t.Error("different types compare equal")
	}
}

func TestParseColumn(t *testing.T) {
	for _, c := range []struct {
		def, name, want string
	}{
		{"method VARCHAR(8) NOT NULL DEFAULT 'page' AFTER subject", "method", "VARCHAR(8) NOT NULL DEFAULT 'page'"},
		{"dead TINYINT(1) NOT NULL DEFAULT 0 AFTER next_attempt_at", "dead", "TINYINT(1) NOT NULL DEFAULT 0"},
		{"flag BOOLEAN NOT NULL DEFAULT TRUE", "flag", "BOOLEAN NOT NULL DEFAULT 1"},
		{"note VARCHAR(8) NOT NULL DEFAULT 'it''s' COMMENT 'DEFAULT 1'", "note", "VARCHAR(8) NOT NULL DEFAULT 'it''s'"},
		{"id BIGINT NOT NULL AUTO_INCREMENT", "id", "BIGINT NOT NULL AUTO_INCREMENT"},
		{"updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6)", "updated_at",
			"DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6)"},
		{"at DATETIME NULL DEFAULT NOW()", "at", "DATETIME NULL DEFAULT CURRENT_TIMESTAMP"},
		{"k VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL", "k", "VARCHAR(8) NOT NULL COLLATE utf8mb4_general_ci"},
		{"feed_seq BIGINT NULL", "feed_seq", "BIGINT NULL"},
		{"pay_link TEXT NULL", "pay_link", "TEXT NULL"},
		{"`x` INT UNSIGNED NOT NULL", "x", "INT UNSIGNED NOT NULL"},
		{"changed_at DATETIME(6) NULL DEFAULT NULL ON UPDATE CURRENT_TIMESTAMP(6) AFTER delivered_at", "changed_at", "DATETIME(6) NULL ON UPDATE CURRENT_TIMESTAMP(6)"},
		{"active_order_id VARCHAR(64) AS (IF(status = 0, order_id, NULL)) STORED", "active_order_id", "VARCHAR(64) NULL STORED GENERATED"},
		{"v INT GENERATED ALWAYS AS (a + 1) VIRTUAL", "v", "INT NULL VIRTUAL GENERATED"},
		{"v VARCHAR(8) AS (CONCAT('stored', a))", "v", "VARCHAR(8) NULL VIRTUAL GENERATED"},
	} {
		name, col, err := parseColumn(c.def)
		if err != nil || name != c.name || col.String() != c.want {
			t.Errorf("parseColumn(%q) = %q, %q, %v; want %q, %q", c.def, name, col, err, c.name, c.want)
		}
	}
}

// A DEFAULT or ON UPDATE the runner cannot compare makes the column unreadable, so a
// pre-built one is never taken unchecked.
func TestParseColumnRefusesWhatItCannotCompare(t *testing.T) {
	for _, def := range []string{"a INT DEFAULT (1 + 1)", "a BIT(1) DEFAULT b'1'", "a DATETIME ON UPDATE SYSDATE()", "a INT DEFAULT"} {
		if name, col, err := parseColumn(def); err == nil {
			t.Errorf("parseColumn(%q) = %q, %q; want an error", def, name, col)
		}
	}
}

// The servers report a column's DEFAULT and ON UPDATE each in its own way; each is read
// as the migration writes it, and compared so.
func TestServerDefault(t *testing.T) {
	for _, c := range []struct {
		name          string
		dflt          sql.NullString
		extra         string
		want          string // the column TINYINT NOT NULL as read
		sameAsWritten string // the column as a migration writes it; "": the same as want
	}{
		{"none", sql.NullString{}, "", "TINYINT NOT NULL", ""},
		{"mariadb_null", sql.NullString{String: "NULL", Valid: true}, "", "TINYINT NOT NULL", "a TINYINT NOT NULL DEFAULT NULL"},
		{"number", sql.NullString{String: "0", Valid: true}, "", "TINYINT NOT NULL DEFAULT 0", "a TINYINT NOT NULL DEFAULT '0'"},
		{"decimal", sql.NullString{String: "0.00", Valid: true}, "", "TINYINT NOT NULL DEFAULT 0.00", "a TINYINT NOT NULL DEFAULT 0"},
		{"mysql_string", sql.NullString{String: "page", Valid: true}, "", "TINYINT NOT NULL DEFAULT 'page'", ""},
		{"mariadb_string", sql.NullString{String: "'it''s'", Valid: true}, "", "TINYINT NOT NULL DEFAULT 'it''s'", ""},
		{"mysql_empty_string", sql.NullString{String: "", Valid: true}, "", "TINYINT NOT NULL DEFAULT ''", ""},
		{"mariadb_empty_string", sql.NullString{String: "''", Valid: true}, "", "TINYINT NOT NULL DEFAULT ''", ""},
		{"mysql_now", sql.NullString{String: "CURRENT_TIMESTAMP(6)", Valid: true}, "DEFAULT_GENERATED on update CURRENT_TIMESTAMP(6)",
			"TINYINT NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6)", ""},
		{"mariadb_now", sql.NullString{String: "current_timestamp(6)", Valid: true}, "on update current_timestamp(6)",
			"TINYINT NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6)", ""},
		{"mariadb_now_no_precision", sql.NullString{String: "current_timestamp()", Valid: true}, "",
			"TINYINT NOT NULL DEFAULT CURRENT_TIMESTAMP", "a TINYINT NOT NULL DEFAULT CURRENT_TIMESTAMP"},
		{"auto_increment", sql.NullString{}, "auto_increment", "TINYINT NOT NULL AUTO_INCREMENT", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			have := colDef{typ: "tinyint", shown: "tinyint", notNull: true, dflt: serverDefault(c.dflt)}
			have.onUpdate, have.autoIncrement = serverExtra(c.extra)
			if have.String() != c.want {
				t.Fatalf("read as %q, want %q", have, c.want)
			}
			written := c.sameAsWritten
			if written == "" {
				written = "a " + c.want
			}
			_, want, err := parseColumn(written)
			if err != nil {
				t.Fatal(err)
			}
			if !want.same(have) {
				t.Fatalf("%q is not the same as %q", have, want)
			}
		})
	}
	_, zero, _ := parseColumn("a TINYINT NOT NULL DEFAULT 0")
	for _, other := range []string{"a TINYINT NOT NULL DEFAULT 1", "a TINYINT NOT NULL", "a TINYINT NOT NULL DEFAULT '0x'"} {
		_, o, err := parseColumn(other)
		if err != nil {
			t.Fatal(err)
		}
		if zero.same(o) {
			t.Errorf("%q is the same as %q", zero, o)
		}
	}
}

// The options of a CREATE TABLE: the engine and collation are compared; others are not.
func TestParseTableOptions(t *testing.T) {
	for text, want := range map[string]tableOptions{
		" ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin": {"innodb", "utf8mb4", "utf8mb4_bin"},
		"ENGINE=InnoDB CHARACTER SET utf8mb4 ROW_FORMAT=DYNAMIC":           {"innodb", "utf8mb4", ""},
		"": {},
	} {
		got, err := parseTableOptions(text)
		if err != nil || got != want {
			t.Errorf("parseTableOptions(%q) = %+v, %v; want %+v", text, got, err, want)
		}
	}
	if _, err := parseTableOptions("ENGINE ="); err == nil {
		t.Error("parseTableOptions(\"ENGINE =\") read it; want an error")
	}
	want := tableOptions{engine: "innodb", collation: "utf8mb4_bin"}
	for have, ok := range map[tableOptions]bool{
		{engine: "innodb", collation: "utf8mb4_bin"}:        true,
		{engine: "myisam", collation: "utf8mb4_bin"}:        false,
		{engine: "innodb", collation: "utf8mb4_general_ci"}: false,
	} {
		if err := want.check(have); (err == nil) != ok {
			t.Errorf("check(%+v) = %v, want ok %v", have, err, ok)
		}
	}
}

func TestParseKey(t *testing.T) {
	for _, c := range []struct{ def, want string }{
		{"PRIMARY KEY (id)", "PRIMARY KEY (id)"},
		{"UNIQUE KEY uk_benefit_grants_payment (tenant_id, payment_no)", "UNIQUE KEY uk_benefit_grants_payment (tenant_id, payment_no)"},
		{"KEY idx_tenants_alipay_app (alipay_app_id, alipay_credentials(8))", "KEY idx_tenants_alipay_app (alipay_app_id, alipay_credentials(8))"},
		{"INDEX `k` (`a` DESC, b)", "KEY k (a, b)"},
		{"UNIQUE INDEX u USING BTREE (a)", "UNIQUE KEY u (a)"},
		{"UNIQUE (a, b)", "UNIQUE KEY a (a, b)"},
		{"FULLTEXT KEY f (body)", "FULLTEXT KEY f (body)"},
	} {
		k, err := parseKey(c.def)
		if err != nil || k.named() != c.want {
			t.Errorf("parseKey(%q) = %q, %v; want %q", c.def, k.named(), err, c.want)
		}
	}
	for _, def := range []string{"KEY k ((a + 1))", "KEY k", "KEY k ()", "PRIMARY KEY p (a)", "KEY k x (a)"} {
		if k, err := parseKey(def); err == nil {
			t.Errorf("parseKey(%q) = %q; want an error", def, k.named())
		}
	}
	a, _ := parseKey("UNIQUE KEY k (a, b)")
	for def, same := range map[string]bool{
		"UNIQUE KEY k (a, b)":    true,
		"UNIQUE KEY k (A, B)":    true,
		"KEY k (a, b)":           false,
		"UNIQUE KEY k (b, a)":    false,
		"UNIQUE KEY k (a)":       false,
		"UNIQUE KEY k (a(4), b)": false,
		"PRIMARY KEY (a, b)":     false,
	} {
		b, err := parseKey(def)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.same(b); got != same {
			t.Errorf("%s same as %s = %v, want %v", a, b, got, same)
		}
	}
}

func TestParseClause(t *testing.T) {
	for _, c := range []struct {
		text string
		kind clauseKind
		name string
	}{
		{"ADD COLUMN a INT NOT NULL", addColumn, "a"},
		{"ADD a INT", addColumn, "a"},
		{"ADD UNIQUE KEY k (a)", addKey, "k"},
		{"ADD KEY k (a)", addKey, "k"},
		{"ADD INDEX k (a)", addKey, "k"},
		{"ADD PRIMARY KEY (a)", addKey, "PRIMARY"},
		{"DROP KEY k", dropKey, "k"},
		{"DROP INDEX `k`", dropKey, "k"},
		{"DROP PRIMARY KEY", dropKey, "PRIMARY"},
		{"DROP COLUMN c", dropColumn, "c"},
		{"DROP c", dropColumn, "c"},
		{"DROP FOREIGN KEY fk", otherClause, ""},
		{"DROP COLUMN IF EXISTS c", otherClause, ""},
		{"MODIFY updated_at DATETIME(6) NOT NULL", otherClause, ""},
	} {
		got, err := parseClause(c.text)
		if err != nil || got.kind != c.kind || got.name != c.name {
			t.Errorf("parseClause(%q) = kind %d %q, %v; want kind %d %q", c.text, got.kind, got.name, err, c.kind, c.name)
		}
	}
	for _, text := range []string{"ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES b (a)", "ADD COLUMN (a INT, b INT)", "ADD COLUMN IF NOT EXISTS a INT", "ADD KEY k ((a + 1))"} {
		if _, err := parseClause(text); err == nil {
			t.Errorf("parseClause(%q) read it; want an error: it cannot be checked", text)
		}
	}
}

// TestEveryAddIsVerifiable: the runner reads the definition of every table, column and
// key the files create, so that any of them found applied on a re-run can be verified
// rather than stop the runner.
func TestEveryAddIsVerifiable(t *testing.T) {
	fs, err := files()
	if err != nil {
		t.Fatal(err)
	}
	var tables, adds int
	for _, f := range fs {
		for _, s := range append(append([]string{}, f.up...), f.down...) {
			upper := strings.ToUpper(strings.TrimSpace(s))
			switch {
			case strings.HasPrefix(upper, "CREATE TABLE"):
				c, err := parseCreate(s)
				if err != nil || c.table == "" || len(c.cols) == 0 || len(c.keys) == 0 || c.opts.engine == "" || c.opts.collation == "" {
					t.Errorf("%s: CREATE TABLE %q: %d columns, %d keys, options %+v, %v", f.name, c.table, len(c.cols), len(c.keys), c.opts, err)
				}
				tables++
			case strings.HasPrefix(upper, "ALTER TABLE"):
				a, ok := parseAlter(s)
				if !ok {
					t.Errorf("%s: %q is not read as an ALTER TABLE", f.name, s)
					continue
				}
				for _, text := range a.clauses {
					c, err := parseClause(text)
					if err != nil {
						t.Errorf("%s: %v", f.name, err)
					}
					if strings.HasPrefix(strings.ToUpper(text), "ADD") && c.kind != addColumn && c.kind != addKey {
						t.Errorf("%s: %q is not read as an ADD", f.name, text)
					}
					if c.kind == addColumn || c.kind == addKey {
						adds++
					}
				}
			}
		}
	}
	if tables < 15 || adds < 30 {
		t.Fatalf("%d CREATE TABLEs and %d ADD clauses read; the files hold more", tables, adds)
	}
}
