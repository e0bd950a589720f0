// Package api is the HTTP interface of the payment system: the merchant API under /v1,
// the channels' asynchronous notifications under /callbacks (Alipay's, WeChat Pay's),
// and /healthz. Readiness, metrics and profiles are served apart, on an admin listener
// (AdminHandler).
package api

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"go.opentelemetry.io/otel/trace"

	"github.com/paykit/paykit/checkout"
	"github.com/paykit/paykit/inbox"
	"github.com/paykit/paykit/payment"
)

// Orchestrator is what the API needs from the workflow engine: what the checkout and the
// inbox need, and the merchant's operations.
type Orchestrator interface {
	checkout.Orchestrator
	inbox.Orchestrator
	// CancelPayment asks the workflow of a pending payment to cancel it (close at Alipay,
	// then locally, or paid if Alipay says so); it returns once the run has the request.
	CancelPayment(ctx context.Context, p payment.Payment) error
	// RedeliverEvent makes one delivery attempt of a tenant's outbox event now.
	RedeliverEvent(ctx context.Context, tenantID, eventID string) (payment.Redelivery, error)
	Ping(ctx context.Context) error
}

// Cache is the Redis fast path. Every method may fail; the API then falls back to MySQL,
// which is the source of truth, so Redis being down makes requests slower, never wrong.
type Cache interface {
	// IssueToken issues a checkout token unless the tenant holds maxOpen unspent ones
	// (maxOpen <= 0: no bound); then it issues none and answers how long until one expires.
	IssueToken(ctx context.Context, tenantID, orderID string, ttl time.Duration, maxOpen int) (token string, retryAfter time.Duration, err error)
	// ClaimToken binds a checkout token to one request (binder): ok=true for the first
	// claim and for later claims with the same binder, ok=false for any other binder or a
	// spent, expired or unknown token. A token issued for an order other than orderID
	// gives ok=false with issuedFor naming that order, and stays unclaimed.
	ClaimToken(ctx context.Context, tenantID, token, orderID, binder string) (issuedFor string, ok bool, err error)
	// ReleaseToken makes a token claimed by binder unspent again, and leaves one claimed
	// by anyone else alone.
	ReleaseToken(ctx context.Context, tenantID, token, binder string) error
	CachedResponse(ctx context.Context, tenantID, key string) (payment.IdempotencyRecord, bool, error)
	CacheResponse(ctx context.Context, rec payment.IdempotencyRecord, ttl time.Duration) error
	Ping(ctx context.Context) error
}

// DefaultIdempotencyLock is the default Config.IdempotencyLock.
const DefaultIdempotencyLock = 5 * time.Second

// Defaults of the inbox (Config.InboxSettleBound, InboxSweepInterval, NotificationRetention).
const (
	DefaultInboxSettleBound      = inbox.DefaultSettleBound
	DefaultInboxSweepInterval    = inbox.DefaultSweepInterval
	DefaultNotificationRetention = inbox.DefaultRetention
)

