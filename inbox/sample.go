package inbox

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Bounds on the evidence kept of unverified callbacks. The callback URL is open to
// anyone: each forged post is counted (paykit_alipay_callbacks_total{outcome="unverified"}
// and the bytes counter), but only a sample is stored as a row and logged as an error.
const (
	// unverifiedPerAppPerMinute is how many unverified callbacks naming one app_id (the
	// one the body claims, "" included) are kept a minute, and at once.
	unverifiedPerAppPerMinute = 20
	// unverifiedPerMinute is how many are kept a minute in all, whatever they claim, and
	// at once.
	unverifiedPerMinute = 100
	// sampledApps bounds the app_ids the sampler remembers; past it, those whose bucket
	// is full again (as good as forgotten) are dropped.
	sampledApps = 1000
)

// unverifiedSampler decides which unverified callbacks are kept: a token bucket in all
// and one per app_id the body claims, each refilled at its rate a minute with a burst of
// as many. It is per process: N API processes keep at most N times the bounds.
type unverifiedSampler struct {
	mu     sync.Mutex
	total  *rate.Limiter
	perApp map[string]*rate.Limiter
	// dropping allows the one line a minute that says callbacks are being dropped.
	dropping *rate.Limiter
}

func newUnverifiedSampler() *unverifiedSampler {
	return &unverifiedSampler{
		total:    rate.NewLimiter(rate.Every(time.Minute/unverifiedPerMinute), unverifiedPerMinute),
		perApp:   map[string]*rate.Limiter{},
		dropping: rate.NewLimiter(rate.Every(time.Minute), 1),
	}
}

// take reports whether an unverified callback naming appID is kept, and, for the first
// one dropped in a minute, that dropping has begun (to be logged once).
func (u *unverifiedSampler) take(appID string, now time.Time) (keep, firstDropped bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	app := u.perApp[appID]
	if u.total.TokensAt(now) < 1 || (app != nil && app.TokensAt(now) < 1) {
		return false, u.dropping.AllowN(now, 1)
	}
	if app == nil {
		u.forgetFull(now)
		app = rate.NewLimiter(rate.Every(time.Minute/unverifiedPerAppPerMinute), unverifiedPerAppPerMinute)
		u.perApp[appID] = app
	}
	u.total.AllowN(now, 1)
	app.AllowN(now, 1)
	return true, false
}

// forgetFull drops the app_ids whose bucket is full again once sampledApps are known.
func (u *unverifiedSampler) forgetFull(now time.Time) {
	if len(u.perApp) < sampledApps {
		return
	}
	for id, l := range u.perApp {
		if l.TokensAt(now) >= unverifiedPerAppPerMinute {
			delete(u.perApp, id)
		}
	}
}
