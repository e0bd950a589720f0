package testenv

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io/fs"
	"strings"
	"sync"

	"github.com/paykit/paykit/migrations"
	"github.com/paykit/paykit/mysql"
)

// templateName names the template of the current migration files: a change to any file
// makes a new one.
func templateName() (string, error) {
	h := sha256.New()
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		return "", err
	}
	for _, n := range names {
		b, err := fs.ReadFile(migrations.FS, n)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\n%d\n", n, len(b))
		h.Write(b)
	}
	return "paykit_tpl_" + hex.EncodeToString(h.Sum(nil))[:16], nil
}

var templateOnce struct {
	sync.Mutex
	name string
}

// ensureTemplate returns the migrated template database on db's server, migrating it the
// first time. Processes that start at once are serialised by a named lock; a template
// counts only once its migration finished (the paykit_template_ready table).
func ensureTemplate(ctx context.Context, db *sql.DB) (string, error) {
	templateOnce.Lock()
	defer templateOnce.Unlock()
	if templateOnce.name != "" {
		return templateOnce.name, nil
	}
	name, err := templateName()
	if err != nil {
		return "", err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 120)", name).Scan(&got); err != nil || got.Int64 != 1 {
		return "", fmt.Errorf("lock %s: %v (got %v)", name, err, got)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(?)", name) //nolint:errcheck
	var ready int
	if err := conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables
		WHERE table_schema = ? AND table_name = 'paykit_template_ready'`, name).Scan(&ready); err != nil {
		return "", err
	}
	if ready == 0 {
		// The name is hex digits: safe to quote.
		for _, q := range []string{"DROP DATABASE IF EXISTS `" + name + "`",
			"CREATE DATABASE `" + name + "` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"} {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				return "", err
			}
		}
		tpl, err := openSibling(ctx, name)
		if err != nil {
			return "", err
		}
		defer tpl.Close()
		if err := migrations.Up(ctx, tpl); err != nil {
			return "", fmt.Errorf("migrate %s: %w", name, err)
		}
		if _, err := tpl.ExecContext(ctx, "CREATE TABLE paykit_template_ready (id INT PRIMARY KEY)"); err != nil {
			return "", err
		}
	}
	templateOnce.name = name
	return name, nil
}

// openSibling opens the database name on the server of PAYKIT_TEST_MYSQL_DSN.
func openSibling(ctx context.Context, name string) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(env(MySQLDSNEnv, DefaultMySQLDSN))
	if err != nil {
		return nil, err
	}
	cfg.DBName = name
	return mysql.Open(ctx, cfg.FormatDSN())
}

// cloneTemplate makes db's (empty) database a copy of the template's schema, with goose's
// record of the migrations applied.
func cloneTemplate(ctx context.Context, db *sql.DB) error {
	tpl, err := ensureTemplate(ctx, db)
	if err != nil {
		return err
	}
	rows, err := db.QueryContext(ctx, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = ? AND table_name <> 'paykit_template_ready' ORDER BY table_name`, tpl)
	if err != nil {
		return err
	}
	var tables []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			rows.Close()
			return err
		}
		tables = append(tables, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, t := range tables {
		// Names come from the template's catalogue (migration-defined tables).
		if _, err := db.ExecContext(ctx, "CREATE TABLE `"+t+"` LIKE `"+tpl+"`.`"+t+"`"); err != nil {
			return err
		}
		if strings.HasPrefix(t, "goose") {
			if _, err := db.ExecContext(ctx, "INSERT INTO `"+t+"` SELECT * FROM `"+tpl+"`.`"+t+"`"); err != nil {
				return err
			}
		}
	}
	return nil
}
