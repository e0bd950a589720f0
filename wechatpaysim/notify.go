package wechatpaysim

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"
)

// Kinds of notification attempts (NotificationAttempt.Kind).
const (
	// AttemptDelivery is a delivery on the redelivery schedule.
	AttemptDelivery = "delivery"
	// AttemptProbe is a signature probe: the notification's body with a
	// WECHATPAY/SIGNTEST/… signature, which a merchant must refuse.
	AttemptProbe = "probe"
	// AttemptReplay is the notification sent again with an old timestamp, as an attacker
	// who captured it would, which a merchant must refuse.
	AttemptReplay = "replay"
)

// NotificationAttempt is one POST of a notification to notify_url, as logged by the
// simulator, with the signature headers it carried and the merchant's answer.
type NotificationAttempt struct {
	ID            string    `json:"id"`
	EventType     string    `json:"event_type"`
	MchID         string    `json:"mchid"`
	OutTradeNo    string    `json:"out_trade_no"`
	TransactionID string    `json:"transaction_id"`
	OutRefundNo   string    `json:"out_refund_no,omitempty"`
	NotifyURL     string    `json:"notify_url"`
	Kind          string    `json:"kind"`
	Attempt       int       `json:"attempt"`
	At            time.Time `json:"at"`
	Timestamp     string    `json:"timestamp,omitempty"`
	Nonce         string    `json:"nonce,omitempty"`
	Serial        string    `json:"serial,omitempty"`
	Signature     string    `json:"signature,omitempty"`
	StatusCode    int       `json:"status_code,omitempty"`
	ResponseBody  string    `json:"response_body"`
	Error         string    `json:"error,omitempty"`
	// Acknowledged is a 200 or 204 answer (for a probe or replay: the merchant accepted it).
	Acknowledged bool `json:"acknowledged"`
	// Dropped means the delivery was lost by a fault before reaching the merchant.
	Dropped bool `json:"dropped,omitempty"`
}

// NotificationFaults disturbs notification delivery for every merchant.
type NotificationFaults struct {
	// DropDeliveries loses the next N deliveries before they reach the merchant; each
	// counts as failed, and the schedule goes on.
	DropDeliveries int `json:"drop_deliveries"`
	// LoseNext never sends the next N notifications at all: the merchant must query.
	LoseNext int `json:"lose_next"`
	// Probes sends a signature probe before each notification's first delivery.
	Probes bool `json:"probes"`
}

type notification struct {
	id, eventType string
	m             *merchant
	o             *order
	outTradeNo    string
	transactionID string
	outRefundNo   string
	url           string
	body          []byte
	cancelled     bool // by Reset; guarded by Simulator.mu
}

func (n *notification) entry(kind string, k int) NotificationAttempt {
	return NotificationAttempt{
		ID: n.id, EventType: n.eventType, MchID: n.m.id, OutTradeNo: n.outTradeNo,
		TransactionID: n.transactionID, OutRefundNo: n.outRefundNo, NotifyURL: n.url, Kind: kind, Attempt: k,
	}
}

// envelope is the notification body (the resource is encrypted).
type envelope struct {
	ID           string       `json:"id"`
	CreateTime   string       `json:"create_time"`
	ResourceType string       `json:"resource_type"`
	EventType    string       `json:"event_type"`
	Summary      string       `json:"summary"`
	Resource     encryptedRes `json:"resource"`
}

// notifyLocked sends the order's payment notification.
func (s *Simulator) notifyLocked(o *order, eventType, summary string) {
	plain, _ := json.Marshal(s.transactionLocked(o))
	s.sendLocked(&notification{
		eventType: eventType, m: o.m, o: o, outTradeNo: o.outTradeNo, transactionID: o.transactionID, url: o.notifyURL,
	}, summary, "transaction", plain)
}

// notifyRefundLocked sends a refund's notification for its status (REFUND.SUCCESS,
// REFUND.CLOSED or REFUND.ABNORMAL) to the refund's notify_url. The order's
// notification faults apply to it as to the payment's.
func (s *Simulator) notifyRefundLocked(r *refund) {
	plain, _ := json.Marshal(s.refundResourceLocked(r))
	s.sendLocked(&notification{
		eventType: "REFUND." + r.status, m: r.o.m, o: r.o, outTradeNo: r.o.outTradeNo,
		transactionID: r.o.transactionID, outRefundNo: r.outRefundNo, url: r.notifyURL,
	}, refundSummary[r.status], "refund", plain)
}

