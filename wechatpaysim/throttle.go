package wechatpaysim

import (
	"fmt"
	"time"
)

// SetThrottle replaces the per-merchant frequency limit and forgets the calls counted
// so far.
func (s *Simulator) SetThrottle(t Throttle) error {
	if t.Rate < 0 || t.Burst < 0 {
		return fmt.Errorf("wechatpaysim: throttle rate and burst must not be negative")
	}
	if t.Rate > 0 && t.Burst == 0 {
		t.Burst = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.throttle, s.throttleTAT, s.throttled = t, map[string]time.Time{}, 0
	return nil
}

// overLimit takes one call of mchid from the throttle (a generic cell rate algorithm on
// the simulator's clock) and reports whether it is over the limit; a refused call is
// counted and does not use up the limit.
func (s *Simulator) overLimit(mchid string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.throttle.Rate <= 0 {
		return false
	}
	now := s.now()
	interval := time.Duration(float64(time.Second) / s.throttle.Rate)
	tat := s.throttleTAT[mchid]
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(interval)
	if next.Sub(now) > time.Duration(s.throttle.Burst)*interval {
		s.throttled++
		return true
	}
	s.throttleTAT[mchid] = next
	return false
}