// Config tunes the API.
type Config struct {
	// IdempotencyTTL is how long an Idempotency-Key and its response are kept.
	IdempotencyTTL time.Duration
	// IdempotencyLock is how long an in-flight request holds its key without renewing it
	// before another request may take it over (the first one presumably crashed). The
	// request renews it every third of that while it runs.
	IdempotencyLock time.Duration
	// CheckoutTokenTTL is the lifetime of a one-time checkout token.
	CheckoutTokenTTL time.Duration
	// BodyLimit caps request bodies, e.g. "64K".
	BodyLimit string
	// RequestTimeout bounds the work done for one request.
	RequestTimeout time.Duration
	// TenantCacheTTL is how long an authenticated API key is remembered in memory (at
	// most until the key expires).
	TenantCacheTTL time.Duration
	// KeyRevocationBound is the longest a revoked API key is still accepted by this
	// process (keyCache); zero means DefaultKeyRevocationBound.
	KeyRevocationBound time.Duration
	// AuthFailuresPerMinute is how many API keys that do not authenticate a source
	// address may have looked up in MySQL a minute; past it, its keys are looked up only
	// within BlockedSourceLookups. Zero means DefaultAuthFailuresPerMinute, negative no
	// limit.
	AuthFailuresPerMinute int
	// BlockedSourceLookups is how many keys a second, every source together, this process
	// still looks up in MySQL for source addresses over their AuthFailuresPerMinute, so
	// that others' bad keys from the same address do not fail a valid key; a source over
	// its budget is answered 429 only when these are spent. Zero means
	// DefaultBlockedSourceLookups.
	BlockedSourceLookups float64
	// TrustedProxies are the networks of the load balancers or ingresses in front of the
	// API. From a peer in one of them, a request's source address is the last address
	// X-Forwarded-For names outside them; from any other peer, and from every peer when
	// there are none (the default), it is the peer's address, whatever the headers say.
	TrustedProxies []*net.IPNet
	// Limits are the per-tenant rate limits, applied when the Cache is also a Limiter;
	// the zero value limits nothing.
	Limits Limits
	// CancelWait is how long POST /v1/payments/{payment_no}/cancel waits for the payment
	// to end before it answers 202 with the payment still pending.
	CancelWait time.Duration
	// InboxSettleBound is how long an acknowledged Alipay notification may go without
	// its effect being seen before it is handed to its payment again (then with backoff).
	InboxSettleBound time.Duration
	// InboxSweepInterval is how often the inbox is swept (inbox.Inbox.Run).
	InboxSweepInterval time.Duration
	// NotificationRetention is how long a notification that needs nothing more is kept;
	// it must be longer than Alipay's 25 h of redeliveries, which it dedupes.
	NotificationRetention time.Duration
	// DirectCheckoutTTL, when set, is the lifetime of the page, wap and app payments that
	// the API creates and opens itself before starting their workflow (checkout/direct.go);
	// zero leaves every checkout to the workflow's checkout update.
	DirectCheckoutTTL time.Duration
	// QueryInterval, when set, has the payments the API creates queried by the scheduled
	// reconciler (checkout.Config.QueryInterval).
	QueryInterval time.Duration
	// ReadyFor is how long a /readyz answer of the admin listener is reused before
	// MySQL, Temporal and Redis are pinged again (admin.DefaultReadyFor if zero).
	ReadyFor time.Duration
	// TracerProvider makes the server spans of requests; nil is the global one.
	TracerProvider trace.TracerProvider
}

