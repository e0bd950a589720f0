// Package system holds the dependencies one paykit process opens — MySQL, Redis,
// Temporal, the Alipay apps — and the API server, worker activities and reconciler built
// on them. The commands of cmd/paykit parse their flags and call it.
package system

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/audit"
	"github.com/paykit/paykit/gateways"
	"github.com/paykit/paykit/internal/buildinfo"
	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/internal/temporalmetrics"
	"github.com/paykit/paykit/internal/tracing"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/orchestrator"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/redis"
	"github.com/paykit/paykit/secrets"
)

// NewLogger is the process logger on stderr at PAYKIT_LOG_LEVEL, in JSON or, with
// PAYKIT_LOG_FORMAT=text, in text.
func NewLogger(cfg config.Config) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewJSONHandler(os.Stderr, opts)
	if strings.EqualFold(cfg.LogFormat, "text") {
		h = slog.NewTextHandler(os.Stderr, opts)
	}
	// A record logged with the context of a traced request or activity carries its
	// trace_id and span_id.
	return slog.New(tracing.LogHandler(h))
}

// OpenStore opens the MySQL store of PAYKIT_MYSQL_DSN, untraced; CloseStore closes it.
func OpenStore(ctx context.Context, cfg config.Config) (*mysql.Store, error) {
	return openTracedStore(ctx, cfg, nil)
}

// CloseStore closes the store and its database handle.
func CloseStore(st *mysql.Store) {
	_ = st.Close()
	_ = st.DB().Close()
}

// openTracedStore is OpenStore with a span per SQL call when tr is enabled.
func openTracedStore(ctx context.Context, cfg config.Config, tr *tracing.Tracing) (*mysql.Store, error) {
	var opts []mysql.OpenOption
	if tr.Enabled() {
		opts = append(opts, mysql.WithTracing())
	}
	db, err := mysql.Open(ctx, cfg.MySQLDSN, opts...)
	if err != nil {
		return nil, fmt.Errorf("mysql at %s (is MariaDB running? start it with `start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd`; a missing database is created by `paykit migrate`): %w", redactDSN(cfg.MySQLDSN), err)
	}
	st := mysql.NewStore(db)
	// Payments, and the reconciler's and the sweeper's scans, are this stack's.
	st.SetRunScope(payment.RunScope(cfg.TemporalNamespace, cfg.TaskQueue))
	return st, nil
}

// redactDSN hides the password of a DSN in an error message.
func redactDSN(dsn string) string {
	if at := strings.LastIndex(dsn, "@"); at >= 0 {
		if colon := strings.Index(dsn[:at], ":"); colon >= 0 {
			return dsn[:colon] + ":***" + dsn[at:]
		}
	}
	return dsn
}

// openRedis returns the Redis fast path, or nil if disabled. Redis being down at start is
// not fatal: the client reconnects, and until then MySQL answers alone.
func openRedis(cfg config.Config, logger *slog.Logger, tr *tracing.Tracing) (*redis.Client, error) {
	if cfg.RedisAddr == "" {
		logger.Warn("redis disabled: checkout tokens are unavailable and every check goes to MySQL")
		return nil, nil
	}
	gc, err := redis.Dial(cfg.Redis())
	if err != nil {
		return nil, err
	}
	if tr.Enabled() {
		if err := redisotel.InstrumentTracing(gc); err != nil {
			return nil, fmt.Errorf("redis tracing: %w", err)
		}
	}
	rc := redis.New(gc, cfg.RedisKeyPrefix)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := rc.Ping(ctx); err != nil {
		logger.Warn("redis unavailable at start; continuing on MySQL alone until it answers", "addr", redis.Redact(cfg.RedisAddr), "deployment", cfg.Redis().Kind(), "err", err)
	}
	return rc, nil
}

