package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// RedisCluster is a Redis Cluster of masters without replicas started from redis-server
// for one test process; its servers die with the process.
type RedisCluster struct {
	Addrs []string
	procs []*exec.Cmd
	dir   string
}

// Addr is the cluster's nodes, comma-separated, as PAYKIT_REDIS_ADDR takes them.
func (c *RedisCluster) Addr() string { return strings.Join(c.Addrs, ",") }

// Kill SIGKILLs the i-th master. The cluster runs on without full coverage: the other
// masters keep serving their slots, and the dead one's keys fail.
func (c *RedisCluster) Kill(i int) error {
	if err := c.procs[i].Process.Kill(); err != nil {
		return err
	}
	_ = c.procs[i].Wait()
	return nil
}

// Pause SIGSTOPs the i-th master: it keeps its connections open and answers nothing, as a
// master behind a partition does; Resume lets it go on.
func (c *RedisCluster) Pause(i int) error { return c.procs[i].Process.Signal(syscall.SIGSTOP) }

// Resume SIGCONTs a paused master.
func (c *RedisCluster) Resume(i int) error { return c.procs[i].Process.Signal(syscall.SIGCONT) }

// Stop kills every master.
func (c *RedisCluster) Stop() {
	for _, p := range c.procs {
		if p.ProcessState == nil {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}
	_ = os.RemoveAll(c.dir)
}

// StartRedisCluster starts a cluster of n masters (3 at least) on free ports, creates it
// with redis-cli --cluster create and waits until every node reports cluster_state:ok.
// cluster-require-full-coverage is off, so a killed master fails only its own slots.
func StartRedisCluster(n int) (*RedisCluster, error) {
	if n < 3 {
		return nil, fmt.Errorf("testenv: a Redis Cluster needs 3 masters, not %d", n)
	}
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("testenv: %s not found (apt-get install redis-server): %w", bin, err)
		}
	}
	dir, err := os.MkdirTemp("", "paykit-redis-cluster-")
	if err != nil {
		return nil, err
	}
	c := &RedisCluster{dir: dir}
	fail := func(err error) (*RedisCluster, error) {
		c.Stop()
		return nil, err
	}
	for _, port := range freeClusterPorts(n) {
		p := strconv.Itoa(port)
		cmd := exec.Command("redis-server", "--port", p, "--bind", "127.0.0.1", "--cluster-enabled", "yes",
			"--cluster-config-file", "nodes-"+p+".conf", "--cluster-node-timeout", "2000",
			"--cluster-require-full-coverage", "no", "--dir", dir, "--save", "", "--appendonly", "no",
			"--logfile", "redis-"+p+".log")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return fail(fmt.Errorf("testenv: start redis-server on %s: %w", p, err))
		}
		c.procs = append(c.procs, cmd)
		c.Addrs = append(c.Addrs, "127.0.0.1:"+p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, a := range c.Addrs {
		if err := waitRedis(ctx, a, func(*goredis.Client) error { return nil }); err != nil {
			return fail(err)
		}
	}
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("testenv: redis-cli --cluster create: %v\n%s", err, out))
	}
	for _, a := range c.Addrs {
		if err := waitRedis(ctx, a, func(rdb *goredis.Client) error {
			info, err := rdb.ClusterInfo(ctx).Result()
			if err == nil && !strings.Contains(info, "cluster_state:ok") {
				err = fmt.Errorf("cluster_state is not ok")
			}
			return err
		}); err != nil {
			return fail(err)
		}
	}
	return c, nil
}

// waitRedis polls addr until it answers PING and ready accepts it.
func waitRedis(ctx context.Context, addr string, ready func(*goredis.Client) error) error {
	rdb := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	for {
		err := rdb.Ping(ctx).Err()
		if err == nil {
			if err = ready(rdb); err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testenv: Redis at %s not ready: %v", addr, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// freeClusterPorts returns n distinct ports free now, below the kernel's ephemeral range,
// whose cluster bus ports (+10000) are free too and collide with no other chosen port.
func freeClusterPorts(n int) []int {
	var ports []int
	taken := map[int]bool{}
	for len(ports) < n {
		p := 11000 + rand.IntN(10000) // bus ports 21000-30999: below 32768
		if taken[p] || taken[p+10000] || !free(p) || !free(p+10000) {
			continue
		}
		taken[p], taken[p+10000] = true, true
		ports = append(ports, p)
	}
	return ports
}

func free(port int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

var (
	sharedCluster     *RedisCluster
	sharedClusterErr  error
	sharedClusterOnce sync.Once
)

// SharedRedisAddr is the Redis address tests use: PAYKIT_TEST_REDIS_ADDR (default
// 127.0.0.1:6379). The value "cluster" starts a three-master Redis Cluster private to
// this test process, once, and gives its nodes comma-separated.
func SharedRedisAddr() (string, error) {
	addr := env(RedisAddrEnv, DefaultRedisAddr)
	if addr != "cluster" {
		return addr, nil
	}
	sharedClusterOnce.Do(func() { sharedCluster, sharedClusterErr = StartRedisCluster(3) })
	if sharedClusterErr != nil {
		return "", fmt.Errorf("testenv: %s=cluster: %w", RedisAddrEnv, sharedClusterErr)
	}
	return sharedCluster.Addr(), nil
}

// StopSharedRedis stops the cluster SharedRedisAddr started, if any (its servers also
// die with the process).
func StopSharedRedis() {
	if sharedCluster != nil {
		sharedCluster.Stop()
	}
}

// RedisAddr is SharedRedisAddr for one test, which it fails if the cluster cannot start.
func RedisAddr(tb testing.TB) string {
	tb.Helper()
	SkipIfShort(tb, "Redis")
	addr, err := SharedRedisAddr()
	if err != nil {
		tb.Fatal(err)
	}
	return addr
}

// NewRedisCluster is StartRedisCluster for one test, which it skips under -short, fails
// if the cluster cannot start, and stops the cluster when it ends.
func NewRedisCluster(tb testing.TB, n int) *RedisCluster {
	tb.Helper()
	SkipIfShort(tb, "redis-server")
	c, err := StartRedisCluster(n)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Stop)
	return c
}
