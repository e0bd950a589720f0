package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"
)

// A statement that fails because part of its effect is already there (a table, column or
// key of its name exists, or one it drops is gone) is skipped only as far as the runner
// verifies it: each table, column or key found is compared with the migration's definition
// of it, read from information_schema. One found as the migration defines it counts as
// applied; one found with another definition stops the runner with an error naming both
// (a DBA's plain key under the name of the unique key a migration adds is not that unique
// key); the clauses of an ALTER not found applied are run again without the applied ones.

// colDef is a column as the runner compares it: its data type (lower case, without the
// display width of an integer type, which changes nothing stored), nullability, whether
// it is generated, what the server writes into it by itself (its DEFAULT, ON UPDATE and
// AUTO_INCREMENT), and the collation of a character column.
type colDef struct {
	typ       string
	shown     string // the type as the migration writes it or the server reports it
	notNull   bool
	generated string // "", "stored" or "virtual"
	dflt      colDefault
	// onUpdate is the ON UPDATE expression as colDefault writes one
	// ("current_timestamp(6)"), "" if there is none.
	onUpdate      string
	autoIncrement bool
	// charset and collation are the character set and collation of a character column, in
	// lower case: as the server reports them, or as the migration gives them. A column the
	// migration gives none takes its table's (inTable); "" is not compared.
	charset, collation string
}

func (c colDef) String() string {
	s := strings.ToUpper(c.shown)
	if c.notNull {
		s += " NOT NULL"
	} else {
		s += " NULL"
	}
	if c.autoIncrement {
		s += " AUTO_INCREMENT"
	}
	if c.dflt.set {
		s += " DEFAULT " + c.dflt.String()
	}
	if c.onUpdate != "" {
		s += " ON UPDATE " + strings.ToUpper(c.onUpdate)
	}
	if c.collation != "" {
		s += " COLLATE " + c.collation
	}
	if c.generated != "" {
		s += " " + strings.ToUpper(c.generated) + " GENERATED"
	}
	return s
}

// sameShape reports whether the column c, as the migration defines it, and have, as the
// server reports it, store the same values and write the same ones by themselves; their
// collations are compared by sameCollation.
func (c colDef) sameShape(have colDef) bool {
	return c.typ == have.typ && c.notNull == have.notNull && c.generated == have.generated &&
		c.dflt.same(have.dflt) && c.onUpdate == have.onUpdate && c.autoIncrement == have.autoIncrement
}

// sameCollation reports whether have, as the server reports it, has the collation of c as
// the migration defines it (or its character set, if it names only that).
func (c colDef) sameCollation(have colDef) bool {
	switch {
	case c.collation != "":
		return strings.EqualFold(c.collation, have.collation)
	case c.charset != "":
		return strings.HasPrefix(strings.ToLower(have.collation), strings.ToLower(c.charset)+"_")
	}
	return true
}

// same reports whether have, as the server reports it, is the column c as the migration
// defines it.
func (c colDef) same(have colDef) bool { return c.sameShape(have) && c.sameCollation(have) }

// inTable is c, as the migration defines it, in a table whose collation is collation: a
// character column the migration gives no character set or collation takes the table's.
func (c colDef) inTable(collation string) colDef {
	if characterType(c.typ) && c.collation == "" && c.charset == "" {
		c.collation = strings.ToLower(collation)
	}
	return c
}

// keyPart is one column of a key, with its prefix length (0: the whole column).
type keyPart struct {
	col string
	sub int
}

// keyDef is a key as the runner compares it: primary, unique or plain (or FULLTEXT,
// SPATIAL), and its columns in order with their prefix lengths.
type keyDef struct {
	name    string
	primary bool
	unique  bool
	kind    string // "", "FULLTEXT" or "SPATIAL"
	parts   []keyPart
}

