package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"
)

// EnsureDatabase creates the database that c names if it is missing (CREATE DATABASE IF
// NOT EXISTS, so a user without that privilege on an existing database loses nothing),
// connecting to the server without it.
func EnsureDatabase(ctx context.Context, c *gomysql.Config) error {
	name := c.DBName
	if name == "" {
		return errors.New("PAYKIT_MYSQL_DSN must name a database")
	}
	c = c.Clone()
	c.DBName = ""
	conn, err := gomysql.NewConnector(c)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("mysql at %s is not reachable; start MariaDB with `start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd`: %w", c.Addr, err)
	}
	_, err = db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+strings.ReplaceAll(name, "`", "")+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
	return err
}
