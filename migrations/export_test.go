package migrations

import (
	"io/fs"
	"strings"
	"testing/fstest"
)

// SplitFS is FS with every multi-clause ALTER TABLE written as one ALTER per clause, the
// way the runner applies the files on TiDB, in goose's format, for goose's own runner.
func SplitFS() (fs.FS, error) {
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
				for _, c := range clausesOf(s) {
					b.WriteString(c + ";\n")
				}
			}
		}
		out[f.name] = &fstest.MapFile{Data: []byte(b.String())}
	}
	return out, nil
}
