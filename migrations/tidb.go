package migrations

import (
	"context"
	"database/sql"
	"strings"
)

// TiDB applies an ALTER TABLE of several clauses as one multi-schema change, and refuses
// one whose clause uses a column another clause of it adds or modifies (ADD COLUMN b AFTER
// a newly added a, ADD KEY on a column just added, MODIFY a column and index it). MySQL and
// MariaDB apply such a statement atomically; on TiDB the runner applies it one clause at a
// time instead, in the file's order. Each clause is atomic, and one found already there,
// as the file defines it, is skipped on a re-run (verify.go), so an interrupted file
// still completes when run again.

// Querier is what IsTiDB reads the server's version through: a *sql.DB or a *sql.Conn.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// IsTiDB reports whether q is connected to a TiDB server (its VERSION() names TiDB).
func IsTiDB(ctx context.Context, q Querier) (bool, error) {
	var v string
	if err := q.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return false, err
	}
	return strings.Contains(v, "TiDB"), nil
}

// clausesOf returns an ALTER TABLE statement of several clauses as one ALTER TABLE per
// clause, each with the statement's ALGORITHM and LOCK options; any other statement is
// returned as it is.
func clausesOf(stmt string) []string {
	a, ok := parseAlter(stmt)
	if !ok || len(a.clauses) < 2 {
		return []string{stmt}
	}
	out := make([]string, len(a.clauses))
	for i, c := range a.clauses {
		out[i] = a.statement([]string{c})
	}
	return out
}

// alter is an ALTER TABLE statement read as its table, its clauses (each with its
// whitespace collapsed) and its ALGORITHM and LOCK options.
type alter struct {
	table   string
	clauses []string
	options []string
}

const alterPrefix = "ALTER TABLE "

// parseAlter reads stmt as an ALTER TABLE; ok is false for any other statement.
func parseAlter(stmt string) (a alter, ok bool) {
	trimmed := strings.TrimSpace(stmt)
	if !strings.HasPrefix(strings.ToUpper(trimmed), alterPrefix) {
		return a, false
	}
	rest := strings.TrimSpace(trimmed[len(alterPrefix):])
	end := strings.IndexAny(rest, " \t\n")
	if end < 0 {
		return a, false
	}
	a.table = rest[:end]
	for _, c := range splitTopLevel(rest[end:]) {
		c = strings.Join(strings.Fields(c), " ")
		switch upper := strings.ToUpper(c); {
		case c == "":
		case strings.HasPrefix(upper, "ALGORITHM"), strings.HasPrefix(upper, "LOCK"):
			a.options = append(a.options, c)
		default:
			a.clauses = append(a.clauses, c)
		}
	}
	return a, true
}

// statement is the ALTER TABLE of a's table with clauses and a's options.
func (a alter) statement(clauses []string) string {
	return alterPrefix + a.table + " " + strings.Join(append(append([]string{}, clauses...), a.options...), ", ")
}

// splitTopLevel splits s at the commas outside parentheses and quotes.
func splitTopLevel(s string) []string {
	var (
		parts []string
		depth int
		quote rune
		start int
	)
	for i, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"' || r == '`':
			quote = r
		case r == '(':
			depth++
		case r == ')':
			depth--
		case r == ',' && depth == 0:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}
