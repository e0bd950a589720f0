package alipaysim

import (
	"fmt"
	"sort"
	"time"
)

// Throttle is Alipay's limit on the frequency of an app's calls: past Rate calls a second
// (with bursts of up to Burst), a call is answered code 40005 (调用频次超限, "Call
// Limited") without being carried out. Each app has its own limit. A zero Rate is no
// limit. Without AppID the throttle is every app's that has none of its own; with
// AppID it is that app's own, and leaves the other apps as they are.
type Throttle struct {
	AppID string  `json:"app_id,omitempty"`
	Rate  float64 `json:"rate"`
	Burst int     `json:"burst"`
}

// SetThrottle replaces a throttle and forgets the calls counted under it so far. Without
// AppID it replaces the throttle of every app that has none of its own; with AppID it
// sets that app's own (a zero Rate lifts it: the app is then under the all-apps
// throttle again). An AppID the simulator does not serve is an error.
func (s *Simulator) SetThrottle(t Throttle) error {
	if t.Rate < 0 || t.Burst < 0 {
		return fmt.Errorf("alipaysim: throttle rate and burst must not be negative")
	}
	if t.AppID != "" && s.app(t.AppID) == nil {
		return fmt.Errorf("alipaysim: throttle: no app %s", t.AppID)
	}
	if t.Rate > 0 && t.Burst == 0 {
		t.Burst = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.throttleTAT == nil {
		s.throttleTAT, s.throttled = map[string]time.Time{}, map[string]int{}
	}
	if t.AppID == "" {
		s.setAllAppsThrottle(t)
		return nil
	}
	if s.appThrottles == nil {
		s.appThrottles = map[string]Throttle{}
	}
	if t.Rate == 0 {
		delete(s.appThrottles, t.AppID)
	} else {
		s.appThrottles[t.AppID] = t
	}
	delete(s.throttleTAT, t.AppID)
	delete(s.throttled, t.AppID)
	return nil
}

// setAllAppsThrottle replaces the all-apps throttle, and forgets the calls counted under
// it: the apps with a throttle of their own keep theirs. The caller holds s.mu.
func (s *Simulator) setAllAppsThrottle(t Throttle) {
	s.throttle = t
	for app := range s.throttleTAT {
		if _, own := s.appThrottles[app]; !own {
			delete(s.throttleTAT, app)
		}
	}
	for app := range s.throttled {
		if _, own := s.appThrottles[app]; !own {
			delete(s.throttled, app)
		}
	}
}

// appThrottleList is the apps' own throttles, by app_id; the caller holds s.mu.
func (s *Simulator) appThrottleList() []Throttle {
	out := make([]Throttle, 0, len(s.appThrottles))
	for _, t := range s.appThrottles {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AppID < out[j].AppID })
	return out
}

// throttledCounts is the calls answered 40005 by app, and in all; the caller holds s.mu.
func (s *Simulator) throttledCounts() (map[string]int, int) {
	byApp, total := make(map[string]int, len(s.throttled)), 0
	for app, n := range s.throttled {
		byApp[app] = n
		total += n
	}
	return byApp, total
}

// overLimit takes one call of appID from its throttle (a generic cell rate algorithm on
// the wall clock) and reports whether it is over the limit; a refused call is counted
// in throttled and not against the limit.
func (s *Simulator) overLimit(appID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	th, own := s.appThrottles[appID]
	if !own {
		th = s.throttle
	}
	if th.Rate <= 0 {
		return false
	}
	if s.throttleTAT == nil {
		s.throttleTAT, s.throttled = map[string]time.Time{}, map[string]int{}
	}
	now := time.Now()
	interval := time.Duration(float64(time.Second) / th.Rate)
	tat := s.throttleTAT[appID]
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(interval)
	if next.Sub(now) > time.Duration(th.Burst)*interval {
		s.throttled[appID]++
		return true
	}
	s.throttleTAT[appID] = next
	return false
}

// callLimited is Alipay's answer to a call over the app's frequency limit.
func callLimited() fields {
	return failure("40005", "Call Limited", "", "调用频次超限")
}
