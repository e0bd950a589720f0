package redis_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/redis"
)

func newClient(tb testing.TB) *redis.Client {
	tb.Helper()
	rdb, prefix := testenv.Redis(tb)
	return redis.New(rdb, prefix)
}

func TestToken(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()

	tok, err := c.IssueToken(ctx, "t1", "o1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	empty, err := c.IssueToken(ctx, "t1", "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	short, err := c.IssueToken(ctx, "t1", "o3", 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) != 32 || tok == empty {
		t.Fatalf("tokens %q %q", tok, empty)
	}
	time.Sleep(200 * time.Millisecond)

	tests := []struct {
		name, tenant, token, order, binder string
		wantOK                             bool
		wantIssuedFor                      string
	}{
		{"another tenant's token", "t2", tok, "o1", "A", false, ""},
		{"for another order: refused, not claimed", "t1", tok, "o2", "A", false, "o1"},
		{"first claim", "t1", tok, "o1", "A", true, "o1"},
		{"the same request again", "t1", tok, "o1", "A", true, "o1"},
		{"another request", "t1", tok, "o1", "B", false, ""},
		{"the same binder for another order", "t1", tok, "o2", "A", false, "o1"},
		{"token without order, any order", "t1", empty, "o9", "A", true, ""},
		{"token without order, another request", "t1", empty, "o9", "B", false, ""},
		{"expired", "t1", short, "o3", "A", false, ""},
		{"malformed", "t1", "x:*", "o1", "A", false, ""},
		{"unknown", "t1", "00000000000000000000000000000000", "o1", "A", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			issuedFor, ok, err := c.ClaimToken(ctx, tt.tenant, tt.token, tt.order, tt.binder)
			if err != nil || ok != tt.wantOK || issuedFor != tt.wantIssuedFor {
				t.Fatalf("ClaimToken = %q %v %v, want %q %v", issuedFor, ok, err, tt.wantIssuedFor, tt.wantOK)
			}
		})
	}
	if _, _, err := c.ClaimToken(ctx, "t1", tok, "o1", ""); err == nil {
		t.Fatal("a claim without a binder was accepted")
	}
}

