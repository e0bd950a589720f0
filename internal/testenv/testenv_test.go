package testenv_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
)

func TestMySQL_FreshMigratedDatabaseDroppedAfterTest(t *testing.T) {
	var name string
	t.Run("inner", func(t *testing.T) {
		db, dsn := testenv.MySQL(t)
		if err := db.QueryRow("SELECT DATABASE()").Scan(&name); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(name, "paykit_t_") || !strings.Contains(dsn, name) {
			t.Fatalf("database %q, dsn %q", name, dsn)
		}
		var tables int
		if err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()
			AND table_name IN ('tenants','orders','payments','channel_notifications','benefit_grants',
			'payment_events','idempotency_keys','payment_anomalies')`).Scan(&tables); err != nil {
			t.Fatal(err)
		}
		if tables != 8 {
			t.Fatalf("%d of 8 tables present", tables)
		}
		// The DSN works for another process (an end-to-end binary) too.
		other, err := mysql.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		if _, err := mysql.NewStore(other).GetPayment(context.Background(), "nope"); err == nil {
			t.Fatal("expected not found")
		}
	})
	admin, _ := testenv.EmptyMySQL(t)
	var n int
	if err := admin.QueryRow("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("database %s still exists after its test", name)
	}
}

func TestRedis_PrefixCleanedAfterTest(t *testing.T) {
	var prefix string
	t.Run("inner", func(t *testing.T) {
		rdb, p := testenv.Redis(t)
		prefix = p
		for i := range 1200 {
			if err := rdb.Set(context.Background(), fmt.Sprintf("%sk%d", p, i), "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	})
	rdb, _ := testenv.Redis(t)
	keys, err := testenv.RedisKeys(context.Background(), rdb, prefix+"*")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Fatalf("%d keys left under %s", len(keys), prefix)
	}
}

// fatalTB records Fatalf and Skipf instead of failing or skipping the real test.
type fatalTB struct {
	testing.TB
	msg     string
	skipped bool
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (f *fatalTB) Skipf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	f.skipped = true
	runtime.Goexit()
}

// call runs fn on a fatalTB of t, which it returns once fn has ended.
func call(t *testing.T, fn func(testing.TB)) *fatalTB {
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(tb)
	}()
	<-done
	return tb
}

func TestUnreachableServicesFailWithTheStartCommand(t *testing.T) {
	tests := []struct {
		name, env, value, want string
		call                   func(tb testing.TB)
	}{
		{"mysql", testenv.MySQLDSNEnv, "root@tcp(127.0.0.1:1)/", "start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd",
			func(tb testing.TB) { testenv.MigratedDatabase(tb) }},
		{"redis", testenv.RedisAddrEnv, "127.0.0.1:1", "redis-server --daemonize yes",
			func(tb testing.TB) { testenv.RedisKeySpace(tb) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(tt.env, tt.value)
			tb := call(t, tt.call)
			t.Logf("message: %s", tb.msg)
			if tb.skipped || !strings.Contains(tb.msg, tt.want) {
				t.Fatalf("Fatalf message %q does not say how to start the service", tb.msg)
			}
		})
	}
}

// TestServicesSkipUnderShort: under go test -short every helper that reaches a service
// skips its test, and without -short none does.
func TestServicesSkipUnderShort(t *testing.T) {
	t.Setenv(testenv.MySQLDSNEnv, "root@tcp(127.0.0.1:1)/")
	t.Setenv(testenv.RedisAddrEnv, "127.0.0.1:1")
	for name, fn := range map[string]func(testing.TB){
		"MySQL":      func(tb testing.TB) { testenv.MySQL(tb) },
		"EmptyMySQL": func(tb testing.TB) { testenv.EmptyMySQL(tb) },
		"Redis":      func(tb testing.TB) { testenv.Redis(tb) },
		"RedisAddr":  func(tb testing.TB) { testenv.RedisAddr(tb) },
	} {
		t.Run(name, func(t *testing.T) {
			tb := call(t, fn)
			if name == "RedisAddr" && !testing.Short() {
				return // an address, not a connection: nothing to fail
			}
			if tb.skipped != testing.Short() {
				t.Fatalf("skipped %v under -short %v (%q)", tb.skipped, testing.Short(), tb.msg)
			}
		})
	}
}