// DialTemporal connects the client; with tr enabled, its calls, and the workflows and
// activities of any worker made from it, are traced.
func DialTemporal(ctx context.Context, cfg config.Config, logger *slog.Logger, reg *prometheus.Registry, tr *tracing.Tracing) (client.Client, error) {
	mh, err := temporalmetrics.New(reg)
	if err != nil {
		return nil, fmt.Errorf("temporal metrics: %w", err)
	}
	opts := client.Options{
		HostPort:       cfg.TemporalAddr,
		Namespace:      cfg.TemporalNamespace,
		Logger:         tlog.NewStructuredLogger(logger.With("component", "temporal")),
		MetricsHandler: mh,
	}
	if err := cfg.TemporalConn.Apply(&opts); err != nil {
		return nil, err
	}
	if ti, err := tr.TemporalInterceptor(); err != nil {
		return nil, fmt.Errorf("temporal tracing: %w", err)
	} else if ti != nil {
		opts.Interceptors = []interceptor.ClientInterceptor{ti}
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("temporal at %s (start it with `go run ./cmd/paykit dev` or `go -C tools tool temporal server start-dev`): %w", cfg.TemporalAddr, err)
	}
	return c, nil
}

// NewAlipayApps returns the resolver of the Alipay apps: each tenant's own app, and the
// default app of the environment (ALIPAY_*) for tenants without one.
func NewAlipayApps(cfg config.Config, store gateways.Store, limiter gateways.Limiter) (*gateways.Resolver, error) {
	creds, err := cfg.DefaultAppCredentials()
	if err != nil {
		return nil, err
	}
	apps := AlipayApps(cfg)
	apps.Limiter = limiter
	build := apps.Build
	def, err := build(cfg.AlipayAppID, cfg.AlipaySellerID, creds)
	if err != nil {
		return nil, err
	}
	keys, err := cfg.SecretsKeyring()
	if err != nil {
		return nil, err
	}
	return gateways.New(store, keys, build, def, cfg.AlipayAppID, cfg.AlipaySellerID), nil
}

// NewGateways returns the gateways of every channel the deployment is configured for:
// Alipay's apps (alipay), and the WeChat Pay merchant of WECHATPAY_* if WECHATPAY_MCHID is
// set, its calls on paykit's own initiative limited as an Alipay app's are (limiter).
// Building the merchant's gateway verifies its keys, and without the WeChat Pay public key
// fetches the platform certificates: a process does not start on a merchant it cannot
// talk to.
func NewGateways(ctx context.Context, cfg config.Config, alipay *gateways.Resolver, limiter gateways.Limiter) (gateways.Channels, error) {
	chans := gateways.Channels{payment.ChannelAlipay: alipay}
	if !cfg.WechatPay.Configured() {
		return chans, nil
	}
	wc, err := cfg.WechatPay.Adapter(cfg.PublicURL + "/callbacks/wechatpay")
	if err != nil {
		return nil, err
	}
	m, err := gateways.WechatPay(ctx, wc, limiter, cfg.WechatPay.CashierBaseURL)
	if err != nil {
		// The adapter's errors name what is wrong, never a key.
		return nil, fmt.Errorf("wechat pay merchant %s: %w", cfg.WechatPay.MchID, err)
	}
	chans[payment.ChannelWechatPay] = m
	return chans, nil
}

// callLimiter is the limit of the calls every process makes to each Alipay app on its
// own initiative (PAYKIT_ALIPAY_CALL_RATE): shared in Redis, or per process without it;
// nil when it is off.
func callLimiter(cfg config.Config, rc *redis.Client, logger *slog.Logger) gateways.Limiter {
	if cfg.AlipayCallRate <= 0 {
		return nil
	}
	if rc == nil {
		logger.Warn("alipay call limit: no redis, so each process limits its own calls", "rate", cfg.AlipayCallRate)
		return &gateways.LocalLimiter{Rate: cfg.AlipayCallRate, Burst: cfg.AlipayCallBurst}
	}
	return &redis.CallLimiter{Client: rc, Rate: cfg.AlipayCallRate, Burst: cfg.AlipayCallBurst, Hold: cfg.AlipayCallHold,
		Logger: logger.With("component", "alipay-call-limit")}
}

