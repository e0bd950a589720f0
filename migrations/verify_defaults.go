package migrations

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// What a column or table does by itself, compared as the runner verifies a pre-built one:
// a column's DEFAULT, ON UPDATE, AUTO_INCREMENT and collation, a table's ENGINE and
// collation. A pre-built payment_events.dead with DEFAULT 1 has the migration's type and
// nullability, and makes every event the outbox writes dead on insert; a table with
// another collation compares order "A1" equal to order "a1".

// colDefault is a column's DEFAULT as the runner compares it. The servers report it
// differently in information_schema.COLUMNS.COLUMN_DEFAULT: MySQL and TiDB a literal
// unquoted and no default as NULL, MariaDB a string literal quoted and DEFAULT NULL as
// the word NULL, MySQL a function upper case and MariaDB lower case with its parentheses.
type colDefault struct {
	set bool // false: none, or NULL
	// expr is true for a function (CURRENT_TIMESTAMP(6)); val is then the function in
	// lower case without empty parentheses ("current_timestamp(6)", "current_timestamp").
	expr bool
	val  string // the literal's value, or the function
}

// String writes d as a migration would: a number as it is, another literal quoted.
func (d colDefault) String() string {
	switch {
	case !d.set:
		return "NULL"
	case d.expr:
		return strings.ToUpper(d.val)
	case isNumber(d.val):
		return d.val
	}
	return "'" + strings.ReplaceAll(d.val, "'", "''") + "'"
}

// same reports whether d and o are the same DEFAULT: numbers are compared by value, as
// the server may report DEFAULT 0 of a DECIMAL(10,2) as 0.00.
func (d colDefault) same(o colDefault) bool {
	if d.set != o.set || d.expr != o.expr {
		return false
	}
	if d.val == o.val {
		return true
	}
	a, aerr := strconv.ParseFloat(d.val, 64)
	b, berr := strconv.ParseFloat(o.val, 64)
	return !d.expr && aerr == nil && berr == nil && a == b
}

var (
	numberRE = regexp.MustCompile(`^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$`)
	// nowRE is a function that stamps the current time, as a DEFAULT or ON UPDATE.
	nowRE = regexp.MustCompile(`(?i)^(current_timestamp|now|localtimestamp|localtime)(\(\s*([0-9]*)\s*\))?$`)
)

func isNumber(s string) bool { return numberRE.MatchString(s) }

// nowFunc returns the function s ("CURRENT_TIMESTAMP(6)", "now()", "current_timestamp()")
// as colDefault writes it ("current_timestamp(6)", "current_timestamp"), and whether s is
// one.
func nowFunc(s string) (string, bool) {
	m := nowRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return "", false
	}
	if m[3] == "" || m[3] == "0" {
		return "current_timestamp", true
	}
	return "current_timestamp(" + m[3] + ")", true
}

// unquoteLiteral returns the value of a quoted SQL string (in single or double quotes, a
// quote within it doubled), and whether s is one.
func unquoteLiteral(s string) (string, bool) {
	if len(s) < 2 || (s[0] != '\'' && s[0] != '"') || s[len(s)-1] != s[0] {
		return "", false
	}
	q := string(s[0])
	return strings.ReplaceAll(s[1:len(s)-1], q+q, q), true
}

// parseDefault reads the value of a migration's DEFAULT clause.
func parseDefault(tok string) (colDefault, error) {
	if v, ok := unquoteLiteral(tok); ok {
		return colDefault{set: true, val: v}, nil
	}
	if f, ok := nowFunc(tok); ok {
		return colDefault{set: true, expr: true, val: f}, nil
	}
	switch strings.ToUpper(tok) {
	case "NULL":
		return colDefault{}, nil
	case "TRUE":
		return colDefault{set: true, val: "1"}, nil
	case "FALSE":
		return colDefault{set: true, val: "0"}, nil
	}
	if isNumber(tok) {
		return colDefault{set: true, val: tok}, nil
	}
	return colDefault{}, fmt.Errorf("cannot compare DEFAULT %s", tok)
}

// serverDefault reads information_schema.COLUMNS.COLUMN_DEFAULT, as any of the servers
// reports it (colDefault).
func serverDefault(v sql.NullString) colDefault {
	switch {
	case !v.Valid, strings.EqualFold(v.String, "NULL"):
		return colDefault{}
	}
	if s, ok := unquoteLiteral(v.String); ok {
		return colDefault{set: true, val: s}
	}
	if f, ok := nowFunc(v.String); ok {
		return colDefault{set: true, expr: true, val: f}
	}
	return colDefault{set: true, val: v.String}
}

// serverExtra reads the ON UPDATE function ("on update current_timestamp(6)" on MariaDB,
// "DEFAULT_GENERATED on update CURRENT_TIMESTAMP(6)" on MySQL) and AUTO_INCREMENT of
// information_schema.COLUMNS.EXTRA.
func serverExtra(extra string) (onUpdate string, autoIncrement bool) {
	lower := strings.ToLower(extra)
	if i := strings.Index(lower, "on update "); i >= 0 {
		f, _ := firstWord(lower[i+len("on update "):])
		onUpdate = f
		if canonical, ok := nowFunc(f); ok {
			onUpdate = canonical
		}
	}
	return onUpdate, strings.Contains(lower, "auto_increment")
}

