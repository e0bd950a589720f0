package alipaysim

import (
	"fmt"
	"net/http"
	"time"
)

// Gateway fault modes.
const (
	// FaultSystemError answers a signed 40004 ACQ.SYSTEM_ERROR.
	FaultSystemError = "system_error"
	// FaultHTTPError answers a bare HTTP error (Status, default 500) with an HTML body, as
	// a load balancer would.
	FaultHTTPError = "http_error"
	// FaultHang holds the request until the client gives up (or HangTimeout passes).
	FaultHang = "hang"
)

// GatewayFault makes the next Count gateway calls (of Method, if set) fail in Mode.
// With AfterProcessing the call is carried out first and only its answer is lost or
// replaced, as when Alipay commits a refund and the response never arrives.
type GatewayFault struct {
	Mode            string `json:"mode"`
	Count           int    `json:"count,omitempty"`
	Method          string `json:"method,omitempty"`
	Status          int    `json:"status,omitempty"`
	AfterProcessing bool   `json:"after_processing,omitempty"`
}

// NotificationFaults disturbs notification delivery.
type NotificationFaults struct {
	// DropNext silently drops the next N notifications: no delivery attempt at all.
	DropNext int `json:"drop_next"`
	// Copies delivers every attempt as this many concurrent identical POSTs (>= 1).
	Copies int `json:"copies"`
	// DelayMS delays the first attempt of each new notification (real milliseconds).
	DelayMS int64 `json:"delay_ms"`
	// Hold queues new notifications until ReleaseNotifications, to reorder them.
	Hold bool `json:"hold"`
}

// RefundFaults changes how new refunds are carried out, as Alipay sometimes does.
type RefundFaults struct {
	// ProcessingNext answers the next N new refund requests success with fund_change "N"
	// while the refund is still processing: no money has moved yet, a replay answers "N"
	// too, and the refund query does not know it. After SettleMS (real milliseconds) it
	// succeeds (the money moves, the refund notification goes out), or with Fail it fails:
	// it is forgotten, and a later request with its out_request_no is a new refund.
	ProcessingNext int   `json:"processing_next"`
	SettleMS       int64 `json:"settle_ms"`
	Fail           bool  `json:"fail"`
	// QueryLagMS makes alipay.trade.fastpay.refund.query blind to a refund for this long
	// (real milliseconds) after it succeeded, as Alipay's query lags the refund itself.
	QueryLagMS int64 `json:"query_lag_ms"`
}

// FaultState is the current fault configuration, as returned by GET /_sim/faults.
type FaultState struct {
	Gateway       []GatewayFault     `json:"gateway"`
	Notifications NotificationFaults `json:"notifications"`
	Refunds       RefundFaults       `json:"refunds"`
	Held          int                `json:"held"`
	// Throttle is the all-apps throttle, AppThrottles the apps' own (by app_id), each in
	// place of the all-apps one for its app.
	Throttle     Throttle   `json:"throttle"`
	AppThrottles []Throttle `json:"app_throttles"`
	// Throttled counts the calls answered 40005 since the throttle was last set, and
	// ThrottledByApp the same by app_id (an app's own throttle set again restarts its count).
	Throttled      int            `json:"throttled"`
	ThrottledByApp map[string]int `json:"throttled_by_app"`
}

// SetRefundFaults replaces the refund fault settings.
func (s *Simulator) SetRefundFaults(f RefundFaults) error {
	if f.ProcessingNext < 0 || f.SettleMS < 0 || f.QueryLagMS < 0 {
		return fmt.Errorf("alipaysim: refund faults must not be negative")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refundFaults = f
	return nil
}

// InjectGatewayFault queues a gateway fault. Faults are consumed in the order injected.
func (s *Simulator) InjectGatewayFault(f GatewayFault) error {
	switch f.Mode {
	case FaultSystemError, FaultHang:
	case FaultHTTPError:
		if f.Status == 0 {
			f.Status = http.StatusInternalServerError
		}
		if f.Status < 400 || f.Status > 599 {
			return fmt.Errorf("alipaysim: http_error status %d is not an HTTP error", f.Status)
		}
	default:
		return fmt.Errorf("alipaysim: unknown fault mode %q", f.Mode)
	}
	if f.Count <= 0 {
		f.Count = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gatewayFaults = append(s.gatewayFaults, f)
	return nil
}

// SetNotificationFaults replaces the notification fault settings.
func (s *Simulator) SetNotificationFaults(f NotificationFaults) {
	if f.Copies < 1 {
		f.Copies = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notifyFaults = f
}

// Faults returns the current fault configuration.
func (s *Simulator) Faults() FaultState {
	s.mu.Lock()
	defer s.mu.Unlock()
	byApp, throttled := s.throttledCounts()
	return FaultState{
		Gateway:        append([]GatewayFault{}, s.gatewayFaults...),
		Notifications:  s.notifyFaults,
		Refunds:        s.refundFaults,
		Held:           len(s.held),
		Throttle:       s.throttle,
		AppThrottles:   s.appThrottleList(),
		Throttled:      throttled,
		ThrottledByApp: byApp,
	}
}

// ResetFaults clears every fault. Held notifications stay held until released.
func (s *Simulator) ResetFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gatewayFaults = nil
	s.notifyFaults = NotificationFaults{Copies: 1}
	s.refundFaults = RefundFaults{}
	s.throttle, s.appThrottles, s.throttleTAT, s.throttled = Throttle{}, nil, nil, nil
	s.payOnClose = make(map[string]string)
}

// takeGatewayFault consumes one use of the first fault matching method.
func (s *Simulator) takeGatewayFault(method string) (GatewayFault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.gatewayFaults {
		f := &s.gatewayFaults[i]
		if f.Method != "" && f.Method != method {
			continue
		}
		taken := *f
		taken.Count = 1
		f.Count--
		if f.Count <= 0 {
			s.gatewayFaults = append(s.gatewayFaults[:i], s.gatewayFaults[i+1:]...)
		}
		return taken, true
	}
	return GatewayFault{}, false
}

func (s *Simulator) applyFault(w http.ResponseWriter, r *http.Request, f GatewayFault, name string) {
	switch f.Mode {
	case FaultSystemError:
		s.writeSignedFor(w, s.app(r.Form.Get("app_id")), name, bizFailure("ACQ.SYSTEM_ERROR", "系统错误"))
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
