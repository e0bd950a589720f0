package alipaysim

import (
	"fmt"
	"time"
)

// Throttle is Alipay's limit on the frequency of an app's calls: past Rate calls a second
// (with bursts of up to Burst), a call is answered code 40005 (调用频次超限, "Call
// Limited") without being carried out. Each app has its own limit. A zero Rate is no
// limit.
type Throttle struct {
	Rate  float64 `json:"rate"`
	Burst int     `json:"burst"`
}

// SetThrottle replaces the throttle and forgets the calls counted so far.
func (s *Simulator) SetThrottle(t Throttle) error {
	if t.Rate < 0 || t.Burst < 0 {
		return fmt.Errorf("alipaysim: throttle rate and burst must not be negative")
	}
	if t.Rate > 0 && t.Burst == 0 {
		t.Burst = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.throttle, s.throttleTAT, s.throttled = t, map[string]time.Time{}, 0
	return nil
}

// overLimit takes one call of appID from the throttle (a generic cell rate algorithm on
// the wall clock) and reports whether it is over the limit; a refused call is counted
// in throttled and not against the limit.
func (s *Simulator) overLimit(appID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.throttle.Rate <= 0 {
		return false
	}
	now := time.Now()
	interval := time.Duration(float64(time.Second) / s.throttle.Rate)
	tat := s.throttleTAT[appID]
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(interval)
	if next.Sub(now) > time.Duration(s.throttle.Burst)*interval {
		s.throttled++
		return true
	}
	s.throttleTAT[appID] = next
	return false
}

// callLimited is Alipay's answer to a call over the app's frequency limit.
func callLimited() fields {
	return failure("40005", "Call Limited", "", "调用频次超限")
}