// AlipayApps builds the gateways of Alipay apps on the configured gateway URL.
func AlipayApps(cfg config.Config) gateways.Alipay {
	return gateways.Alipay{GatewayURL: cfg.AlipayGatewayURL, NotifyURL: cfg.PublicURL + "/callbacks/alipay", CashierBaseURL: cfg.AlipayCashierBaseURL}
}

// newActivities are the activities on the store, the gateway, Redis (if any) and
// Temporal; Activities adds the parts that need the whole system.
func newActivities(cfg config.Config, store *mysql.Store, gw payment.Gateway, rc *redis.Client, tc client.Client, orch *orchestrator.Orchestrator, logger *slog.Logger, tr *tracing.Tracing) *activities.Activities {
	acts := &activities.Activities{
		Store: activityStores(store), Gateway: gw, WebhookPolicy: cfg.WebhookPolicy,
		HTTP:     &http.Client{Timeout: 10 * time.Second, Transport: tr.Transport("webhook", activities.NewWebhookTransport(cfg.WebhookPolicy))},
		Temporal: tc, Redriver: orch, RefundRedriver: orch, Logger: logger, Benefit: cfg.Benefit, EventRetry: cfg.EventRetry,
		EventRetention: cfg.EventRetention, AnomalyRetention: cfg.AnomalyRetention,
	}
	if rc != nil {
		acts.Locker = redis.OrderLocker{Client: rc, TTL: 10 * time.Second, Wait: 300 * time.Millisecond}
	}
	return acts
}

// apiStores and activityStores give every noun the API and the activities use the one
// MySQL store.
func apiStores(st *mysql.Store) api.Stores {
	return api.Stores{
		Payments: st, PayLinks: st, Refunds: st, IdempotencyKeys: st, Notifications: st, Inbox: st,
		EventFeed: st, Tenants: st, APIKeys: st, Anomalies: st, Pinger: st,
	}
}

func activityStores(st *mysql.Store) activities.Stores {
	return activities.Stores{
		Payments: st, PaymentTransitions: st, PayLinks: st, QuerySchedule: st, Refunds: st, RefundTransitions: st,
		Outbox: st, EventFeed: st, Grants: st, IdempotencyKeys: st, Tenants: st, Anomalies: st,
		NotificationRecords: st, EventRetention: st, AnomalyRetention: st,
	}
}

// System is every dependency the API and the worker share, opened once by Open.
type System struct {
	Store    *mysql.Store
	Redis    *redis.Client // nil when Redis is disabled
	Temporal client.Client
	// Alipay resolves the Alipay apps; Gateways routes every channel's calls, Alipay's to
	// it.
	Alipay       *gateways.Resolver
	Gateways     gateways.Channels
	Orchestrator *orchestrator.Orchestrator
	// Secrets is the keyring of PAYKIT_SECRETS_KEYS, nil if it is not set.
	Secrets *secrets.Keyring
	trace   *tracing.Tracing // disabled unless an exporter is configured
}

// NewRegistry is the Prometheus registry of one process: Go runtime and process
// collectors, then whatever the process registers (its own counters, the Temporal SDK's).
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildinfo.Read().Collector())
	return reg
}