// sendLocked builds the notification (its resource of originalType encrypted once, with
// originalType as the associated data) and starts delivering it.
func (s *Simulator) sendLocked(n *notification, summary, originalType string, plain []byte) {
	if s.closed {
		return
	}
	o := n.o
	nonce := aeadNonce()
	ct, err := EncryptAEAD(o.m.apiV3Key, nonce, originalType, plain)
	if err != nil {
		s.log.Error("encrypt notification", "err", err)
		return
	}
	n.id = newUUID()
	n.body, _ = json.Marshal(envelope{
		ID: n.id, CreateTime: s.now().Format(time.RFC3339), ResourceType: "encrypt-resource",
		EventType: n.eventType, Summary: summary,
		Resource: encryptedRes{
			OriginalType: originalType, Algorithm: AlgorithmAEAD, Ciphertext: ct,
			AssociatedData: originalType, Nonce: nonce,
		},
	})
	s.notes[n.id] = n
	if s.notifyFault.LoseNext > 0 {
		s.notifyFault.LoseNext--
		e := n.entry(AttemptDelivery, 0)
		e.At, e.Dropped, e.Error = time.Now(), true, "notification lost by fault: never sent"
		s.attempts = append(s.attempts, e)
		s.log.Info("notification lost by fault", "id", n.id, "out_trade_no", n.outTradeNo)
		return
	}
	start := time.Now().Add(o.notifyDelay)
	o.notifyDelay = 0
	probe := s.notifyFault.Probes || s.cfg.SignatureProbes
	s.wg.Add(1)
	go s.deliver(n, start, probe)
}

// deliver runs the schedule: the first delivery goes out at start, and delivery k at the
// first one's time plus the (scaled) sum of the first k-1 intervals. It stops at the
// first acknowledgement, after the last delivery, on Reset, or when the simulator closes.
func (s *Simulator) deliver(n *notification, start time.Time, probe bool) {
	defer s.wg.Done()
	sched := s.cfg.NotifySchedule
	var offset time.Duration
	for k := 1; k <= len(sched)+1; k++ {
		if k > 1 {
			offset += sched[k-2]
		}
		if !s.sleep(time.Until(start.Add(s.scaled(offset)))) {
			return
		}
		if k == 1 && probe {
			s.record(s.post(n, AttemptProbe, 0, s.now()))
		}
		e, done := s.attempt(n, k)
		if done {
			return
		}
		if k == 1 {
			start = e.At
		}
	}
	s.log.Warn("notification never acknowledged", "id", n.id, "out_trade_no", n.outTradeNo, "deliveries", len(sched)+1)
}

// attempt makes delivery k, freshly signed, and reports whether the schedule is done
// (acknowledged, or the notification forgotten by Reset).
func (s *Simulator) attempt(n *notification, k int) (NotificationAttempt, bool) {
	s.mu.Lock()
	if n.cancelled {
		s.mu.Unlock()
		return NotificationAttempt{}, true
	}
	drop := s.notifyFault.DropDeliveries > 0
	if drop {
		s.notifyFault.DropDeliveries--
	}
	loseAnswer := !drop && n.o.notifyFailNext > 0
	if loseAnswer {
		n.o.notifyFailNext--
	}
	s.mu.Unlock()
	var e NotificationAttempt
	if drop {
		e = n.entry(AttemptDelivery, k)
		e.At, e.Dropped, e.Error = time.Now(), true, "delivery lost by fault"
	} else {
		e = s.post(n, AttemptDelivery, k, s.now())
	}
	if loseAnswer && e.Error == "" {
		e.Acknowledged, e.Error = false, "answer lost by fault"
	}
	s.record(e)
	return e, e.Acknowledged
}

func (s *Simulator) record(e NotificationAttempt) {
	s.mu.Lock()
	s.attempts = append(s.attempts, e)
	s.mu.Unlock()
}