func TestToken_Release(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	tok, err := c.IssueToken(ctx, "t1", "o1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	key := c.Prefix() + "token:t1:" + tok
	claim := func(binder string) bool {
		t.Helper()
		_, ok, err := c.ClaimToken(ctx, "t1", tok, "o1", binder)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	release := func(binder string) bool {
		t.Helper()
		ok, err := c.ReleaseToken(ctx, "t1", tok, binder)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	steps := []struct {
		name string
		do   func() bool
		want bool
	}{
		{"releasing an unclaimed token does nothing", func() bool { return release("A") }, false},
		{"A claims", func() bool { return claim("A") }, true},
		{"B cannot release A's claim", func() bool { return release("B") }, false},
		{"so B still cannot claim", func() bool { return claim("B") }, false},
		{"A releases", func() bool { return release("A") }, true},
		{"releasing twice does nothing", func() bool { return release("A") }, false},
		{"B claims the released token", func() bool { return claim("B") }, true},
		{"A's retry is refused now", func() bool { return claim("A") }, false},
		{"A's late release leaves B's claim", func() bool { return release("A") }, false},
		{"B's retry still passes", func() bool { return claim("B") }, true},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if got := s.do(); got != s.want {
				t.Fatalf("got %v, want %v", got, s.want)
			}
		})
	}
	ttl, err := c.Redis().PTTL(ctx, key).Result()
	if err != nil || ttl <= 0 || ttl > time.Minute {
		t.Fatalf("TTL after claims and releases = %v %v, want the issued minute kept", ttl, err)
	}
	if ok, err := c.ReleaseToken(ctx, "t1", "00000000000000000000000000000000", "A"); err != nil || ok {
		t.Fatalf("release of an unknown token: %v %v", ok, err)
	}
}

func TestToken_ConcurrentClaimers(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	const n = 100
	t.Run("different binders: exactly one wins", func(t *testing.T) {
		tok, err := c.IssueToken(ctx, "t1", "o1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		var won, lost atomic.Int32
		testenv.Parallel(n, func(i int) {
			order, ok, err := c.ClaimToken(ctx, "t1", tok, "o1", fmt.Sprintf("request-%d", i))
			switch {
			case err != nil:
				t.Errorf("claimer %d: %v", i, err)
			case ok && order == "o1":
				won.Add(1)
			case ok:
				t.Errorf("claimer %d got order %q", i, order)
			default:
				lost.Add(1)
			}
		})
		t.Logf("%d concurrent claimers of one token: succeeded=%d refused=%d", n, won.Load(), lost.Load())
		if won.Load() != 1 || lost.Load() != n-1 {
			t.Fatal("want exactly one claimer to succeed")
		}
	})
	t.Run("one binder: every retry passes", func(t *testing.T) {
		tok, err := c.IssueToken(ctx, "t1", "o1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		var won atomic.Int32
		testenv.Parallel(n, func(i int) {
			if _, ok, err := c.ClaimToken(ctx, "t1", tok, "o1", "same-request"); err != nil {
				t.Errorf("claimer %d: %v", i, err)
			} else if ok {
				won.Add(1)
			}
		})
		if won.Load() != n {
			t.Fatalf("%d of %d claims by one request passed, want all", won.Load(), n)
		}
		if _, ok, _ := c.ClaimToken(ctx, "t1", tok, "o1", "another-request"); ok {
			t.Fatal("another request claimed a bound token")
		}
	})
}

func TestLock_MutualExclusion(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	const (
		workers = 20
		rounds  = 5
	)
	var (
		holders, maxHolders atomic.Int32
		counter             int // read, sleep, write: a lost increment means two holders overlapped
		acquired, busy      atomic.Int32
	)
	testenv.Parallel(workers, func(i int) {
		for range rounds {
			l, err := c.AcquireOrWait(ctx, "payment:t1:o1", 5*time.Second, 5*time.Second)
			if errors.Is(err, redis.ErrLockBusy) {
				busy.Add(1)
				continue
			}
			if err != nil {
				t.Errorf("worker %d: %v", i, err)
				return
			}
			acquired.Add(1)
			h := holders.Add(1)
			for {
				m := maxHolders.Load()
				if h <= m || maxHolders.CompareAndSwap(m, h) {
					break
				}
			}
			v := counter
			time.Sleep(time.Millisecond)
			counter = v + 1
			holders.Add(-1)
			if ok, err := l.Release(ctx); err != nil || !ok {
				t.Errorf("worker %d: release = %v %v", i, ok, err)
			}
		}
	})
	t.Logf("%d workers x %d rounds: acquired=%d busy=%d counter=%d max simultaneous holders=%d",
		workers, rounds, acquired.Load(), busy.Load(), counter, maxHolders.Load())
	if maxHolders.Load() != 1 || counter != int(acquired.Load()) || acquired.Load() != workers*rounds {
		t.Fatal("the lock was held by two owners at once, or an increment was lost")
	}
}

func TestLock_OwnershipAndExpiry(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()

	a, ok, err := c.TryLock(ctx, "k", 150*time.Millisecond)
	if err != nil || !ok {
		t.Fatalf("first TryLock: %v %v", ok, err)
	}
	if _, ok, _ := c.TryLock(ctx, "k", time.Second); ok {
		t.Fatal("second owner got a held lock")
	}
	time.Sleep(250 * time.Millisecond) // a's lock expires
	b, ok, err := c.TryLock(ctx, "k", time.Minute)
	if err != nil || !ok {
		t.Fatalf("TryLock after expiry: %v %v", ok, err)
	}
	if released, err := a.Release(ctx); err != nil || released {
		t.Fatalf("the expired owner released the new owner's lock: %v %v", released, err)
	}
	if extended, _ := a.Extend(ctx, time.Minute); extended {
		t.Fatal("the expired owner extended the new owner's lock")
	}
	if _, ok, _ := c.TryLock(ctx, "k", time.Second); ok {
		t.Fatal("the lock was free after a non-owner's release")
	}
	if extended, err := b.Extend(ctx, time.Minute); err != nil || !extended {
		t.Fatalf("owner extend: %v %v", extended, err)
	}
	if released, err := b.Release(ctx); err != nil || !released {
		t.Fatalf("owner release: %v %v", released, err)
	}
	if released, _ := b.Release(ctx); released {
		t.Fatal("released twice")
	}
	if _, ok, _ := c.TryLock(ctx, "k", time.Second); !ok {
		t.Fatal("lock not free after the owner released it")
	}
}

func TestLock_AcquireOrWait(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	held, ok, err := c.TryLock(ctx, "busy", time.Minute)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}

	start := time.Now()
	l, err := c.AcquireOrWait(ctx, "busy", time.Second, 200*time.Millisecond)
	waited := time.Since(start)
	t.Logf("AcquireOrWait on a held lock returned %v after %v", err, waited.Round(time.Millisecond))
	if l != nil || !errors.Is(err, redis.ErrLockBusy) || payment.ErrorCode(err) != payment.EINFLIGHT {
		t.Fatalf("got %v %v, want ErrLockBusy", l, err)
	}
	if waited < 200*time.Millisecond || waited > time.Second {
		t.Fatalf("waited %v, want about 200ms", waited)
	}

	// Released during the wait: the waiter gets it.
	go func() {
		time.Sleep(100 * time.Millisecond)
		_, _ = held.Release(ctx)
	}()
	start = time.Now()
	l, err = c.AcquireOrWait(ctx, "busy", time.Second, 2*time.Second)
	if err != nil || l == nil {
		t.Fatalf("AcquireOrWait after release: %v", err)
	}
	t.Logf("AcquireOrWait got the lock released by its holder after %v", time.Since(start).Round(time.Millisecond))
	_, _ = l.Release(ctx)

	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, ok, _ := c.TryLock(ctx, "busy", time.Minute); !ok {
		t.Fatal("relock")
	}
	if _, err := c.AcquireOrWait(cctx, "busy", time.Second, 5*time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled wait: %v", err)
	}
}

func TestOrderLocker(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	l := redis.OrderLocker{Client: c, TTL: time.Minute, Wait: 100 * time.Millisecond}

	release, ok, err := l.LockOrder(ctx, "t1", "o1")
	if err != nil || !ok {
		t.Fatalf("first LockOrder: acquired=%v err=%v", ok, err)
	}
	// Another order of the same tenant, and the same order id of another tenant, are
	// different locks.
	for _, k := range [][2]string{{"t1", "o2"}, {"t2", "o1"}} {
		rel, ok, err := l.LockOrder(ctx, k[0], k[1])
		if err != nil || !ok {
			t.Fatalf("LockOrder(%s, %s): acquired=%v err=%v", k[0], k[1], ok, err)
		}
		rel(ctx)
	}

	start := time.Now()
	_, ok, err = l.LockOrder(ctx, "t1", "o1")
	waited := time.Since(start)
	if err != nil || ok {
		t.Fatalf("contended LockOrder: acquired=%v err=%v, want acquired=false and no error", ok, err)
	}
	if waited < l.Wait {
		t.Fatalf("contended LockOrder returned after %v, want the short wait of %v first", waited, l.Wait)
	}

	release(ctx)
	rel, ok, err := l.LockOrder(ctx, "t1", "o1")
	if err != nil || !ok {
		t.Fatalf("LockOrder after release: acquired=%v err=%v", ok, err)
	}
	rel(ctx)

	opt, err := redis.Options("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	down := goredis.NewClient(opt)
	defer down.Close()
	dl := redis.OrderLocker{Client: redis.New(down, "x:"), TTL: time.Minute, Wait: 100 * time.Millisecond}
	if _, ok, err := dl.LockOrder(ctx, "t1", "o1"); err == nil || ok {
		t.Fatalf("LockOrder with Redis down: acquired=%v err=%v, want an error", ok, err)
	}
}

func TestIdempotentResponseCache(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	if _, found, err := c.CachedIdempotentResponse(ctx, "t1", "k1"); err != nil || found {
		t.Fatalf("miss: %v %v", found, err)
	}
	body := []byte(`{"payment_no":"p1"}` + "\x00\xff")
	if err := c.CacheIdempotentResponse(ctx, "t1", "k1", "fp", 201, body, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := c.CacheIdempotentResponse(ctx, "t1", "short", "fp", 200, nil, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	rec, found, err := c.CachedIdempotentResponse(ctx, "t1", "k1")
	if err != nil || !found {
		t.Fatalf("hit: %v %v", found, err)
	}
	if rec.Fingerprint != "fp" || rec.ResponseStatus != 201 || string(rec.ResponseBody) != string(body) ||
		rec.State != payment.IdempotencyCompleted || rec.TenantID != "t1" || rec.Key != "k1" {
		t.Fatalf("record = %+v", rec)
	}
	if _, found, _ := c.CachedIdempotentResponse(ctx, "t2", "k1"); found {
		t.Fatal("another tenant sees the response")
	}
	time.Sleep(200 * time.Millisecond)
	if _, found, _ := c.CachedIdempotentResponse(ctx, "t1", "short"); found {
		t.Fatal("expired entry still found")
	}
}

func TestPrefixIsolation(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	a := redis.New(rdb, prefix+"a:")
	b := redis.New(rdb, prefix+"b:")
	ctx := context.Background()
	if _, ok, err := a.TryLock(ctx, "k", time.Minute); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if _, ok, err := b.TryLock(ctx, "k", time.Minute); err != nil || !ok {
		t.Fatal("prefixes are not isolated", ok, err)
	}
	keys, err := testenv.RedisKeys(ctx, rdb, prefix+"*")
	if err != nil || len(keys) != 2 {
		t.Fatalf("keys under the test prefix: %v %v", keys, err)
	}
}

// TestUnavailableFailsFast points clients at a closed port and at a server that accepts
// connections but never answers: every helper must return an error quickly instead of
// hanging, so that callers fall through to MySQL.
func TestUnavailableFailsFast(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	}()

	for _, addr := range []string{"127.0.0.1:1", silent.Addr().String()} {
		t.Run(addr, func(t *testing.T) {
			opt, err := redis.Options(addr)
			if err != nil {
				t.Fatal(err)
			}
			rdb := goredis.NewClient(opt)
			defer rdb.Close()
			c := redis.New(rdb, "paykit_t_down:")
			ctx := context.Background()
			if _, err := redis.Open(ctx, addr); err == nil {
				t.Fatal("Open succeeded")
			}

			calls := []struct {
				name string
				do   func() error
			}{
				{"IssueToken", func() error { _, err := c.IssueToken(ctx, "t1", "o1", time.Minute); return err }},
				{"ClaimToken", func() error {
					_, _, err := c.ClaimToken(ctx, "t1", "00000000000000000000000000000000", "o1", "b")
					return err
				}},
				{"ReleaseToken", func() error {
					_, err := c.ReleaseToken(ctx, "t1", "00000000000000000000000000000000", "b")
					return err
				}},
				{"TryLock", func() error { _, _, err := c.TryLock(ctx, "k", time.Second); return err }},
				{"AcquireOrWait", func() error { _, err := c.AcquireOrWait(ctx, "k", time.Second, time.Second); return err }},
				{"CacheIdempotentResponse", func() error {
					return c.CacheIdempotentResponse(ctx, "t1", "k", "fp", 200, nil, time.Minute)
				}},
				{"CachedIdempotentResponse", func() error { _, _, err := c.CachedIdempotentResponse(ctx, "t1", "k"); return err }},
			}
			for _, call := range calls {
				start := time.Now()
				err := call.do()
				took := time.Since(start)
				t.Logf("%s: %v after %v", call.name, err, took.Round(time.Millisecond))
				if err == nil || errors.Is(err, redis.ErrLockBusy) {
					t.Errorf("%s: err = %v, want a connection error", call.name, err)
				}
				if took > 2500*time.Millisecond {
					t.Errorf("%s took %v, want a prompt failure", call.name, took)
				}
			}
		})
	}
}
