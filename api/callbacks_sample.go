package api

import (
	"sync"
	"time"
)

// Bounds on the evidence kept of unverified callbacks. The callback URL is open to
// anyone: each forged post is counted (paykit_alipay_callbacks_total{outcome="unverified"}
// and the bytes counter), but only a sample is stored as a row and logged as an error.
const (
	// unverifiedPerAppPerMinute is how many unverified callbacks naming one app_id (the
	// one the body claims, "" included) are kept each minute.
	unverifiedPerAppPerMinute = 20
	// unverifiedPerMinute is how many are kept each minute in all, whatever they claim.
	unverifiedPerMinute = 100
)

// unverifiedSampler decides which unverified callbacks are kept. It is per process: N
// API processes keep at most N times the bounds.
type unverifiedSampler struct {
	mu      sync.Mutex
	minute  int64
	total   int
	perApp  map[string]int
	dropped int
}

// take reports whether an unverified callback naming appID is kept, and, for the first
// one dropped in a minute, that dropping has begun (to be logged once).
func (u *unverifiedSampler) take(appID string, now time.Time) (keep, firstDropped bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if m := now.Unix() / 60; m != u.minute || u.perApp == nil {
		u.minute, u.total, u.dropped, u.perApp = m, 0, 0, map[string]int{}
	}
	if u.total >= unverifiedPerMinute || u.perApp[appID] >= unverifiedPerAppPerMinute {
		u.dropped++
		return false, u.dropped == 1
	}
	u.total++
	u.perApp[appID]++ // at most unverifiedPerMinute keys
	return true, false
}
