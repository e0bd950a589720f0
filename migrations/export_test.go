package migrations

import (
	"context"
	"database/sql"
	"io/fs"
	"strings"
	"testing/fstest"
)

// SplitFS is FS in goose's format, for goose's own runner: each statement batched by a
// key range run once over every key and, with split, every multi-clause ALTER TABLE
// written as one ALTER per clause, the way the runner applies the files on TiDB.
func SplitFS(split bool) (fs.FS, error) {
	fs, err := files()
	if err != nil {
		return nil, err
	}
	out := fstest.MapFS{}
	for _, f := range fs {
		var b strings.Builder
		for _, section := range []struct {
			mark  string
			stmts []string
		}{{"-- +goose Up", f.up}, {"-- +goose Down", f.down}} {
			b.WriteString(section.mark + "\n")
			for _, s := range section.stmts {
				if f.ranged != nil && section.mark == "-- +goose Up" {
					// goose runs it once, over every key.
					s = strings.Replace(strings.Replace(s, "?", "-9223372036854775808", 1), "?", "9223372036854775807", 1)
				}
				clauses := []string{s}
				if split {
					clauses = clausesOf(s)
				}
				for _, c := range clauses {
					b.WriteString(c + ";\n")
				}
			}
		}
		out[f.name] = &fstest.MapFile{Data: []byte(b.String())}
	}
	return out, nil
}

// RunFile parses text as the migration file name and runs its Up statements as the
// runner does.
func RunFile(ctx context.Context, db *sql.DB, name, text string) error {
	f, err := parseFile(name, text)
	if err != nil {
		return err
	}
	return f.run(ctx, db, f.up, f.batched, true, Options{}.withDefaults())
}
