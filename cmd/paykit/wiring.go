package main

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
	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/internal/temporalmetrics"
	"github.com/paykit/paykit/internal/tracing"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/orchestrator"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/redis"
)

func newLogger(cfg config.Config) *slog.Logger {
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

func openStore(ctx context.Context, cfg config.Config) (*mysql.Store, error) {
	return openTracedStore(ctx, cfg, nil)
}

// openTracedStore is openStore with a span per SQL call when tr is enabled.
func openTracedStore(ctx context.Context, cfg config.Config, tr *tracing.Tracing) (*mysql.Store, error) {
	var opts []mysql.OpenOption
	if tr.Enabled() {
		opts = append(opts, mysql.WithTracing())
	}
	db, err := mysql.Open(ctx, cfg.MySQLDSN, opts...)
	if err != nil {
		return nil, fmt.Errorf("mysql at %s (is MariaDB running? start it with `start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd`; a missing database is created by `paykit migrate`): %w", redactDSN(cfg.MySQLDSN), err)
	}
	return mysql.NewStore(db), nil
}

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
	rc := redis.New(gc, "paykit:")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := rc.Ping(ctx); err != nil {
		logger.Warn("redis unavailable at start; continuing on MySQL alone until it answers", "addr", cfg.RedisAddr, "deployment", cfg.Redis().Kind(), "err", err)
	}
	return rc, nil
}

// dialTemporal connects the client; with tr enabled, its calls, and the workflows and
// activities of any worker made from it, are traced.
func dialTemporal(ctx context.Context, cfg config.Config, logger *slog.Logger, reg *prometheus.Registry, tr *tracing.Tracing) (client.Client, error) {
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

// newGateways returns the gateway resolver: each tenant's own Alipay app, and the
// default app of the environment (ALIPAY_*) for tenants without one.
func newGateways(cfg config.Config, store gateways.Store) (*gateways.Resolver, error) {
	creds, err := cfg.DefaultAppCredentials()
	if err != nil {
		return nil, err
	}
	build := alipayApps(cfg).Build
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

// alipayApps builds the gateways of Alipay apps on the configured gateway URL.
func alipayApps(cfg config.Config) gateways.Alipay {
	return gateways.Alipay{GatewayURL: cfg.AlipayGatewayURL, NotifyURL: cfg.PublicURL + "/callbacks/alipay", CashierBaseURL: cfg.AlipayCashierBaseURL}
}

func newActivities(cfg config.Config, store *mysql.Store, gw payment.Gateway, rc *redis.Client, tc client.Client, orch *orchestrator.Orchestrator, logger *slog.Logger, tr *tracing.Tracing) *activities.Activities {
	acts := &activities.Activities{
		Store: activityStores(store), Gateway: gw, WebhookPolicy: cfg.WebhookPolicy,
		HTTP:     &http.Client{Timeout: 10 * time.Second, Transport: tr.Transport("webhook", activities.NewWebhookTransport(cfg.WebhookPolicy))},
		Temporal: tc, Redriver: orch, RefundRedriver: orch, Logger: logger, Benefit: cfg.Benefit, EventRetry: cfg.EventRetry,
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
		EventFeed: st, Tenants: st, Anomalies: st, Pinger: st,
	}
}

func activityStores(st *mysql.Store) activities.Stores {
	return activities.Stores{
		Payments: st, PaymentTransitions: st, PayLinks: st, Refunds: st, RefundTransitions: st,
		Outbox: st, EventFeed: st, Grants: st, IdempotencyKeys: st, Tenants: st, Anomalies: st,
	}
}

// system is every dependency the API and the worker share, opened once.
type system struct {
	store *mysql.Store
	redis *redis.Client // nil when Redis is disabled
	tc    client.Client
	gws   *gateways.Resolver
	orch  *orchestrator.Orchestrator
	trace *tracing.Tracing // disabled unless an exporter is configured
}

// newRegistry is the Prometheus registry of one process: Go runtime and process
// collectors, then whatever the process registers (its own counters, the Temporal SDK's).
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// openSystem opens every dependency. The Temporal client reports its metrics to reg;
// with tr enabled, MySQL, Redis and Temporal calls are traced.
func openSystem(ctx context.Context, cfg config.Config, logger *slog.Logger, reg *prometheus.Registry, tr *tracing.Tracing) (*system, error) {
	s := &system{trace: tr}
	var err error
	if s.store, err = openTracedStore(ctx, cfg, tr); err != nil {
		return nil, err
	}
	if s.redis, err = openRedis(cfg, logger, tr); err != nil {
		s.close()
		return nil, err
	}
	if s.tc, err = dialTemporal(ctx, cfg, logger, reg, tr); err != nil {
		s.close()
		return nil, err
	}
	if s.gws, err = newGateways(cfg, s.store); err != nil {
		s.close()
		return nil, err
	}
	s.orch = orchestrator.New(s.tc, cfg.TaskQueue, cfg.Timing)
	return s, nil
}

func (s *system) close() {
	if s.tc != nil {
		s.tc.Close()
	}
	if s.redis != nil {
		_ = s.redis.Redis().Close()
	}
	if s.store != nil {
		_ = s.store.Close()
		_ = s.store.DB().Close()
	}
}

// ping checks the dependencies a worker cannot run without.
func (s *system) ping(ctx context.Context) error {
	if err := s.store.Ping(ctx); err != nil {
		return err
	}
	return s.orch.Ping(ctx)
}

func (s *system) cache() api.Cache {
	if s.redis == nil {
		return nil
	}
	return redis.APICache{Client: s.redis}
}

func (s *system) apiServer(cfg config.Config, logger *slog.Logger, metrics *api.Metrics) *api.Server {
	ac := api.Config{IdempotencyTTL: cfg.IdempotencyTTL, IdempotencyLock: cfg.IdempotencyLock, CheckoutTokenTTL: cfg.CheckoutTokenTTL,
		InboxSettleBound: cfg.InboxSettleBound, InboxSweepInterval: cfg.InboxSweepInterval, NotificationRetention: cfg.NotificationRetention}
	if cfg.DirectCheckout {
		ac.DirectCheckoutTTL = cfg.Timing.PaymentTTL
	}
	return api.New(ac, apiStores(s.store), s.gws, s.orch, s.cache(), logger, metrics)
}

func (s *system) activities(cfg config.Config, logger *slog.Logger) *activities.Activities {
	acts := newActivities(cfg, s.store, s.gws.Default(), s.redis, s.tc, s.orch, logger, s.trace)
	acts.Gateways = s.gws
	acts.Auditor = &audit.Auditor{Store: s.store, Gateways: s.gws, Workflows: s.orch}
	acts.Watermarks = s.store
	s.withStatements(acts, cfg, logger)
	return acts
}
