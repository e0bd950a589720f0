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

	mu    sync.Mutex
	local map[string]*xrate.Limiter
}

// Take waits until a call to appID may be made. It returns an error, without waiting,
// when the wait would outlast ctx: the caller's call is then not made, and its retry
// comes later.
func (l *CallLimiter) Take(ctx context.Context, appID string) error {
	if l == nil || l.Rate <= 0 {
		return nil
	}
	burst := max(l.Burst, 1)
	for {
		ok, wait, err := l.Client.Allow(ctx, l.Rate, burst, "alipay-calls", appID)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			l.log().Warn("alipay call limit: redis did not answer; limiting this process alone", "app_id", appID, "err", err)
			return l.localLimiter(appID).Wait(ctx)
		}
		if ok {
			return nil
		}
		if d, has := ctx.Deadline(); has && time.Until(d) < wait {
			return fmt.Errorf("alipay app %s is over its call rate (%.1f a second): the next call is in %s, after this one's deadline", appID, l.Rate, wait.Round(time.Millisecond))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
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
	if err := l.Client.hold.Run(ctx, l.Client.rdb, []string{l.Client.key("limit", "alipay-calls", appID)},
		hold.Microseconds(), interval*float64(max(l.Burst, 1))).Err(); err != nil {
		// The process's own limiter is drained instead: its next calls come at Rate.
		l.log().Warn("alipay call limit: redis did not take the hold; slowing this process alone", "app_id", appID, "err", err)
		lim := l.localLimiter(appID)
		_ = lim.ReserveN(time.Now(), lim.Burst())
	}
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