// String is the key without its name: "UNIQUE KEY (a, b(8))".
func (k keyDef) String() string {
	var cols []string
	for _, p := range k.parts {
		c := p.col
		if c == "" {
			c = "(expression)"
		}
		if p.sub > 0 {
			c += "(" + strconv.Itoa(p.sub) + ")"
		}
		cols = append(cols, c)
	}
	return k.prefix() + " (" + strings.Join(cols, ", ") + ")"
}

// named is the key with its name: "UNIQUE KEY k (a)", "PRIMARY KEY (a)".
func (k keyDef) named() string {
	if k.primary {
		return k.String()
	}
	return strings.Replace(k.String(), " (", " "+k.name+" (", 1)
}

func (k keyDef) prefix() string {
	switch {
	case k.primary:
		return "PRIMARY KEY"
	case k.kind != "":
		return k.kind + " KEY"
	case k.unique:
		return "UNIQUE KEY"
	}
	return "KEY"
}

func (k keyDef) same(o keyDef) bool {
	if k.primary != o.primary || k.unique != o.unique || k.kind != o.kind || len(k.parts) != len(o.parts) {
		return false
	}
	for i, p := range k.parts {
		if !strings.EqualFold(p.col, o.parts[i].col) || p.sub != o.parts[i].sub {
			return false
		}
	}
	return true
}

// intTypes are the integer types, whose display width ("int(11)") is dropped.
var intTypes = map[string]bool{"tinyint": true, "smallint": true, "mediumint": true, "int": true, "bigint": true}

// typeAliases are spellings the server reports under another name.
var typeAliases = map[string]string{
	"integer": "int", "bool": "tinyint", "boolean": "tinyint", "dec": "decimal", "numeric": "decimal", "fixed": "decimal",
	"int1": "tinyint", "int2": "smallint", "int3": "mediumint", "int4": "int", "int8": "bigint", "middleint": "mediumint",
}

// normalType returns a data type ("BIGINT", "int(11) unsigned", "VARCHAR(64)",
// "decimal(10, 2)") in the form the runner compares: "bigint", "int unsigned",
// "varchar(64)", "decimal(10,2)".
func normalType(t string) string {
	t = strings.ToLower(strings.TrimSpace(t))
	base, args, rest := t, "", ""
	if i := strings.IndexByte(t, '('); i >= 0 {
		base = strings.TrimSpace(t[:i])
		if j := strings.IndexByte(t[i:], ')'); j >= 0 {
			args, rest = t[i:i+j+1], t[i+j+1:]
		}
	} else if i := strings.IndexByte(t, ' '); i >= 0 {
		base, rest = t[:i], t[i:]
	}
	if a, ok := typeAliases[base]; ok {
		if base == "bool" || base == "boolean" {
			args = ""
		}
		base = a
	}
	if intTypes[base] {
		args = ""
	}
	args = strings.Join(strings.Fields(args), "")
	return strings.Join(append([]string{base + args}, strings.Fields(rest)...), " ")
}

var (
	typeRE      = regexp.MustCompile(`(?i)^([a-z0-9_]+)(\s*\([^)]*\))?((\s+(unsigned|signed|zerofill))*)`)
	generatedRE = regexp.MustCompile(`(?i)(^|\s)(generated\s+always\s+)?as\s*\(`)
	storedRE    = regexp.MustCompile(`(?i)\b(stored|persistent)\b`)
	notNullRE   = regexp.MustCompile(`(?i)\bnot\s+null\b`)
)

// parseColumn reads a column definition as a CREATE TABLE or ADD COLUMN writes it:
// "name TYPE[(args)] [UNSIGNED] [NOT NULL] [DEFAULT v] [ON UPDATE f] [COLLATE c]
// [AS (expr) STORED] …", without the ADD. A DEFAULT it cannot compare (an expression) is
// an error.
func parseColumn(def string) (string, colDef, error) {
	name, rest := firstWord(def)
	m := typeRE.FindStringSubmatch(rest)
	if name == "" || m == nil {
		return "", colDef{}, fmt.Errorf("cannot read the column definition %q", def)
	}
	shown := strings.TrimSpace(m[0])
	after := rest[len(m[0]):]
	c := colDef{typ: normalType(shown), shown: strings.Join(strings.Fields(shown), " "), notNull: notNullRE.MatchString(after)}
	if generatedRE.MatchString(after) {
		c.generated = "virtual"
		// The word after the expression; the expression's own words do not count.
		if i := strings.LastIndexByte(after, ')'); i >= 0 && storedRE.MatchString(after[i:]) {
			c.generated = "stored"
		}
	}
	if err := c.readAttributes(after); err != nil {
		return "", colDef{}, fmt.Errorf("cannot read the column definition %q: %w", def, err)
	}
	return unquote(name), c, nil
}

