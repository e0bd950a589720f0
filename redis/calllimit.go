package redis

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	xrate "golang.org/x/time/rate"
)

// holdScript pushes a GCRA limit's theoretical arrival time (KEYS[1], as gcraScript keeps
// it) to at least ARGV[1] µs from now plus its burst (ARGV[2] µs), so that Allow refuses
// every request for ARGV[1] µs; it never pulls it back.
const holdScript = `local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local hold = now + tonumber(ARGV[1]) + tonumber(ARGV[2])
local tat = tonumber(redis.call("GET", KEYS[1]) or "0")
if hold > tat then
	redis.call("SET", KEYS[1], string.format("%.0f", hold), "PX", math.ceil((hold - now) / 1000) + 1)
end
return 1`

// CallLimiter spaces the calls every paykit process makes to one Alipay app on its own
// initiative (trade and refund queries, closes) to Rate a second, with bursts of Burst,
// on one GCRA limit per app in Redis; when Alipay answers that the app is over its call
// frequency, Throttled holds every process's calls to the app for Hold. With Redis
// unreachable, each process limits itself to Rate on its own (the limit is then per
// process, not shared).
type CallLimiter struct {
	Client *Client
	Rate   float64
	Burst  int
	Hold   time.Duration
	Logger *slog.Logger

	mu       sync.Mutex
	local    map[string]*xrate.Limiter
	turns    map[string]chan struct{} // per app: the one caller of this process asking Redis
	warnedAt time.Time                // the last "redis did not answer" warning: one every warnEvery
	// localUntil is when Redis is asked again after it did not answer: until then every
	// caller takes the process's own limit, without waiting for Redis or for a turn.
	localUntil time.Time
}

// redisBound is the longest one caller waits for Redis's answer about the limit; a Redis
// that hangs costs a caller that, once every localFor, and not a timeout per call.
const redisBound = 150 * time.Millisecond

// localFor is how long the process keeps to its own limit after Redis did not answer.
const localFor = time.Second

// callBudget is the time a call needs after its turn: a turn later than its deadline
// less this is not waited for, since the call would then time out after it was sent.
const callBudget = 2 * time.Second

// warnEvery spaces the warnings of a limit that Redis does not answer.
const warnEvery = 10 * time.Second

// Take waits until a call to appID may be made. It returns an error, without waiting,
// when the turn would come later than ctx's deadline less callBudget: the caller's call
// is then not made, and its retry comes later.
//
// Within a process, one caller per app at a time asks Redis and waits for its turn; the
// others queue behind it in the process. A crowd of callers (many runs' queries and
// closes at once) would otherwise all ask Redis, all be refused but one, and all ask again
// at the same moment: about as many Redis calls per call made as callers waiting. The
// reconciler does not wait here: it tries turns with TryTake.
//
// When Redis does not answer within redisBound (down, or hung), the caller and every
// caller for localFor after it take the process's own limit of Rate instead, without
// asking Redis or waiting for a turn: a hung Redis costs one caller a short bound once
// every localFor, not every caller a timeout in turn.
func (l *CallLimiter) Take(ctx context.Context, appID string) error {
	if l == nil || l.Rate <= 0 {
		return nil
	}
	if l.redisResting() {
		return l.localLimiter(appID).Wait(ctx)
	}
	turn := l.turn(appID)
	select {
	case turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	local, err := l.takeShared(ctx, appID)
	<-turn
	if local {
		return l.localLimiter(appID).Wait(ctx)
	}
	return err
}

// TryTake takes a turn of appID's limit if one is free now, and otherwise returns how
// long until the next, without waiting or queueing in the process: a caller serving
// several apps (the reconciler) serves another meanwhile. It asks Redis once; when Redis
// does not answer within redisBound, or did not less than localFor ago, it takes the
// process's own limit instead, as Take does.
func (l *CallLimiter) TryTake(ctx context.Context, appID string) (time.Duration, error) {
	if l == nil || l.Rate <= 0 {
		return 0, nil
	}
	if !l.redisResting() {
		askCtx, cancel := context.WithTimeout(ctx, redisBound)
		ok, wait, err := l.Client.Allow(askCtx, l.Rate, max(l.Burst, 1), "alipay-calls", appID)
		cancel()
		switch {
		case err == nil && ok:
			return 0, nil
		case err == nil:
			return max(wait, time.Millisecond), nil
		case ctx.Err() != nil:
			return 0, ctx.Err()
		}
		l.restRedis()
		l.warnRedis("alipay call limit: redis did not answer; limiting this process alone", appID, err)
	}
	now := time.Now()
	r := l.localLimiter(appID).ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, nil
	}
	return 0, nil
}

