package redis_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/paykit/paykit/alipay"
	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/alipaysim/simtest"
	"github.com/paykit/paykit/gateways"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/redis"
)

// limitedGateways are n gateways of the simulator's app, as n worker processes build
// them, each with its own CallLimiter on one Redis.
func limitedGateways(tb testing.TB, srvURL string, n int, rate float64, burst int, hold time.Duration) []payment.Gateway {
	tb.Helper()
	rdb, prefix := testenv.Redis(tb)
	keys := simtest.Keys(tb)
	out := make([]payment.Gateway, n)
	for i := range out {
		gw, err := alipay.New(alipay.Config{AppID: simtest.AppID, SellerID: simtest.SellerID,
			AppPrivateKeyPEM: keys.AppPrivateKeyPEM, AlipayPublicKeyPEM: keys.AlipayPublicKeyPEM,
			GatewayURL: srvURL + alipaysim.GatewayPath, NotifyURL: "http://127.0.0.1:1/callbacks/alipay", Timeout: 5 * time.Second})
		if err != nil {
			tb.Fatal(err)
		}
		l := &redis.CallLimiter{Client: redis.New(rdb, prefix), Rate: rate, Burst: burst, Hold: hold}
		out[i] = gateways.Limited(gw, simtest.AppID, l)
	}
	return out
}