// Open opens every dependency. The Temporal client reports its metrics to reg;
// with tr enabled, MySQL, Redis and Temporal calls are traced.
func Open(ctx context.Context, cfg config.Config, logger *slog.Logger, reg *prometheus.Registry, tr *tracing.Tracing) (*System, error) {
	s := &System{trace: tr}
	var err error
	if s.Store, err = openTracedStore(ctx, cfg, tr); err != nil {
		return nil, err
	}
	if s.Redis, err = openRedis(cfg, logger, tr); err != nil {
		s.Close()
		return nil, err
	}
	if s.Temporal, err = DialTemporal(ctx, cfg, logger, reg, tr); err != nil {
		s.Close()
		return nil, err
	}
	limiter := callLimiter(cfg, s.Redis, logger)
	if s.Alipay, err = NewAlipayApps(cfg, s.Store, limiter); err != nil {
		s.Close()
		return nil, err
	}
	if s.Gateways, err = NewGateways(ctx, cfg, s.Alipay, limiter); err != nil {
		s.Close()
		return nil, err
	}
	if s.Secrets, err = cfg.SecretsKeyring(); err != nil {
		s.Close()
		return nil, err
	}
	if err = KeepDefaultApp(ctx, cfg, s.Store, s.Secrets, logger); err != nil {
		s.Close()
		return nil, err
	}
	s.Orchestrator = orchestrator.New(s.Temporal, cfg.TaskQueue, cfg.Timing)
	return s, nil
}

// Close closes what Open opened.
func (s *System) Close() {
	if s.Temporal != nil {
		s.Temporal.Close()
	}
	if s.Redis != nil {
		_ = s.Redis.Redis().Close()
	}
	if s.Store != nil {
		CloseStore(s.Store)
	}
}

// Ping checks the dependencies a worker cannot run without.
func (s *System) Ping(ctx context.Context) error {
	if err := s.Store.Ping(ctx); err != nil {
		return err
	}
	return s.Orchestrator.Ping(ctx)
}

// cache is the API's fast path on Redis, or none when Redis is disabled.
func (s *System) cache() api.Cache {
	if s.Redis == nil {
		return nil
	}
	return redis.APICache{Client: s.Redis}
}

// APIServer is the HTTP API on the system, with its settings from cfg.
func (s *System) APIServer(cfg config.Config, logger *slog.Logger, metrics *api.Metrics) *api.Server {
	return api.New(apiConfig(cfg), apiStores(s.Store), s.Gateways, s.Orchestrator, s.cache(), logger, metrics)
}

// apiConfig is the API's configuration from cfg.
func apiConfig(cfg config.Config) api.Config {
	ac := api.Config{IdempotencyTTL: cfg.IdempotencyTTL, IdempotencyLock: cfg.IdempotencyLock, CheckoutTokenTTL: cfg.CheckoutTokenTTL,
		InboxSettleBound: cfg.InboxSettleBound, InboxSweepInterval: cfg.InboxSweepInterval, NotificationRetention: cfg.NotificationRetention,
		Limits: cfg.Limits, AuthFailuresPerMinute: cfg.AuthFailuresPerMinute, TrustedProxies: cfg.TrustedProxies}
	if cfg.AuthFailuresPerMinute == 0 {
		ac.AuthFailuresPerMinute = -1 // no limit
	}
	if cfg.DirectCheckout {
		ac.DirectCheckoutTTL = cfg.Timing.PaymentTTL
		if !cfg.EachPaymentChange {
			// While workers record each change's own marker (older workers still poll),
			// no run reaches payment-changes-1 version 4: its own timer queries, and a
			// first query for the reconciler would only ask Alipay twice.
			ac.QueryInterval = cfg.Timing.ReconcileInterval
		}
	}
	return ac
}

// Activities are the worker's activities on the system, the reconciler and the audit
// included.
func (s *System) Activities(cfg config.Config, logger *slog.Logger) *activities.Activities {
	acts := newActivities(cfg, s.Store, s.Alipay.Default(), s.Redis, s.Temporal, s.Orchestrator, logger, s.trace)
	if err := acts.Store.Check(); err != nil {
		panic(err) // a wiring mistake, as in api.New
	}
	acts.Gateways = s.Gateways
	acts.Secrets = s.Secrets
	acts.Auditor = &audit.Auditor{Store: s.Store, Gateways: s.Gateways, Workflows: s.Orchestrator}
	acts.Watermarks = s.Store
	acts.AuditRetries = s.Store
	s.withStatements(acts, cfg, logger)
	return acts
}
