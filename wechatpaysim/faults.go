package wechatpaysim

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

// API fault modes.
const (
	// FaultSystemError answers 500 SYSTEM_ERROR (系统错误). With AfterProcessing the call
	// is carried out first, so its outcome is unknown to the client; a retry with the
	// same parameters then answers as a repeat.
	FaultSystemError = "system_error"
	// FaultHTTPError answers a bare HTTP error (Status, default 502) with an HTML body,
	// as a load balancer would.
	FaultHTTPError = "http_error"
	// FaultHang holds the request until the client gives up (or HangTimeout passes).
	FaultHang = "hang"
	// FaultBadSignature answers normally but with a signature over other bytes, as a
	// forged or corrupted answer would carry.
	FaultBadSignature = "bad_signature"
	// FaultSignProbe answers normally with a WECHATPAY/SIGNTEST/ probe signature.
	FaultSignProbe = "sign_probe"
	// FaultFrequencyLimited answers 429 FREQUENCY_LIMITED. With AfterProcessing the call
	// is carried out first: a refund answered so may have been accepted ("该笔退款为受理中").
	FaultFrequencyLimited = "frequency_limited"
)

// APIFault makes the next Count v3 calls (whose path starts with Path, if set) fail in
// Mode.
type APIFault struct {
	Mode            string `json:"mode"`
	Count           int    `json:"count,omitempty"`
	Path            string `json:"path,omitempty"`
	Status          int    `json:"status,omitempty"`
	AfterProcessing bool   `json:"after_processing,omitempty"`
}

// FaultState is the current fault configuration, as returned by GET /_sim/faults.
type FaultState struct {
	API           []APIFault         `json:"api"`
	Notifications NotificationFaults `json:"notifications"`
	Throttle      Throttle           `json:"throttle"`
	Refunds       RefundFaults       `json:"refunds"`
	// LateBills are the bill dates held back (true) or released early (false).
	LateBills map[string]bool `json:"late_bills"`
	// Throttled counts the calls answered 429 since the throttle was last set.
	Throttled int `json:"throttled"`
}

// InjectFault queues an API fault; faults are consumed in the order injected.
func (s *Simulator) InjectFault(f APIFault) error {
	switch f.Mode {
	case FaultSystemError, FaultHang, FaultBadSignature, FaultSignProbe, FaultFrequencyLimited:
	case FaultHTTPError:
		if f.Status == 0 {
			f.Status = http.StatusBadGateway
		}
		if f.Status < 400 || f.Status > 599 {
			return fmt.Errorf("wechatpaysim: http_error status %d is not an HTTP error", f.Status)
		}
	default:
		return fmt.Errorf("wechatpaysim: unknown fault mode %q", f.Mode)
	}
	if f.Count <= 0 {
		f.Count = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f)
	return nil
}

// Faults returns the current fault configuration.
func (s *Simulator) Faults() FaultState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return FaultState{
		API: slices.Clone(s.faults), Notifications: s.notifyFault, Throttle: s.throttle, Throttled: s.throttled,
		Refunds: s.refundFault, LateBills: maps.Clone(s.billHolds),
	}
}

// ResetFaults clears every fault, the throttle, the refund faults and the late (or
// released) bills.
func (s *Simulator) ResetFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
	s.notifyFault = NotificationFaults{}
	s.refundFault = RefundFaults{}
	s.billHolds = map[string]bool{}
	s.throttle, s.throttleTAT, s.throttled = Throttle{}, map[string]time.Time{}, 0
}

// takeFault consumes one use of the first fault matching path.
func (s *Simulator) takeFault(path string) (APIFault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.faults {
		f := &s.faults[i]
		if f.Path != "" && !strings.HasPrefix(path, f.Path) {
			continue
		}
		taken := *f
		taken.Count = 1
		f.Count--
		if f.Count <= 0 {
			s.faults = slices.Delete(s.faults, i, i+1)
		}
		return taken, true
	}
	return APIFault{}, false
}

func (s *Simulator) applyFault(w http.ResponseWriter, r *http.Request, c *call, f APIFault) {
	switch f.Mode {
	case FaultSystemError:
		s.writeError(w, c, systemError())
	case FaultFrequencyLimited:
		s.writeError(w, c, frequencyLimitedAt(r.URL.Path))
	case FaultHTTPError:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(f.Status)
		_, _ = fmt.Fprintf(w, "<html><body><h1>%d %s</h1></body></html>", f.Status, http.StatusText(f.Status))
	case FaultHang:
		t := time.NewTimer(s.cfg.HangTimeout)
		defer t.Stop()
		select {
		case <-r.Context().Done():
		case <-s.done:
		case <-t.C:
		}
		http.Error(w, "gateway timeout", http.StatusGatewayTimeout)
	}
}
