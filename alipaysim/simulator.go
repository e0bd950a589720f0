package alipaysim

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/binary"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// Time formats used on the wire, always in China time.
const (
	timeLayout   = "2006-01-02 15:04:05"
	refundLayout = "2006-01-02 15:04:05.000"
)

// Simulator is an in-memory Alipay OpenAPI gateway: it verifies merchant requests, keeps
// trades and refunds, serves the page-pay cashier, sends signed asynchronous
// notifications with Alipay's retry schedule, and exposes a control API for tests. It is
// safe for concurrent use.
type Simulator struct {
	cfg       Config
	log       *slog.Logger
	appsMu    sync.RWMutex
	apps      map[string]*app // guarded by appsMu; AddApp adds to it
	alipayKey *rsa.PrivateKey
	certs     certMode
	loc       *time.Location
	mux       *http.ServeMux
	pages     *template.Template
	done      chan struct{}
	wg        sync.WaitGroup
	instance  uint32

	mu            sync.Mutex
	closed        bool
	seq           uint64
	trades        map[string]map[string]*trade // app_id → out_trade_no → trade
	byTradeNo     map[string]*trade
	order         []*trade
	refunds       []*refund
	attempts      []NotificationAttempt
	gatewayFaults []GatewayFault
	notifyFaults  NotificationFaults
	refundFaults  RefundFaults
	throttle      Throttle             // Alipay's call frequency limit per app (throttle.go)
	appThrottles  map[string]Throttle  // app_id → the app's own limit, in place of throttle
	throttleTAT   map[string]time.Time // app_id → the throttle's theoretical arrival time
	throttled     map[string]int       // app_id → calls answered 40005
	gen           uint64               // bumped by Reset, so that timers of forgotten refunds do nothing
	held          []*notification
	payOnClose    map[string]string // out_trade_no → buyer_id
	calls         callCounts        // authenticated gateway calls (calls.go)

	bills *bills // publication and planted faults of daily bills (bill.go)
}

// Sentinel errors of the Go control API.
var (
	// ErrTradeNotFound means no trade has that out_trade_no (for page pay: the cashier was
	// never opened).
	ErrTradeNotFound = errors.New("alipaysim: trade not found")
	// ErrNotPayable means the trade is not WAIT_BUYER_PAY (paid, closed or expired).
	ErrNotPayable = errors.New("alipaysim: trade is not waiting for payment")
	// ErrBadDiscount means a payment's discounts are negative or leave nothing to pay.
	ErrBadDiscount = errors.New("alipaysim: impossible discount")
	// ErrAmbiguous means several apps have a trade with that out_trade_no.
	ErrAmbiguous = errors.New("alipaysim: out_trade_no exists under several app_ids")
	// ErrClosed means the simulator was closed.
	ErrClosed = errors.New("alipaysim: closed")
)

// New builds a simulator from cfg. Call Close when done to stop timers and pending
// notification deliveries.
func New(cfg Config) (*Simulator, error) {
	cfg = cfg.withDefaults()
	key, err := parsePrivateKey(cfg.AlipayPrivateKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("alipaysim: alipay private key: %w", err)
	}
	certs, err := loadCertMode(cfg, key)
	if err != nil {
		return nil, fmt.Errorf("alipaysim: %w", err)
	}
	apps, err := cfg.apps(certs)
	if err != nil {
		return nil, fmt.Errorf("alipaysim: %w", err)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, fmt.Errorf("alipaysim: %w", err)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	s := &Simulator{
		cfg:        cfg,
		log:        cfg.Logger.With("component", "alipaysim"),
		apps:       apps,
		alipayKey:  key,
		certs:      certs,
		loc:        time.FixedZone("CST", 8*3600),
		pages:      pages,
		done:       make(chan struct{}),
		instance:   binary.BigEndian.Uint32(rnd[:]) % 1_000_000,
		trades:     make(map[string]map[string]*trade),
		byTradeNo:  make(map[string]*trade),
		payOnClose: make(map[string]string),
		bills:      newBills(),
	}
	s.notifyFaults.Copies = 1
	s.mux = s.routes()
	return s, nil
}

// Handler returns the simulator's HTTP handler: the gateway at GatewayPath, the cashier
// pages and the control API under ControlPrefix.
func (s *Simulator) Handler() http.Handler { return s.mux }

// Close stops expiry timers and notification deliveries and waits for them to finish.
// Requests held by a "hang" fault are released.
func (s *Simulator) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for _, t := range s.order {
		t.stopTimer()
	}
	close(s.done)
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// Reset forgets every trade, refund, notification log entry, fault and held
// notification. Deliveries already in flight run to their end.
func (s *Simulator) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.order {
		t.stopTimer()
	}
	s.gen++
	s.trades = make(map[string]map[string]*trade)
	s.byTradeNo = make(map[string]*trade)
	s.order = nil
	s.refunds = nil
	s.attempts = nil
	s.gatewayFaults = nil
	s.notifyFaults = NotificationFaults{Copies: 1}
	s.refundFaults = RefundFaults{}
	s.held = nil
	s.payOnClose = make(map[string]string)
	s.calls = callCounts{}
	s.bills.reset()
}

// now is the simulator's clock: China time, wall clock.
func (s *Simulator) now() time.Time { return time.Now().In(s.loc) }

// scaled converts a schedule duration into real time according to TimeScale.
func (s *Simulator) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) / s.cfg.TimeScale)
}

// opContext returns a context that is cancelled when the simulator closes.
func (s *Simulator) opContext(timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// sleep waits for d or until the simulator closes; it reports false on close.
func (s *Simulator) sleep(d time.Duration) bool {
	if d <= 0 {
		select {
		case <-s.done:
			return false
		default:
			return true
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.done:
		return false
	}
}

// nextTradeNoLocked returns a 28-digit trade_no shaped like Alipay's.
func (s *Simulator) nextTradeNoLocked(now time.Time) string {
	s.seq++
	return fmt.Sprintf("%s22%06d%012d", now.Format("20060102"), s.instance, s.seq)
}

// newNotifyID returns a random notify_id.
func newNotifyID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x", b[:])
}
