// Package testenv gives tests a private MySQL database and a private Redis key space on
// the services running on the machine. Under go test -short (the fast tier) a test that
// asks for a service is skipped; otherwise nothing is skipped: if a service is down the
// test fails and says how to start it.
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/paykit/paykit/migrations"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/redis"
)

// Environment variables read by this package, and their defaults.
const (
	// MySQLDSNEnv names the DSN of a MySQL or MariaDB server with rights to create and
	// drop databases. Its database name, if any, is ignored.
	MySQLDSNEnv = "PAYKIT_TEST_MYSQL_DSN"
	// RedisAddrEnv names the Redis address (host:port or redis:// URL).
	RedisAddrEnv = "PAYKIT_TEST_REDIS_ADDR"

	// DefaultMySQLDSN is used when PAYKIT_TEST_MYSQL_DSN is unset.
	DefaultMySQLDSN = "root@tcp(127.0.0.1:3306)/"
	// DefaultRedisAddr is used when PAYKIT_TEST_REDIS_ADDR is unset.
	DefaultRedisAddr = "127.0.0.1:6379"
)

// Commands that start the services on the development machine.
const (
	startMariaDB      = "start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd"
	startRedisCluster = "PAYKIT_TEST_REDIS_ADDR=cluster (three masters of the test's own)"
	startRedis        = `redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log`
)

const setupTimeout = 60 * time.Second

// MySQL creates a fresh database paykit_t_<random> on the server named by
// PAYKIT_TEST_MYSQL_DSN (default root@tcp(127.0.0.1:3306)/), applies every migration,
// and returns a handle on it with its DSN (for binaries started by end-to-end tests). The
// database is dropped when the test ends.
//
// On TiDB, whose DDL statements each take a round of its DDL job queue, the database is
// instead cloned (CREATE TABLE … LIKE, goose's version rows copied) from a template
// migrated once per set of migration files and kept on the server, which is several times
// faster; migrations/TestRunnerBuildsTheSchemaGooseBuilds compares a clone's schema with
// one goose builds.
func MySQL(tb testing.TB) (*sql.DB, string) {
	tb.Helper()
	SkipIfShort(tb, "MariaDB")
	return migratedDatabase(tb)
}

func migratedDatabase(tb testing.TB) (*sql.DB, string) {
	tb.Helper()
	db, dsn := newDatabase(tb)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	tidb, err := migrations.IsTiDB(ctx, db)
	if err != nil {
		tb.Fatalf("testenv: %s: %v", dsn, err)
	}
	if tidb {
		if err := cloneTemplate(ctx, db); err != nil {
			tb.Fatalf("testenv: clone the migrated template into %s: %v", dsn, err)
		}
		return db, dsn
	}
	if err := migrations.Up(ctx, db); err != nil {
		tb.Fatalf("testenv: migrate %s: %v", dsn, err)
	}
	return db, dsn
}

// EmptyMySQL is MySQL without the migrations, for tests of the migrations themselves.
func EmptyMySQL(tb testing.TB) (*sql.DB, string) {
	tb.Helper()
	SkipIfShort(tb, "MariaDB")
	return newDatabase(tb)
}

func newDatabase(tb testing.TB) (*sql.DB, string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()

	base := env(MySQLDSNEnv, DefaultMySQLDSN)
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		tb.Fatalf("testenv: %s=%q: %v", MySQLDSNEnv, base, err)
	}
	cfg.DBName = ""
	admin, err := mysql.Open(ctx, cfg.FormatDSN())
	if err != nil {
		tb.Fatalf("testenv: MariaDB/MySQL at %s is unreachable (%v); start it with:\n\t%s\nor point %s at a server",
			cfg.Addr, err, startMariaDB, MySQLDSNEnv)
	}
	// The name is generated here from hex digits, so quoting it is safe; identifiers
	// cannot be bound as parameters.
	name := "paykit_t_" + randomHex(6)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		_ = admin.Close()
		tb.Fatalf("testenv: create database %s: %v", name, err)
	}
	cfg.DBName = name
	dsn := cfg.FormatDSN()
	db, err := mysql.Open(ctx, dsn)
	if err != nil {
		_ = admin.Close()
		tb.Fatalf("testenv: open %s: %v", name, err)
	}
	tb.Cleanup(func() {
		_ = db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			tb.Errorf("testenv: drop database %s: %v", name, err)
		}
		_ = admin.Close()
	})
	return db, dsn
}

// Redis returns a client on the Redis of RedisAddr (several comma-separated addresses
// are a Redis Cluster's) and a key
// prefix unique to this test ("paykit_t_<random>:"). Every key under the prefix is
// deleted when the test ends, on every master of a cluster.
func Redis(tb testing.TB) (goredis.UniversalClient, string) {
	tb.Helper()
	SkipIfShort(tb, "Redis")
	return redisKeySpace(tb)
}

func redisKeySpace(tb testing.TB) (goredis.UniversalClient, string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	addr, err := SharedRedisAddr()
	if err != nil {
		tb.Fatal(err)
	}
	rdb, err := redis.Open(ctx, addr)
	if err != nil {
		tb.Fatalf("testenv: Redis at %s is unreachable (%v); start it with:\n\t%s\nor point %s at a server (or at a cluster started with %s)",
			addr, err, startRedis, RedisAddrEnv, startRedisCluster)
	}
	prefix := "paykit_t_" + randomHex(6) + ":"
	tb.Cleanup(func() {
		defer rdb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		if err := forEachMaster(ctx, rdb, func(ctx context.Context, node *goredis.Client) error {
			return unlinkPrefix(ctx, node, prefix)
		}); err != nil {
			tb.Errorf("testenv: delete %s*: %v", prefix, err)
		}
	})
	return rdb, prefix
}

// forEachMaster calls fn on each master of a cluster, or on the one server.
func forEachMaster(ctx context.Context, rdb goredis.UniversalClient, fn func(context.Context, *goredis.Client) error) error {
	switch c := rdb.(type) {
	case *goredis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	case *goredis.Client:
		return fn(ctx, c)
	}
	return fmt.Errorf("testenv: a %T cannot be scanned", rdb)
}

// unlinkPrefix deletes every key of one server under prefix, one key per command (keys
// of a cluster node live in different slots).
func unlinkPrefix(ctx context.Context, node *goredis.Client, prefix string) error {
	iter := node.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return err
	}
	pipe := node.Pipeline()
	for _, k := range keys {
		pipe.Unlink(ctx, k)
	}
	if len(keys) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

// SkipIfShort skips a test that needs service (MariaDB, Redis, PostgreSQL, Temporal)
// under go test -short, the fast tier that runs with no service at all. Without -short it
// does nothing, and the helper that reaches the service fails loudly if it is down.
func SkipIfShort(tb testing.TB, service string) {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("needs %s; skipped under -short", service)
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Parallel runs fn(i) for i in [0, n) on n goroutines released at the same moment, the
// way the concurrency tests hit one record from many callers, and waits for all of them.
func Parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			fn(i)
		})
	}
	close(start)
	wg.Wait()
}

// RedisKeys lists the keys matching pattern on every master of a cluster, or on the one
// server (KEYS on a cluster client asks one node only).
func RedisKeys(ctx context.Context, rdb goredis.UniversalClient, pattern string) ([]string, error) {
	var mu sync.Mutex
	var keys []string
	err := forEachMaster(ctx, rdb, func(ctx context.Context, node *goredis.Client) error {
		ks, err := node.Keys(ctx, pattern).Result()
		mu.Lock()
		keys = append(keys, ks...)
		mu.Unlock()
		return err
	})
	return keys, err
}