var keyWords = map[string]bool{"PRIMARY": true, "UNIQUE": true, "KEY": true, "INDEX": true, "FULLTEXT": true, "SPATIAL": true}

// parseKey reads a key definition as a CREATE TABLE or ADD writes it, without the ADD:
// "PRIMARY KEY (a)", "UNIQUE KEY name (a, b)", "KEY name (a, b(8))", "INDEX name (a)". A
// key without a name is named after its first column, as the server names it.
func parseKey(def string) (keyDef, error) {
	rest := strings.TrimSpace(def)
	open := strings.IndexByte(rest, '(')
	if open < 0 {
		return keyDef{}, fmt.Errorf("cannot read the key definition %q", def)
	}
	k, ok := keyHead(strings.Fields(rest[:open]))
	if !ok {
		return k, fmt.Errorf("cannot read the key definition %q", def)
	}
	closing := matchingParen(rest, open)
	if closing < 0 {
		return k, fmt.Errorf("cannot read the key definition %q", def)
	}
	for _, p := range splitTopLevel(rest[open+1 : closing]) {
		part, err := parseKeyPart(p, def)
		if err != nil {
			return k, err
		}
		k.parts = append(k.parts, part)
	}
	if len(k.parts) == 0 {
		return k, fmt.Errorf("cannot read the key definition %q", def)
	}
	if k.name == "" {
		k.name = k.parts[0].col
	}
	return k, nil
}

// keyHead reads the words of a key definition before its columns: what kind of key it is
// and its name, if it has one. It reports false when a primary key is given a name, or
// when more than a name stands before USING.
func keyHead(words []string) (keyDef, bool) {
	var k keyDef
	for len(words) > 0 && keyWords[strings.ToUpper(words[0])] {
		switch strings.ToUpper(words[0]) {
		case "PRIMARY":
			k.primary, k.unique, k.name = true, true, "PRIMARY"
		case "UNIQUE":
			k.unique = true
		case "FULLTEXT", "SPATIAL":
			k.kind = strings.ToUpper(words[0])
		}
		words = words[1:]
	}
	if len(words) > 0 && !strings.EqualFold(words[0], "USING") {
		if k.primary || len(words) > 1 && !strings.EqualFold(words[1], "USING") {
			return k, false
		}
		k.name = unquote(words[0])
	}
	return k, true
}

// parseKeyPart reads p, one column of the key definition def: "a", "a(8)", "a DESC". An
// expression is an error: the runner compares keys by their columns.
func parseKeyPart(p, def string) (keyPart, error) {
	col, _ := firstWord(p)
	part := keyPart{col: unquote(col)}
	if i := strings.IndexByte(col, '('); i >= 0 {
		n, err := strconv.Atoi(strings.TrimSuffix(col[i+1:], ")"))
		if err != nil || i == 0 {
			return part, fmt.Errorf("cannot read the key part %q of %q", p, def)
		}
		part = keyPart{col: unquote(col[:i]), sub: n}
	}
	if part.col == "" || strings.HasPrefix(part.col, "(") {
		return part, fmt.Errorf("cannot read the key part %q of %q", p, def)
	}
	return part, nil
}