// queryAll makes n trade queries spread over gws at once and returns how many Alipay
// answered over the app's call frequency.
func queryAll(tb testing.TB, gws []payment.Gateway, n int) (limited int) {
	tb.Helper()
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := gws[i%len(gws)].Query(ctx, fmt.Sprintf("P%020d", i))
			var ce *payment.ChannelError
			switch {
			case err == nil:
			case errors.As(err, &ce) && ce.Code == gateways.CodeCallLimited:
				mu.Lock()
				limited++
				mu.Unlock()
			default:
				tb.Errorf("query %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	return limited
}

// Two worker processes querying one app at once stay under the app's limit at Alipay
// when their shared limit is below it: the simulator, throttling the app at 20 calls a
// second in bursts of 10, answers none of 60 queries 40005 (the shared limit is 15 a
// second in bursts of 5), and the queries take as long as the shared
// rate of 15 a second says, not as long as one process's would.
func TestCallLimitIsSharedByProcesses(t *testing.T) {
	sim, srv := simtest.Start(t, nil)
	if err := sim.SetThrottle(alipaysim.Throttle{Rate: 20, Burst: 10}); err != nil {
		t.Fatal(err)
	}
	gws := limitedGateways(t, srv.URL, 2, 15, 5, time.Second)
	start := time.Now()
	if n := queryAll(t, gws, 60); n != 0 {
		t.Fatalf("%d queries answered 40005 under a shared limit below Alipay's", n)
	}
	took := time.Since(start)
	if th := sim.Faults().Throttled; th != 0 {
		t.Fatalf("the simulator throttled %d calls", th)
	}
	// 5 at once, then 55 at 15 a second: at least 3.6 s, with some slack for the clock.
	if took < 3300*time.Millisecond {
		t.Fatalf("60 queries took %s: the two processes did not share one limit of 15 a second", took)
	}
	t.Logf("60 queries from 2 processes at a shared 15/s: %s, none throttled", took.Round(time.Millisecond))
}

// When the shared limit is above what Alipay takes, Alipay's 40005 answers are seen: each
// refused call fails as a retryable channel error, and the app's calls are held in every
// process, so that the other process's next query waits out the hold instead of being
// refused too.
func TestAlipayThrottlingHoldsEveryProcess(t *testing.T) {
	sim, srv := simtest.Start(t, nil)
	if err := sim.SetThrottle(alipaysim.Throttle{Rate: 10, Burst: 2}); err != nil {
		t.Fatal(err)
	}
	gws := limitedGateways(t, srv.URL, 2, 1000, 1000, 700*time.Millisecond)
	var refused *payment.ChannelError
	for i := range 6 {
		_, err := gws[0].Query(context.Background(), fmt.Sprintf("P%020d", i))
		if errors.As(err, &refused) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if refused == nil || refused.Code != gateways.CodeCallLimited || !refused.Retryable {
		t.Fatalf("6 queries at once past a burst of 2: %v; want one refused with a retryable 40005", refused)
	}
	start := time.Now()
	if _, err := gws[1].Query(context.Background(), "P00000000000000000099"); err != nil {
		t.Fatalf("the other process's query after the hold: %v", err)
	}
	if waited := time.Since(start); waited < 500*time.Millisecond {
		t.Fatalf("the other process's query went out after %s, within the 700 ms hold", waited)
	}
}

// A call whose turn comes after its deadline is not made: it fails at once as a
// retryable channel error, and its retry comes later.
func TestCallPastItsDeadlineIsNotMade(t *testing.T) {
	_, srv := simtest.Start(t, nil)
	gw := limitedGateways(t, srv.URL, 1, 1, 1, time.Second)[0]
	if _, err := gw.Query(context.Background(), "P00000000000000000001"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := gw.Query(ctx, "P00000000000000000002")
	var ce *payment.ChannelError
	if !errors.As(err, &ce) || !ce.Retryable || ce.Code != "" {
		t.Fatalf("a query whose turn is in 1 s, with 200 ms left: %v; want a retryable channel error", err)
	}
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Fatalf("it waited %s before giving up", took)
	}
}

// countScripts counts the scripts a Redis client runs.
type countScripts struct{ n atomic.Int64 }

func (*countScripts) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (c *countScripts) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if n := cmd.Name(); n == "evalsha" || n == "eval" {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (*countScripts) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// A crowd of callers in one process (the reconciler queries 32 payments at once) asks
// Redis about once or twice per call it makes, not once per caller per turn: one caller
// per app at a time waits for the shared limit, the others queue in the process.
func TestCallLimitCrowdAsksRedisOncePerTurn(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	counter := &countScripts{}
	rdb.AddHook(counter)
	l := &redis.CallLimiter{Client: redis.New(rdb, prefix), Rate: 100, Burst: 1, Hold: time.Second}
	const callers, calls = 32, 96
	var wg sync.WaitGroup
	var made atomic.Int64
	start := time.Now()
	for range callers {
		wg.Go(func() {
			for made.Load() < calls {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				err := l.Take(ctx, "2021app")
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
				made.Add(1)
			}
		})
	}
	wg.Wait()
	took, n, asked := time.Since(start), made.Load(), counter.n.Load()
	if took < 900*time.Millisecond {
		t.Fatalf("%d calls at 100 a second took %s", n, took)
	}
	if asked > 3*n {
		t.Fatalf("%d calls asked Redis %d times: the waiting callers each ask again at every turn", n, asked)
	}
	t.Logf("%d callers, %d calls at 100/s in %s: %d scripts run (%.1f a call)", callers, n, took.Round(time.Millisecond), asked, float64(asked)/float64(n))
}

// hungRedis is a server that takes connections and commands and never answers: a Redis
// that hangs rather than refusing connections.
func hungRedis(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var conns sync.WaitGroup
	done := make(chan struct{})
	tb.Cleanup(func() { close(done); ln.Close(); conns.Wait() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() {
				go func() { <-done; c.Close() }()
				_, _ = io.Copy(io.Discard, c)
			})
		}
	}()
	return ln.Addr().String()
}

// A Redis that hangs costs the call limit a short bound now and then, not a timeout per
// call: the process falls back to its own limit of the app's rate, so that 16 callers
// make close to that rate of calls (a run's own query or close is not starved behind the
// reconciler's callers waiting out Redis's timeouts one at a time).
func TestCallLimitOnAHungRedisKeepsTheRate(t *testing.T) {
	opt, err := redis.Options(hungRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	const rate, callers = 20, 16
	l := &redis.CallLimiter{Client: redis.New(rdb, "hung:"), Rate: rate, Burst: 1, Hold: time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var made atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for {
				callCtx, callCancel := context.WithTimeout(ctx, 10*time.Second)
				err := l.Take(callCtx, "2021app")
				callCancel()
				if err != nil {
					return
				}
				made.Add(1)
			}
		})
	}
	wg.Wait()
	// 3 s at 20 a second is 60; a hung Redis may cost the first bound and a probe a second.
	if n := made.Load(); n < 40 {
		t.Fatalf("%d calls in 3 s at %d a second with Redis hung: want at least 40", n, rate)
	}
	t.Logf("%d calls in 3 s at %d a second with Redis hung", made.Load(), rate)
}

// A turn tried without waiting is the shared limit's: free once, then not free in another
// process until the interval has passed (and a refusal takes nothing), not free while
// Alipay's throttling holds the app, and an app's turns are its own. With Redis hung the
// process's own limit answers, after one short bound.
func TestCallLimitTryTake(t *testing.T) {
	ctx := context.Background()
	rdb, prefix := testenv.Redis(t)
	procs := [2]*redis.CallLimiter{}
	for i := range procs {
		procs[i] = &redis.CallLimiter{Client: redis.New(rdb, prefix), Rate: 2, Burst: 1, Hold: 2 * time.Second}
	}
	if wait, err := procs[0].TryTake(ctx, "2021A"); wait != 0 || err != nil {
		t.Fatalf("a free turn: %s, %v; want it taken", wait, err)
	}
	var wait time.Duration
	for range 2 {
		w, err := procs[1].TryTake(ctx, "2021A")
		if w <= 0 || w > 500*time.Millisecond || err != nil {
			t.Fatalf("the other process's turn right after: %s, %v; want up to 500 ms to wait", w, err)
		}
		wait = w
	}
	if w, err := procs[1].TryTake(ctx, "2021B"); w != 0 || err != nil {
		t.Fatalf("another app's turn: %s, %v; want it free", w, err)
	}
	procs[0].Throttled(ctx, "2021B")
	if w, err := procs[1].TryTake(ctx, "2021B"); w < 1500*time.Millisecond || err != nil {
		t.Fatalf("a turn of an app alipay throttled: %s, %v; want the 2 s hold", w, err)
	}
	time.Sleep(wait + 20*time.Millisecond)
	if w, err := procs[1].TryTake(ctx, "2021A"); w != 0 || err != nil {
		t.Fatalf("the turn after the wait: %s, %v; want it free (the refusals took nothing)", w, err)
	}

	opt, err := redis.Options(hungRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	hung := goredis.NewClient(opt)
	t.Cleanup(func() { hung.Close() })
	l := &redis.CallLimiter{Client: redis.New(hung, "hung:"), Rate: 1, Burst: 1, Hold: time.Second}
	start := time.Now()
	if w, err := l.TryTake(ctx, "2021A"); w != 0 || err != nil {
		t.Fatalf("a free turn with redis hung: %s, %v; want the process's own", w, err)
	}
	if w, err := l.TryTake(ctx, "2021A"); w <= 0 || err != nil {
		t.Fatalf("the next turn with redis hung: %s, %v; want a wait", w, err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("two turns with redis hung took %s", took)
	}
}