// readAttributes reads what follows the type in a column definition (after) into c: its
// DEFAULT, ON UPDATE, AUTO_INCREMENT, CHARACTER SET and COLLATE. Words within parentheses
// or quotes (a generated column's expression, a COMMENT) are not read as clauses.
func (c *colDef) readAttributes(after string) error {
	var words []string
	for rest := strings.TrimSpace(after); rest != ""; {
		var w string
		w, rest = firstWord(rest)
		words = append(words, w)
	}
	next := func(i int) string {
		if i+1 < len(words) {
			return words[i+1]
		}
		return ""
	}
	for i := 0; i < len(words); i++ {
		switch up := strings.ToUpper(words[i]); {
		case up == "DEFAULT":
			d, err := parseDefault(next(i))
			if err != nil {
				return err
			}
			c.dflt = d
			i++
		case up == "ON" && strings.EqualFold(next(i), "UPDATE"):
			f, ok := nowFunc(next(i + 1))
			if !ok {
				return fmt.Errorf("cannot compare ON UPDATE %s", next(i+1))
			}
			c.onUpdate = f
			i += 2
		case up == "AUTO_INCREMENT":
			c.autoIncrement = true
		case up == "COLLATE":
			c.collation = strings.ToLower(unquote(next(i)))
			i++
		case up == "CHARSET", up == "CHARACTER" && strings.EqualFold(next(i), "SET"):
			if up == "CHARACTER" {
				i++
			}
			c.charset = strings.ToLower(unquote(next(i)))
			i++
		}
	}
	return nil
}

// characterType reports whether typ (normalType's) is a type with a collation.
func characterType(typ string) bool {
	base, _, _ := strings.Cut(typ, "(")
	base, _, _ = strings.Cut(base, " ")
	switch base {
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set":
		return true
	}
	return false
}

// tableOptions are the options of a table the runner compares: its engine and default
// character set and collation, in lower case; "" is not given (a migration's) or not
// reported (the server's).
type tableOptions struct {
	engine, charset, collation string
}

// parseTableOptions reads the options of a CREATE TABLE, after its definitions:
// "ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin".
func parseTableOptions(text string) (tableOptions, error) {
	var o tableOptions
	var words []string
	for _, w := range strings.Fields(strings.ReplaceAll(text, "=", " = ")) {
		if w != "=" && !strings.EqualFold(w, "DEFAULT") {
			words = append(words, w)
		}
	}
	for i := 0; i < len(words); i++ {
		up := strings.ToUpper(words[i])
		if up == "CHARACTER" && i+1 < len(words) && strings.EqualFold(words[i+1], "SET") {
			up, i = "CHARSET", i+1
		}
		var into *string
		switch up {
		case "ENGINE":
			into = &o.engine
		case "CHARSET":
			into = &o.charset
		case "COLLATE":
			into = &o.collation
		default:
			// Another option (ROW_FORMAT, COMMENT, …) is not compared.
			continue
		}
		if i+1 >= len(words) {
			return o, fmt.Errorf("%s without a value in %q", up, text)
		}
		*into = strings.ToLower(unquote(strings.Trim(words[i+1], "'\"")))
		i++
	}
	return o, nil
}

// tableOptionsOf returns the engine and collation of table in the current database, none
// if information_schema does not show it (its columns are then missing too, which the
// callers report).
func tableOptionsOf(ctx context.Context, q queryer, table string) (tableOptions, error) {
	rows, err := q.QueryContext(ctx, `SELECT ENGINE, TABLE_COLLATION FROM information_schema.TABLES
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`, table)
	if err != nil {
		return tableOptions{}, err
	}
	defer rows.Close()
	var o tableOptions
	for rows.Next() {
		var engine, collation sql.NullString
		if err := rows.Scan(&engine, &collation); err != nil {
			return tableOptions{}, err
		}
		o = tableOptions{engine: strings.ToLower(engine.String), collation: strings.ToLower(collation.String)}
	}
	return o, rows.Err()
}

// check returns an error naming what of have, the table's options as the server reports
// them, is not what o, a migration's, gives it.
func (o tableOptions) check(have tableOptions) error {
	switch {
	case o.engine != "" && have.engine != "" && o.engine != have.engine:
		return fmt.Errorf("ENGINE %s but the migration creates it ENGINE %s", engineName(have.engine), engineName(o.engine))
	case o.collation != "" && o.collation != have.collation:
		return fmt.Errorf("COLLATE %s but the migration creates it COLLATE %s", have.collation, o.collation)
	case o.collation == "" && o.charset != "" && !strings.HasPrefix(have.collation, o.charset+"_"):
		return fmt.Errorf("COLLATE %s but the migration creates it CHARSET %s", have.collation, o.charset)
	}
	return nil
}

// engineName writes an engine as the servers name it: InnoDB, MyISAM.
func engineName(e string) string {
	switch e {
	case "innodb":
		return "InnoDB"
	case "myisam":
		return "MyISAM"
	}
	return e
}