// firstWord splits s at its first space outside parentheses and quotes: "a(8) DESC" is
// "a(8)" and "DESC".
func firstWord(s string) (string, string) {
	s = strings.TrimSpace(s)
	depth, quote := 0, rune(0)
	for i, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '`' || r == '\'' || r == '"':
			quote = r
		case r == '(':
			depth++
		case r == ')':
			depth--
		case depth == 0 && (r == ' ' || r == '\t' || r == '\n'):
			return s[:i], strings.TrimSpace(s[i:])
		}
	}
	return s, ""
}

// matchingParen returns the index of the parenthesis closing the one at open, or -1.
func matchingParen(s string, open int) int {
	depth, quote := 0, byte(0)
	for i := open; i < len(s); i++ {
		switch c := s[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '`' || c == '\'' || c == '"':
			quote = c
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

func unquote(name string) string { return strings.Trim(name, "`") }

// clauseKind is what one clause of an ALTER TABLE does, as far as the runner verifies it.
type clauseKind int

const (
	otherClause clauseKind = iota // run again as it is (MODIFY, …)
	addColumn
	addKey
	dropColumn
	dropKey
)

type clause struct {
	text string
	kind clauseKind
	name string
	col  colDef
	key  keyDef
}

// parseClause reads one clause of an ALTER TABLE. An ADD the runner cannot read is an
// error: it is not skipped unverified.
func parseClause(text string) (clause, error) {
	w := strings.Fields(strings.ToUpper(text))
	switch {
	case len(w) < 2:
	case w[0] == "ADD":
		return parseAdd(text, w)
	case w[0] == "DROP":
		return parseDrop(text, w), nil
	}
	return clause{text: text}, nil
}

// parseAdd reads an ADD clause (text, w its words in upper case) as the key or column it
// adds. One that adds anything else (a constraint, a partition, a column IF NOT EXISTS) is
// an error: the runner cannot check it.
func parseAdd(text string, w []string) (clause, error) {
	c := clause{text: text}
	rest := strings.TrimSpace(text[len("ADD"):])
	switch {
	case keyWords[w[1]]:
		k, err := parseKey(rest)
		if err != nil {
			return c, err
		}
		c.kind, c.name, c.key = addKey, k.name, k
	case w[1] == "CONSTRAINT", w[1] == "FOREIGN", w[1] == "CHECK", w[1] == "PARTITION", w[1] == "PERIOD", w[1] == "SYSTEM",
		w[1] == "IF", len(w) > 2 && w[1] == "COLUMN" && (w[2] == "IF" || strings.HasPrefix(w[2], "(")):
		return c, fmt.Errorf("cannot check the clause %q", text)
	default:
		if w[1] == "COLUMN" {
			rest = strings.TrimSpace(rest[len("COLUMN"):])
		}
		name, col, err := parseColumn(rest)
		if err != nil {
			return c, err
		}
		c.kind, c.name, c.col = addColumn, name, col
	}
	return c, nil
}

// parseDrop reads a DROP clause (text, w its words in upper case) as the key or column it
// drops. One that drops anything else, or IF EXISTS, is run again as it is
// (otherClause).
func parseDrop(text string, w []string) clause {
	c := clause{text: text}
	f := strings.Fields(text)
	switch {
	case (w[1] == "KEY" || w[1] == "INDEX") && len(w) > 2 && w[2] != "IF":
		c.kind, c.name = dropKey, unquote(f[2])
	case w[1] == "PRIMARY":
		c.kind, c.name = dropKey, "PRIMARY"
	case w[1] == "COLUMN" && len(w) > 2 && w[2] != "IF":
		c.kind, c.name = dropColumn, unquote(f[2])
	case w[1] == "FOREIGN", w[1] == "CONSTRAINT", w[1] == "CHECK", w[1] == "PARTITION", w[1] == "IF", w[1] == "COLUMN",
		w[1] == "KEY", w[1] == "INDEX", w[1] == "SYSTEM", w[1] == "PERIOD":
	default:
		c.kind, c.name = dropColumn, unquote(f[1])
	}
	return c
}

// queryer is what the definitions are read through: the migration's connection.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// columnsOf returns the columns of table in the current database, by lower-case name.
// Every value is scanned as a string: servers differ in the types of information_schema's
// columns.
func columnsOf(ctx context.Context, q queryer, table string) (map[string]colDef, error) {
	rows, err := q.QueryContext(ctx, `SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, EXTRA, COLUMN_DEFAULT, CHARACTER_SET_NAME, COLLATION_NAME
		FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]colDef{}
	for rows.Next() {
		var name, typ, nullable, extra, dflt, charset, collation sql.NullString
		if err := rows.Scan(&name, &typ, &nullable, &extra, &dflt, &charset, &collation); err != nil {
			return nil, err
		}
		c := colDef{typ: normalType(typ.String), shown: typ.String, notNull: strings.EqualFold(nullable.String, "NO"),
			charset: strings.ToLower(charset.String), collation: strings.ToLower(collation.String)}
		switch e := strings.ToUpper(extra.String); {
		case strings.Contains(e, "STORED GENERATED"), strings.Contains(e, "PERSISTENT GENERATED"):
			c.generated = "stored"
		case strings.Contains(e, "VIRTUAL GENERATED"):
			c.generated = "virtual"
		}
		if c.generated == "" {
			c.dflt = serverDefault(dflt)
		}
		c.onUpdate, c.autoIncrement = serverExtra(extra.String)
		out[strings.ToLower(name.String)] = c
	}
	return out, rows.Err()
}

// keysOf returns the keys of table in the current database, by lower-case name. NON_UNIQUE
// and SUB_PART are scanned as strings: TiDB reports NON_UNIQUE as a string, MySQL and
// MariaDB as a number.
func keysOf(ctx context.Context, q queryer, table string) (map[string]keyDef, error) {
	rows, err := q.QueryContext(ctx, `SELECT INDEX_NAME, NON_UNIQUE, COLUMN_NAME, SUB_PART, INDEX_TYPE FROM information_schema.STATISTICS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY INDEX_NAME, SEQ_IN_INDEX`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]keyDef{}
	for rows.Next() {
		var name, nonUnique, col, sub, typ sql.NullString
		if err := rows.Scan(&name, &nonUnique, &col, &sub, &typ); err != nil {
			return nil, err
		}
		lower := strings.ToLower(name.String)
		k, ok := out[lower]
		if !ok {
			k = keyDef{name: name.String, unique: strings.TrimSpace(nonUnique.String) == "0", primary: strings.EqualFold(name.String, "PRIMARY")}
			if t := strings.ToUpper(typ.String); t == "FULLTEXT" || t == "SPATIAL" {
				k.kind = t
			}
		}
		p := keyPart{col: col.String}
		if sub.Valid && strings.TrimSpace(sub.String) != "" {
			if p.sub, err = strconv.Atoi(strings.TrimSpace(sub.String)); err != nil {
				return nil, fmt.Errorf("key %s of %s: SUB_PART %q: %w", name.String, table, sub.String, err)
			}
		}
		k.parts = append(k.parts, p)
		out[lower] = k
	}
	return out, rows.Err()
}

// schemaMismatch is an existing table, column or key that is not what the migration
// creates.
func (f file) schemaMismatch(format string, args ...any) error {
	return fmt.Errorf("migration %04d: %s; drop or fix it and re-run", f.version, fmt.Sprintf(format, args...))
}

// foundApplied reports whether err says that part of stmt's effect is there already (a
// table, column or key of its name exists, or one it drops is gone).
func foundApplied(err error) bool {
	var me *gomysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case errTableExists, errDupColumn, errDupKey, errUnknownTable, errCantDropColKey:
		return true
	}
	return false
}

// settle is called when stmt failed because part of its effect is already there (err,
// foundApplied). It verifies what is there against what stmt creates, and returns what is
// left to run: "" when all of it is there, the ALTER of the clauses not found applied, or
// an error: a definition found that is not the migration's, or err itself when the runner
// cannot tell.
func (f file) settle(ctx context.Context, q queryer, stmt string, err error, log *slog.Logger, n int) (string, error) {
	var me *gomysql.MySQLError
	errors.As(err, &me)
	failed := fmt.Errorf("%s: statement %d: %w", f.name, n, err)
	upper := strings.ToUpper(strings.TrimSpace(stmt))
	switch {
	case strings.HasPrefix(upper, "CREATE TABLE") && me.Number == errTableExists:
		table, err := f.verifyTable(ctx, q, stmt)
		if err != nil {
			return "", err
		}
		log.Warn("migration table already there, as the migration creates it; going on", "file", f.name, "statement", n, "table", table)
		return "", nil
	case strings.HasPrefix(upper, "DROP TABLE") && me.Number == errUnknownTable:
		log.Warn("migration table already dropped; going on", "file", f.name, "statement", n, "err", err)
		return "", nil
	case !strings.HasPrefix(upper, "ALTER TABLE"):
		return "", failed
	}
	return f.settleAlter(ctx, q, stmt, failed, log, n)
}

// settleAlter settles stmt, an ALTER TABLE (statement n) found partly applied: it returns
// the ALTER of the clauses not found applied, "" when all of them are, failed when none is
// or when the runner cannot tell which are, or an error naming a definition found that is
// not the migration's.
func (f file) settleAlter(ctx context.Context, q queryer, stmt string, failed error, log *slog.Logger, n int) (string, error) {
	a, ok := parseAlter(stmt)
	if !ok {
		return "", failed
	}
	clauses, err := parseClauses(a.clauses, failed)
	if err != nil {
		return "", err
	}
	table := unquote(a.table)
	cols, err := columnsOf(ctx, q, table)
	if err != nil {
		return "", fmt.Errorf("%s: statement %d: read the columns of %s: %w", f.name, n, table, err)
	}
	keys, err := keysOf(ctx, q, table)
	if err != nil {
		return "", fmt.Errorf("%s: statement %d: read the keys of %s: %w", f.name, n, table, err)
	}
	// A column the ALTER adds takes the table's collation.
	opts, err := tableOptionsOf(ctx, q, table)
	if err != nil {
		return "", fmt.Errorf("%s: statement %d: read the options of %s: %w", f.name, n, table, err)
	}
	var left []string
	for _, c := range clauses {
		c.col = c.col.inTable(opts.collation)
		applied, err := f.clauseApplied(c, table, cols, keys)
		if err != nil {
			return "", err
		}
		if !applied {
			left = append(left, c.text)
			continue
		}
		log.Warn("migration clause already applied, and verified; going on", "file", f.name, "statement", n, "clause", c.text)
	}
	switch len(left) {
	case len(clauses):
		// Nothing found applied: the error is not about this statement's effect.
		return "", failed
	case 0:
		return "", nil
	}
	return a.statement(left), nil
}

// parseClauses reads the clauses of an ALTER TABLE. It returns failed, wrapped with the
// reason, for a clause it cannot read, and failed for an ALTER that drops what it adds:
// which of the two clauses is found applied cannot be told.
func parseClauses(texts []string, failed error) ([]clause, error) {
	clauses := make([]clause, 0, len(texts))
	added, dropped := map[string]bool{}, map[string]bool{}
	for _, text := range texts {
		c, perr := parseClause(text)
		if perr != nil {
			return nil, fmt.Errorf("%w (the runner does not skip what it cannot check: %v)", failed, perr)
		}
		id := "key " + strings.ToLower(c.name) // a column and a key may share a name
		if c.kind == addColumn || c.kind == dropColumn {
			id = "column " + strings.ToLower(c.name)
		}
		switch c.kind {
		case addColumn, addKey:
			added[id] = true
		case dropColumn, dropKey:
			dropped[id] = true
		}
		if added[id] && dropped[id] {
			return nil, failed
		}
		clauses = append(clauses, c)
	}
	return clauses, nil
}

// clauseApplied reports whether the effect of c, a clause of an ALTER of table, is there:
// the column or key it adds exists, or the one it drops is gone. A column or key found
// with another definition than c's (another type, nullability, DEFAULT, ON UPDATE or
// collation for a column) is an error; a clause of another kind is never found applied.
func (f file) clauseApplied(c clause, table string, cols map[string]colDef, keys map[string]keyDef) (bool, error) {
	switch c.kind {
	case addColumn:
		have, ok := cols[strings.ToLower(c.name)]
		if ok && !c.col.same(have) {
			return false, f.schemaMismatch("column %s on %s exists as %s but the migration adds %s", c.name, table, have, c.col)
		}
		return ok, nil
	case addKey:
		have, ok := keys[strings.ToLower(c.name)]
		if ok && !have.same(c.key) {
			return false, f.schemaMismatch("key %s on %s exists as %s but the migration adds %s", c.name, table, have, c.key)
		}
		return ok, nil
	case dropColumn:
		_, ok := cols[strings.ToLower(c.name)]
		return !ok, nil
	case dropKey:
		_, ok := keys[strings.ToLower(c.name)]
		return !ok, nil
	}
	return false, nil
}

// namedCol is a column of a CREATE TABLE.
type namedCol struct {
	name string
	def  colDef
}

// createDef is a CREATE TABLE as the runner compares it.
type createDef struct {
	table string
	cols  []namedCol
	keys  []keyDef
	opts  tableOptions
}

// parseCreate reads a CREATE TABLE statement as its table, columns, keys and table
// options. The columns of the primary key are NOT NULL, as the server makes them.
func parseCreate(stmt string) (createDef, error) {
	table, defs, options, err := createTable(stmt)
	if err != nil {
		return createDef{}, err
	}
	cols, keys, err := parseDefinitions(defs)
	if err != nil {
		return createDef{}, err
	}
	for _, k := range keys {
		if k.primary {
			primaryNotNull(cols, k)
		}
	}
	opts, err := parseTableOptions(options)
	if err != nil {
		return createDef{}, fmt.Errorf("the options of %s: %w", table, err)
	}
	return createDef{table: table, cols: cols, keys: keys, opts: opts}, nil
}

// createTable splits a CREATE TABLE statement into its table's name, the text of its
// definitions, between the parentheses, and that of its options, after them. CREATE
// TABLE IF NOT EXISTS is an error: the runner does not check it.
func createTable(stmt string) (table, defs, options string, err error) {
	rest := strings.TrimSpace(stmt)
	if !strings.HasPrefix(strings.ToUpper(rest), "CREATE TABLE") {
		return "", "", "", fmt.Errorf("not a CREATE TABLE")
	}
	name, rest := firstWord(rest[len("CREATE TABLE"):])
	if strings.EqualFold(name, "IF") {
		return "", "", "", fmt.Errorf("cannot check a CREATE TABLE IF NOT EXISTS")
	}
	if i := strings.IndexByte(name, '('); i >= 0 {
		name, rest = name[:i], name[i:]+" "+rest
	}
	table = unquote(name)
	open := strings.IndexByte(rest, '(')
	closing := -1
	if open >= 0 {
		closing = matchingParen(rest, open)
	}
	if table == "" || closing < 0 {
		return "", "", "", fmt.Errorf("cannot read the definitions of %q", stmt)
	}
	return table, rest[open+1 : closing], rest[closing+1:], nil
}

// parseDefinitions reads the definitions of a CREATE TABLE as its columns and keys. A
// constraint or a period is an error: the runner cannot check it.
func parseDefinitions(defs string) ([]namedCol, []keyDef, error) {
	var cols []namedCol
	var keys []keyDef
	for _, e := range splitTopLevel(defs) {
		e = strings.TrimSpace(e)
		w, _ := firstWord(e)
		if keyWords[strings.ToUpper(w)] {
			k, err := parseKey(e)
			if err != nil {
				return nil, nil, err
			}
			keys = append(keys, k)
			continue
		}
		switch strings.ToUpper(w) {
		case "CONSTRAINT", "FOREIGN", "CHECK", "PERIOD":
			return nil, nil, fmt.Errorf("cannot check %q", e)
		}
		n, c, err := parseColumn(e)
		if err != nil {
			return nil, nil, err
		}
		cols = append(cols, namedCol{n, c})
	}
	return cols, keys, nil
}

// primaryNotNull marks the columns of the primary key NOT NULL in cols, as the server
// makes them.
func primaryNotNull(cols []namedCol, primary keyDef) {
	for _, p := range primary.parts {
		for i := range cols {
			if strings.EqualFold(cols[i].name, p.col) {
				cols[i].def.notNull = true
			}
		}
	}
}

// verifyTable checks that the table stmt (a CREATE TABLE) creates exists with every column
// and key stmt gives it, as stmt defines them (it may have more), and with stmt's ENGINE
// and collation. It returns the table's name.
func (f file) verifyTable(ctx context.Context, q queryer, stmt string) (string, error) {
	want, err := parseCreate(stmt)
	if err != nil {
		return "", fmt.Errorf("%s: the table exists, and the runner does not skip what it cannot check: %w", f.name, err)
	}
	table := want.table
	cols, err := columnsOf(ctx, q, table)
	if err != nil {
		return "", fmt.Errorf("%s: read the columns of %s: %w", f.name, table, err)
	}
	keys, err := keysOf(ctx, q, table)
	if err != nil {
		return "", fmt.Errorf("%s: read the keys of %s: %w", f.name, table, err)
	}
	opts, err := tableOptionsOf(ctx, q, table)
	if err != nil {
		return "", fmt.Errorf("%s: read the options of %s: %w", f.name, table, err)
	}
	if len(cols) == 0 {
		// information_schema shows only what the user may read.
		return "", fmt.Errorf("%s: %s exists but information_schema shows none of its columns (may the migrating user read them?); the runner does not skip what it cannot check", f.name, table)
	}
	// The columns take the collation stmt gives the table, or the one it has if stmt gives
	// none.
	collation := want.opts.collation
	if collation == "" && want.opts.charset == "" {
		collation = opts.collation
	}
	for i := range want.cols {
		want.cols[i].def = want.cols[i].def.inTable(collation)
	}
	if err := f.verifyColumns(table, want.cols, cols, colDef.sameShape); err != nil {
		return "", err
	}
	if err := f.verifyKeys(table, want.keys, keys); err != nil {
		return "", err
	}
	if err := want.opts.check(opts); err != nil {
		return "", f.schemaMismatch("table %s exists %s", table, err)
	}
	if err := f.verifyColumns(table, want.cols, cols, colDef.sameCollation); err != nil {
		return "", err
	}
	return table, nil
}

// verifyColumns checks that each of want is among have (the table's columns, by lower-case
// name) and that same(want, have) holds.
func (f file) verifyColumns(table string, want []namedCol, have map[string]colDef, same func(want, have colDef) bool) error {
	for _, c := range want {
		h, ok := have[strings.ToLower(c.name)]
		if !ok {
			return f.schemaMismatch("table %s exists with no column %s but the migration creates column %s %s", table, c.name, c.name, c.def)
		}
		if !same(c.def, h) {
			return f.schemaMismatch("table %s exists with column %s %s but the migration creates column %s %s", table, c.name, h, c.name, c.def)
		}
	}
	return nil
}

// verifyKeys checks that each of want is among have (the table's keys, by lower-case
// name), the same key.
func (f file) verifyKeys(table string, want []keyDef, have map[string]keyDef) error {
	for _, k := range want {
		h, ok := have[strings.ToLower(k.name)]
		if !ok {
			return f.schemaMismatch("table %s exists with no key %s but the migration creates %s", table, k.name, k.named())
		}
		if !h.same(k) {
			return f.schemaMismatch("table %s exists with %s but the migration creates %s", table, h.named(), k.named())
		}
	}
	return nil
}
