package redis_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/redis"
)

// One address is one server, several (or Cluster) a Redis Cluster, a MasterName the
// Sentinels of a failover pair; a list of URLs is refused with what it takes instead.
func TestDeploymentPicksTheClient(t *testing.T) {
	for _, tc := range []struct {
		d    redis.Deployment
		kind string
		want any
	}{
		{redis.Deployment{Addr: "127.0.0.1:6379"}, "single", &goredis.Client{}},
		{redis.Deployment{Addr: "redis://127.0.0.1:6379/2"}, "single", &goredis.Client{}},
		{redis.Deployment{Addr: "127.0.0.1:7001, 127.0.0.1:7002,,127.0.0.1:7003"}, "cluster", &goredis.ClusterClient{}},
		{redis.Deployment{Addr: "cfg.example:6379", Cluster: true}, "cluster", &goredis.ClusterClient{}},
		{redis.Deployment{Addr: "redis://cfg.example:6379?addr=b.example:6379", Cluster: true}, "cluster", &goredis.ClusterClient{}},
		{redis.Deployment{Addr: "s1:26379,s2:26379", MasterName: "paykit"}, "sentinel", &goredis.Client{}},
	} {
		if got := tc.d.Kind(); got != tc.kind {
			t.Errorf("%+v: kind %s, want %s", tc.d, got, tc.kind)
		}
		rdb, err := redis.Dial(tc.d)
		if err != nil {
			t.Errorf("%+v: %v", tc.d, err)
			continue
		}
		if got, want := fmt.Sprintf("%T", rdb), fmt.Sprintf("%T", tc.want); got != want {
			t.Errorf("%+v: client %s, want %s", tc.d, got, want)
		}
		_ = rdb.Close()
	}
	for _, d := range []redis.Deployment{{Addr: ""}, {Addr: " , "}, {Addr: "redis://a:1,redis://b:1"}} {
		if _, err := redis.Dial(d); err == nil {
			t.Errorf("%+v: no error", d)
		}
	}
}

// On a Redis Cluster whose master dies, the tokens, locks and cached responses of the
// keys in its slots fail fast as errors (the callers' "Redis said nothing": go to MySQL)
// and those in the other masters' slots keep working.
func TestClusterMasterDownFailsOnlyItsSlots(t *testing.T) {
	c := testenv.NewRedisCluster(t, 3)
	rdb, err := redis.Dial(redis.Deployment{Addr: c.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	cl := redis.New(rdb, "paykit:")
	ctx := context.Background()
	// One lock per order; with 60 orders every master holds some.
	orders := make([]string, 60)
	for i := range orders {
		orders[i] = "o" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if _, ok, err := cl.TryLock(ctx, redis.OrderLockKey("t1", orders[i]), time.Minute); err != nil || !ok {
			t.Fatalf("lock %s: %v %v", orders[i], ok, err)
		}
	}
	if err := c.Kill(0); err != nil {
		t.Fatal(err)
	}
	var failed, held int
	for _, o := range orders {
		start := time.Now()
		_, ok, err := cl.TryLock(ctx, redis.OrderLockKey("t1", o), time.Minute)
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("lock %s after the kill took %v: it must fail fast", o, d)
		}
		switch {
		case err != nil:
			failed++
		case !ok:
			held++ // still held on a live master: the lock holds
		default:
			t.Errorf("lock %s taken twice", o)
		}
	}
	if failed == 0 || held == 0 {
		t.Fatalf("after one of 3 masters died: %d locks failed, %d still held; want some of each", failed, held)
	}
	t.Logf("after one of 3 masters died: %d of %d locks failed fast, %d still held", failed, len(orders), held)

	// A master that hangs (SIGSTOP: connections open, no answer) costs a caller two
	// timeouts at most, not the client's default four redirects of two tries each.
	if err := c.Pause(1); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Resume(1) }()
	var hung, live int
	var slowest time.Duration
	for _, o := range orders {
		start := time.Now()
		_, ok, err := cl.TryLock(ctx, redis.OrderLockKey("t1", o), time.Minute)
		d := time.Since(start)
		switch {
		case err != nil && d > 500*time.Millisecond: // a timeout: the hung master's slot
			hung++
			slowest = max(slowest, d)
		case err == nil && !ok:
			live++
		}
	}
	if hung == 0 || live == 0 {
		t.Fatalf("with a second master hung: %d calls timed out, %d locks still held; want some of each", hung, live)
	}
	if slowest > 1500*time.Millisecond {
		t.Errorf("a call to the hung master took %v; want about two 500 ms timeouts", slowest)
	}
	t.Logf("with a second master hung: %d calls timed out (slowest %v), %d locks still held on the last master", hung, slowest, live)
}

// A URL's password never reaches a log line or an error.
func TestRedactHidesPasswords(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:6379":                    "127.0.0.1:6379",
		"redis://:s3cret@cache:6379/0":      "redis://:xxxxx@cache:6379/0",
		"rediss://paykit:s3cret@cache:6380": "rediss://paykit:xxxxx@cache:6380",
		"a:1,redis://u:s3cret@b:2":          "a:1,redis://u:xxxxx@b:2",
	} {
		if got := redis.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