func (c Config) withDefaults() Config {
	if c.IdempotencyTTL <= 0 {
		c.IdempotencyTTL = 24 * time.Hour
	}
	if c.IdempotencyLock <= 0 {
		c.IdempotencyLock = DefaultIdempotencyLock
	}
	if c.CheckoutTokenTTL <= 0 {
		c.CheckoutTokenTTL = 30 * time.Minute
	}
	if c.BodyLimit == "" {
		c.BodyLimit = "64K"
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.TenantCacheTTL <= 0 {
		c.TenantCacheTTL = 30 * time.Second
	}
	if c.KeyRevocationBound <= 0 {
		c.KeyRevocationBound = DefaultKeyRevocationBound
	}
	if c.AuthFailuresPerMinute == 0 {
		c.AuthFailuresPerMinute = DefaultAuthFailuresPerMinute
	}
	if c.BlockedSourceLookups <= 0 {
		c.BlockedSourceLookups = DefaultBlockedSourceLookups
	}
	if c.CancelWait <= 0 {
		c.CancelWait = 10 * time.Second
	}
	return c
}

// Server is the HTTP server.
type Server struct {
	echo     *echo.Echo
	cfg      Config
	store    Stores
	gateways payment.Gateways
	orch     Orchestrator
	cache    Cache
	log      *slog.Logger
	metrics  *Metrics
	auth     *authenticator
	idem     *idempotency
	// limiter is the cache as a Limiter, or nil.
	limiter Limiter
	// inbox records Alipay's notifications and hands them to their payments.
	inbox *inbox.Inbox
	// checkout decides the checkouts.
	checkout *checkout.Checkout
}

// New builds the server and its routes. cache may be nil (no Redis). It panics if a noun
// of store is not set: that is a wiring mistake, not a condition to serve with.
func New(cfg Config, store Stores, gateways payment.Gateways, orch Orchestrator, cache Cache, logger *slog.Logger, metrics *Metrics) *Server {
	if err := store.check(); err != nil {
		panic(err)
	}
	if logger == nil {
		logger = slog.Default()
	}
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	s := &Server{
		echo: echo.New(), cfg: cfg.withDefaults(), store: store, gateways: gateways, orch: orch, cache: cache,
		log: logger, metrics: metrics,
	}
	s.inbox = inbox.New(inbox.Config{
		SettleBound: s.cfg.InboxSettleBound, SweepInterval: s.cfg.InboxSweepInterval, Retention: s.cfg.NotificationRetention,
	}, inbox.Stores{
		Payments: store.Payments, Refunds: store.Refunds, Notifications: store.Notifications, Inbox: store.Inbox,
		Tenants: store.Tenants, Anomalies: store.Anomalies,
	}, gateways, orch, logger, metrics.inbox)
	var tokens checkout.Tokens
	if cache != nil {
		tokens = cache
	}
	s.checkout = checkout.New(checkout.Config{DirectTTL: s.cfg.DirectCheckoutTTL, QueryInterval: s.cfg.QueryInterval, NoFault: noFault},
		checkout.Stores{Payments: store.Payments, PayLinks: store.PayLinks}, gateways, orch, tokens, logger, metrics.checkout)
	s.auth = newAuthenticator(s.cfg, store.APIKeys, metrics)
	s.idem = &idempotency{store: store.IdempotencyKeys, cache: cache, cfg: s.cfg, log: logger, metrics: metrics}
	if l, ok := cache.(Limiter); ok {
		s.limiter = l
	}
	e := s.echo
	e.HideBanner, e.HidePort = true, true
	e.IPExtractor = sourceAddress(s.cfg.TrustedProxies)
	e.HTTPErrorHandler = s.handleError
	e.Pre(noStore)
	e.Use(assignRequestID)
	e.Use(s.traceRequests)
	e.Use(s.recoverPanics)
	e.Use(s.accessLog)
	e.Use(middleware.BodyLimit(s.cfg.BodyLimit))
	e.Use(middleware.ContextTimeout(s.cfg.RequestTimeout))

	e.GET("/healthz", s.healthz)
	e.POST("/callbacks/alipay", s.alipayCallback)
	e.POST("/callbacks/wechatpay", s.wechatpayCallback)
	e.GET("/openapi.yaml", serveOpenAPI)

	v1 := perRoute(e.Group("/v1"), s.auth.authenticate, requireJSON)
	v1.POST("/checkout-tokens", s.limited(RouteCheckoutTokens, s.createCheckoutToken))
	v1.POST("/payments", s.limited(RouteCheckouts, s.createPayment))
	v1.GET("/payments/:payment_no", s.getPayment)
	v1.GET("/orders/:order_id/payments", s.listOrderPayments)
	v1.POST("/payments/:payment_no/refunds", s.limited(RouteRefunds, s.createRefund))
	v1.GET("/payments/:payment_no/refunds", s.listPaymentRefunds)
	v1.GET("/refunds/:refund_no", s.getRefund)
	s.merchantRoutes(v1)
	return s
}

// sourceAddress extracts the source address of a request, which its API keys that do not
// authenticate are counted against: its peer's, or from a peer in trusted, the last
// address X-Forwarded-For names outside trusted. Nothing is trusted by default, not even
// loopback or private peers: a client inside the network (another pod, a neighbour on the
// private net) could otherwise name any address, and have none counted against its own.
func sourceAddress(trusted []*net.IPNet) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, n := range trusted {
		opts = append(opts, echo.TrustIPRange(n))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// ServeHTTP makes the server an http.Handler (used by tests and by http.Server).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// ListenAndServe serves on addr and sweeps the inbox (inbox.Inbox.Run) until ctx is cancelled,
// then shuts down gracefully, letting in-flight requests and the queued hand-overs of
// notifications finish within grace (any left are due in MySQL for the next sweep).
func (s *Server) ListenAndServe(ctx context.Context, addr string, grace time.Duration) error {
	srv := &http.Server{
		Addr:              addr,
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	sweepCtx, stopSweep := context.WithCancel(context.Background())
	swept := make(chan struct{})
	go func() { defer close(swept); s.inbox.Run(sweepCtx) }()
	stopInbox := func() { stopSweep(); <-swept }
	defer s.inbox.Close()
	select {
	case err := <-errc:
		stopInbox()
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	// Nothing queues a hand-over any more (no request, no sweep): let the queued ones run.
	stopInbox()
	if err != nil {
		return err
	}
	s.inbox.Wait(shutdownCtx)
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Inbox is the server's notification inbox, for a test to sweep.
func (s *Server) Inbox() *inbox.Inbox { return s.inbox }

func requestID(c echo.Context) string {
	return c.Response().Header().Get(echo.HeaderXRequestID)
}

// detached is the request's context without its cancellation, for short writes that must
// finish even if the client has gone away.
func detached(c echo.Context) context.Context {
	return context.WithoutCancel(c.Request().Context())
}