// takeShared waits for appID's turn on the shared limit, holding the process's turn of
// it; local says Redis did not answer, and the process's own limit is to be taken.
func (l *CallLimiter) takeShared(ctx context.Context, appID string) (local bool, err error) {
	burst := max(l.Burst, 1)
	for {
		if l.redisResting() {
			return true, nil
		}
		askCtx, cancel := context.WithTimeout(ctx, redisBound)
		ok, wait, err := l.Client.Allow(askCtx, l.Rate, burst, "alipay-calls", appID)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			l.restRedis()
			l.warnRedis("alipay call limit: redis did not answer; limiting this process alone", appID, err)
			return true, nil
		}
		if ok {
			return false, nil
		}
		if d, has := ctx.Deadline(); has && time.Until(d) < wait+callBudget {
			return false, fmt.Errorf("alipay app %s is over its call rate (%.1f a second): the next call is in %s, after this one's deadline", appID, l.Rate, wait.Round(time.Millisecond))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		case <-t.C:
		}
	}
}

// redisResting reports whether Redis did not answer less than localFor ago.
func (l *CallLimiter) redisResting() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Now().Before(l.localUntil)
}

func (l *CallLimiter) restRedis() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.localUntil = time.Now().Add(localFor)
}

// Throttled holds every process's calls to appID for Hold (1 s if unset): Alipay has
// just answered that the app is over its call frequency.
func (l *CallLimiter) Throttled(ctx context.Context, appID string) {
	if l == nil || l.Rate <= 0 {
		return
	}
	hold := l.Hold
	if hold <= 0 {
		hold = time.Second
	}
	l.log().Warn("alipay answered that the app is over its call frequency; holding its calls", "app_id", appID, "hold", hold.String())
	interval := math.Max(1, math.Round(1e6/l.Rate))
	drainLocal := func() {
		lim := l.localLimiter(appID)
		_ = lim.ReserveN(time.Now(), lim.Burst())
	}
	if l.redisResting() {
		drainLocal()
		return
	}
	// The answer may come at the caller's deadline: the hold must still reach Redis.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := l.Client.hold.Run(ctx, l.Client.rdb, []string{l.Client.key("limit", "alipay-calls", appID)},
		hold.Microseconds(), interval*float64(max(l.Burst, 1))).Err(); err != nil {
		// The process's own limiter is drained instead: its next calls come at Rate.
		l.restRedis()
		l.warnRedis("alipay call limit: redis did not take the hold; slowing this process alone", appID, err)
		drainLocal()
	}
}

// warnRedis logs that Redis did not answer, at most once every warnEvery.
func (l *CallLimiter) warnRedis(msg, appID string, err error) {
	l.mu.Lock()
	now := time.Now()
	quiet := now.Sub(l.warnedAt) < warnEvery
	if !quiet {
		l.warnedAt = now
	}
	l.mu.Unlock()
	if !quiet {
		l.log().Warn(msg, "app_id", appID, "err", err)
	}
}

// turn is the process's one-caller-at-a-time gate of appID's limit.
func (l *CallLimiter) turn(appID string) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.turns == nil {
		l.turns = map[string]chan struct{}{}
	}
	t, ok := l.turns[appID]
	if !ok {
		t = make(chan struct{}, 1)
		l.turns[appID] = t
	}
	return t
}

func (l *CallLimiter) localLimiter(appID string) *xrate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.local == nil {
		l.local = map[string]*xrate.Limiter{}
	}
	lim, ok := l.local[appID]
	if !ok {
		lim = xrate.NewLimiter(xrate.Limit(l.Rate), max(l.Burst, 1))
		l.local[appID] = lim
	}
	return lim
}

func (l *CallLimiter) log() *slog.Logger {
	if l.Logger != nil {
		return l.Logger
	}
	return slog.New(slog.DiscardHandler)
}