// post sends the notification once, signed at `at` by the merchant's current signer
// (a probe carries a WECHATPAY/SIGNTEST/ signature instead).
func (s *Simulator) post(n *notification, kind string, k int, at time.Time) NotificationAttempt {
	e := n.entry(kind, k)
	e.At = time.Now()
	s.mu.Lock()
	signer := n.m.signer
	s.mu.Unlock()
	h, err := s.sign(signer, n.body, at)
	if err != nil {
		e.Error = err.Error()
		return e
	}
	if kind == AttemptProbe {
		h["Wechatpay-Signature"] = ProbePrefix + randomHex(16)
	}
	e.Timestamp, e.Nonce, e.Serial, e.Signature = h["Wechatpay-Timestamp"], h["Wechatpay-Nonce"], h["Wechatpay-Serial"], h["Wechatpay-Signature"]
	ctx, cancel := s.opContext(s.cfg.NotifyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url, bytes.NewReader(n.body))
	if err != nil {
		e.Error = err.Error()
		return e
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Request-ID", newRequestID())
	req.Header.Set("User-Agent", "Mozilla/4.0")
	req.Header.Set("Pragma", "no-cache")
	req.Close = true
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		e.Error = err.Error()
		s.log.Info("notification delivery failed", "id", n.id, "out_trade_no", n.outTradeNo, "kind", kind, "attempt", k, "err", err)
		return e
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		e.Error = fmt.Sprintf("read answer: %v", err)
	}
	e.StatusCode, e.ResponseBody = resp.StatusCode, string(body)
	e.Acknowledged = err == nil && s.acknowledged(resp.StatusCode, body)
	s.log.Info("notification delivered", "id", n.id, "out_trade_no", n.outTradeNo, "kind", kind,
		"attempt", k, "status", resp.StatusCode, "acknowledged", e.Acknowledged)
	return e
}

// acknowledged: 200 or 204 (and, with NotifyRequireSuccessCode, {"code":"SUCCESS"}).
func (s *Simulator) acknowledged(status int, body []byte) bool {
	if status != http.StatusOK && status != http.StatusNoContent {
		return false
	}
	if !s.cfg.NotifyRequireSuccessCode {
		return true
	}
	var ans struct {
		Code string `json:"code"`
	}
	return json.Unmarshal(body, &ans) == nil && ans.Code == "SUCCESS"
}

// Notifications returns every notification attempt in the order they were sent.
func (s *Simulator) Notifications() []NotificationAttempt {
	s.mu.Lock()
	out := slices.Clone(s.attempts)
	s.mu.Unlock()
	slices.SortStableFunc(out, func(a, b NotificationAttempt) int { return a.At.Compare(b.At) })
	return out
}

func (s *Simulator) notification(id string) (*notification, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	n := s.notes[id]
	if n == nil {
		return nil, ErrNotificationNotFound
	}
	return n, nil
}

// ProbeNotification sends a signature probe of notification id now and returns the
// attempt; a merchant that acknowledges it accepts unverified notifications.
func (s *Simulator) ProbeNotification(id string) (NotificationAttempt, error) {
	n, err := s.notification(id)
	if err != nil {
		return NotificationAttempt{}, err
	}
	e := s.post(n, AttemptProbe, 0, s.now())
	s.record(e)
	return e, nil
}

// ReplayNotification sends notification id again now, genuinely signed but with a
// timestamp age old, as a replay of a captured delivery; a merchant must refuse one
// older than 5 minutes.
func (s *Simulator) ReplayNotification(id string, age time.Duration) (NotificationAttempt, error) {
	n, err := s.notification(id)
	if err != nil {
		return NotificationAttempt{}, err
	}
	e := s.post(n, AttemptReplay, 0, s.now().Add(-age))
	s.record(e)
	return e, nil
}

// SetNotificationFaults replaces the notification fault settings.
func (s *Simulator) SetNotificationFaults(f NotificationFaults) error {
	if f.DropDeliveries < 0 || f.LoseNext < 0 {
		return fmt.Errorf("wechatpaysim: notification faults must not be negative")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notifyFault = f
	return nil
}

// newUUID is a random (version 4) UUID, the shape of real notification ids.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
