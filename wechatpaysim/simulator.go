package wechatpaysim

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

// Simulator is an in-memory WeChat Pay API v3 for direct merchants: it verifies signed
// requests, signs every successful answer, keeps orders per merchant, serves a cashier,
// and delivers encrypted, signed notifications on WeChat Pay's redelivery schedule. It
// is safe for concurrent use.
type Simulator struct {
	cfg         Config
	log         *slog.Logger
	platformKey *rsa.PrivateKey
	platform    platformCert
	pubKey      *rsa.PrivateKey
	loc         *time.Location
	mux         *http.ServeMux
	pages       *template.Template
	done        chan struct{}
	wg          sync.WaitGroup
	instance    uint32

	mu          sync.Mutex
	closed      bool
	seq         uint64
	merchants   map[string]*merchant
	orders      map[string]map[string]*order // mchid → out_trade_no → order
	byTxID      map[string]*order
	byPrepayID  map[string]*order
	byCodePR    map[string]*order
	list        []*order
	refunds     map[string]map[string]*refund // mchid → out_refund_no → refund
	refundList  []*refund
	refundFault RefundFaults
	bills       map[string]*billFile // download token → file
	billHolds   map[string]bool      // bill_date → late (true) or released (false)
	nonces      map[string]time.Time // mchid+nonce → when, for RejectReplayedNonce
	notes       map[string]*notification
	attempts    []NotificationAttempt
	faults      []APIFault
	notifyFault NotificationFaults
	throttle    Throttle
	throttleTAT map[string]time.Time
	throttled   int
}

// Sentinel errors of the Go control API.
var (
	// ErrOrderNotFound means the merchant has no order with that out_trade_no.
	ErrOrderNotFound = errors.New("wechatpaysim: order not found")
	// ErrNotPayable means the order is not NOTPAY (paid, closed or expired).
	ErrNotPayable = errors.New("wechatpaysim: order is not waiting for payment")
	// ErrBadDiscount means a discount is negative or leaves nothing to pay.
	ErrBadDiscount = errors.New("wechatpaysim: impossible discount")
	// ErrAmbiguous means several merchants have an order with that out_trade_no.
	ErrAmbiguous = errors.New("wechatpaysim: out_trade_no exists under several merchants")
	// ErrMerchantExists means the mchid is already served with other credentials.
	ErrMerchantExists = errors.New("wechatpaysim: merchant exists with other credentials")
	// ErrNotificationNotFound means no notification has that id.
	ErrNotificationNotFound = errors.New("wechatpaysim: notification not found")
	// ErrClosed means the simulator was closed.
	ErrClosed = errors.New("wechatpaysim: closed")
)

// New builds a simulator from cfg. Call Close when done to stop notification deliveries.
func New(cfg Config) (*Simulator, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("wechatpaysim: %w", err)
	}
	platformKey, err := parsePrivateKey(cfg.PlatformPrivateKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("wechatpaysim: platform private key: %w", err)
	}
	platform, err := parsePlatformCert(cfg.PlatformCertPEM, platformKey)
	if err != nil {
		return nil, fmt.Errorf("wechatpaysim: %w", err)
	}
	pubKey, err := parsePrivateKey(cfg.PublicKeyPrivateKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("wechatpaysim: public key pair: %w", err)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, fmt.Errorf("wechatpaysim: %w", err)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	s := &Simulator{
		cfg: cfg, log: cfg.Logger.With("component", "wechatpaysim"),
		platformKey: platformKey, platform: platform, pubKey: pubKey,
		loc: time.FixedZone("CST", 8*3600), pages: pages, done: make(chan struct{}),
		instance:  binary.BigEndian.Uint32(rnd[:]) % 100_000,
		merchants: map[string]*merchant{},
	}
	s.resetLocked()
	s.throttle = cfg.Throttle
	for _, day := range cfg.LateBills {
		if err := s.SetBillLate(day, true); err != nil {
			return nil, err
		}
	}
	for _, f := range cfg.Faults {
		if err := s.InjectFault(f); err != nil {
			return nil, err
		}
	}
	for _, m := range cfg.Merchants {
		if err := s.AddMerchant(m); err != nil {
			return nil, err
		}
	}
	if len(s.merchants) == 0 {
		return nil, errors.New("wechatpaysim: no merchant configured")
	}
	s.mux = s.routes()
	return s, nil
}

// Handler returns the simulator's HTTP handler: the v3 API under /v3, the cashier and
// the control API under ControlPrefix.
func (s *Simulator) Handler() http.Handler { return s.mux }

// Close stops notification deliveries and waits for them to end. Requests held by a
// "hang" fault are released.
func (s *Simulator) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// Reset forgets every order, refund, bill, notification, log entry and fault;
// merchants stay.
// Deliveries already in flight run to their end.
func (s *Simulator) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetLocked()
}

func (s *Simulator) resetLocked() {
	for _, n := range s.notes {
		n.cancelled = true
	}
	for _, r := range s.refundList {
		r.cancelled = true
	}
	s.refunds, s.refundList, s.refundFault = map[string]map[string]*refund{}, nil, RefundFaults{}
	s.bills, s.billHolds = map[string]*billFile{}, map[string]bool{}
	s.orders = map[string]map[string]*order{}
	s.byTxID = map[string]*order{}
	s.byPrepayID = map[string]*order{}
	s.byCodePR = map[string]*order{}
	s.list = nil
	s.nonces = map[string]time.Time{}
	s.notes = map[string]*notification{}
	s.attempts = nil
	s.faults = nil
	s.notifyFault = NotificationFaults{}
	s.throttle, s.throttleTAT, s.throttled = Throttle{}, map[string]time.Time{}, 0
}

// now is the simulator's clock in China time.
func (s *Simulator) now() time.Time { return s.cfg.Now().In(s.loc) }

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

// AddMerchant serves a further merchant. Adding one that exists with the same serial
// and APIv3 key changes nothing; with others it is ErrMerchantExists.
func (s *Simulator) AddMerchant(m Merchant) error {
	mm, err := newMerchant(m)
	if err != nil {
		return fmt.Errorf("wechatpaysim: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.merchants[mm.id]; ok {
		if old.serial != mm.serial || string(old.apiV3Key) != string(mm.apiV3Key) || !old.pub.Equal(mm.pub) {
			return ErrMerchantExists
		}
		for _, a := range mm.appIDs {
			if !old.hasAppID(a) {
				old.appIDs = append(old.appIDs, a)
			}
		}
		return nil
	}
	s.merchants[mm.id] = mm
	return nil
}

// Merchants lists the merchants served, without their keys.
func (s *Simulator) Merchants() []Merchant {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Merchant, 0, len(s.merchants))
	for _, m := range s.merchants {
		out = append(out, m.info())
	}
	return out
}

// SetNotifySigner makes the merchant's later notifications (redeliveries included) be
// signed by signer (SignerPlatform or SignerPublicKey), as during a switch to the
// WeChat Pay public key.
func (s *Simulator) SetNotifySigner(mchid, signer string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.merchants[mchid]
	if !ok {
		return fmt.Errorf("wechatpaysim: unknown mchid %q", mchid)
	}
	resolved, err := notifySigner(m.keyMode, signer)
	if err != nil {
		return fmt.Errorf("wechatpaysim: %w", err)
	}
	m.signer = resolved
	return nil
}

func (s *Simulator) merchant(mchid string) *merchant {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.merchants[mchid]
}
