// Package config is the paykit binary's configuration: one Config, read from the
// environment with defaults. Nothing else in the program reads the environment.
package config

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/internal/buildinfo"
	"github.com/paykit/paykit/internal/temporalconn"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/redis"
	"github.com/paykit/paykit/secrets"
	"github.com/paykit/paykit/worker"
	"github.com/paykit/paykit/workflows"
)

// Config is every setting of the paykit binary, read from the environment with defaults.
// Nothing else in the program reads the environment, except OpenTelemetry's exporter and
// SDK, which read their standard OTEL_* variables (endpoint, headers, sampler, batching)
// once tracing is on.
type Config struct {
	MySQLDSN  string
	RedisAddr string // empty disables Redis (the system stays exactly-once, only slower)
	// RedisCluster and RedisMasterName say what RedisAddr is: see Redis.
	RedisCluster    bool
	RedisMasterName string
	// RedisKeyPrefix starts every key paykit writes to Redis.
	RedisKeyPrefix    string
	TemporalAddr      string
	TemporalNamespace string
	// TemporalConn is how the frontend is reached: TLS, mTLS, an API key
	// (PAYKIT_TEMPORAL_TLS*, PAYKIT_TEMPORAL_API_KEY*).
	TemporalConn temporalconn.Settings
	TaskQueue    string

	HTTPAddr string
	// APIAdminAddr serves the API's /healthz, /readyz, /metrics and pprof, apart from
	// HTTPAddr, which faces Alipay and merchants.
	APIAdminAddr string
	// WorkerAdminAddr serves the worker's /healthz, /readyz, /metrics and pprof.
	WorkerAdminAddr string
	PublicURL       string // where the channels reach the API; notify_url is PublicURL + /callbacks/alipay (or /callbacks/wechatpay)

	AlipayAppID      string
	AlipaySellerID   string
	AlipayGatewayURL string
	// AlipayCashierBaseURL, if set, replaces the scheme and host of page-pay URLs, for
	// setups where the buyer's browser reaches the gateway under another name (Docker).
	AlipayCashierBaseURL    string
	AlipayAppPrivateKey     string // PEM, or read from AlipayAppPrivateKeyFile
	AlipayPublicKey         string // PEM, or read from AlipayPublicKeyFile
	AlipayAppPrivateKeyFile string
	AlipayPublicKeyFile     string
	// AlipayCerts, when all three are set, put the adapter in certificate mode
	// (公钥证书模式); the Alipay public key is then not read.
	AlipayCerts AlipayCerts
	// WechatPay is the deployment's WeChat Pay merchant (WECHATPAY_*); without its
	// MchID, WeChat Pay is not configured.
	WechatPay WechatPay
	// SecretsKeys is the keyring that seals tenants' Alipay keys and webhook secrets at rest:
	// "id:base64key,…", 32-byte AES-256 keys, the first sealing (see docs/integrate/tenants.md, key rotation).
	SecretsKeys string

	Timing     workflows.Timing
	EventRetry payment.EventRetry // failed webhook deliveries, the workflow's and the sweeper's
	// EventRetention is how long a delivered merchant event is kept for the events feed
	// and redelivery on request; undelivered and dead ones are kept whatever their age.
	EventRetention time.Duration
	// AlipayCallRate, AlipayCallBurst and AlipayCallHold limit the calls every process
	// makes to each Alipay app on its own initiative (queries, closes): a rate a second
	// (0: no limit), its burst, and how long every call to an app is held after Alipay
	// answers that the app is over its call frequency.
	AlipayCallRate  float64
	AlipayCallBurst int
	AlipayCallHold  time.Duration
	// AnomalyRetention is how long a resolved anomaly is kept after its resolution; open
	// ones are kept whatever their age.
	AnomalyRetention time.Duration
	IdempotencyTTL   time.Duration
	// IdempotencyLock is how long an in-flight Idempotency-Key stays locked without a
	// renewal; a request renews it while it runs, so it bounds how long a crashed
	// request's key blocks the client's retry.
	IdempotencyLock  time.Duration
	CheckoutTokenTTL time.Duration
	// ReconcilerEvery is the scheduled reconciler's schedule.
	ReconcilerEvery time.Duration
	SweepEvery      time.Duration
	SweepStaleAfter time.Duration
	SweepGrantGrace time.Duration
	PurgeEvery      time.Duration
	AuditEvery      time.Duration
	Benefit         string
	// Statement is the daily statement reconciliation.
	Statement Statement

	WorkflowTaskPollers int
	// WorkflowCacheSize is the worker's sticky workflow cache (worker.Config).
	WorkflowCacheSize int
	// EachPaymentChange (PAYKIT_PAYMENT_VERSION_MARKERS=each) makes new payment runs record
	// each change's own version marker, for a rolling deploy beside workers built before
	// payment-changes-1 (worker.Config).
	EachPaymentChange   bool
	ActivityTaskPollers int
	// WorkerVersioning makes the worker poll as a Worker Deployment Version
	// (PAYKIT_WORKER_VERSIONING, PAYKIT_WORKER_DEPLOYMENT, PAYKIT_WORKER_BUILD_ID): the zero
	// value is a worker without versioning.
	WorkerVersioning worker.Versioning

	LogLevel  string
	LogFormat string // json or text
	// InboxSettleBound, InboxSweepInterval and NotificationRetention tune the inbox of
	// Alipay's notifications (api.Config).
	InboxSettleBound      time.Duration
	InboxSweepInterval    time.Duration
	NotificationRetention time.Duration
	// DirectCheckout has the API create and open page, wap and app payments itself and
	// start their workflow without waiting for its first task (PAYKIT_CHECKOUT_DIRECT,
	// on by default); off, every checkout waits for the workflow's checkout update.
	DirectCheckout bool
	// WebhookPolicy is where merchant webhooks may go: https to public addresses unless
	// PAYKIT_WEBHOOK_ALLOW_HTTP or PAYKIT_WEBHOOK_ALLOW_PRIVATE (dev and tests) say so.
	WebhookPolicy activities.WebhookPolicy
	// Limits are the per-tenant rate limits of the API (PAYKIT_RATE_*, 0 for none) and
	// its bound on a tenant's open checkout tokens (PAYKIT_MAX_OPEN_CHECKOUT_TOKENS).
	Limits api.Limits
	// AuthFailuresPerMinute is how many API keys that do not authenticate one source
	// address may present to one API process a minute before it answers 429 (0: no limit).
	AuthFailuresPerMinute int
	// TrustedProxies are the networks of the balancers in front of the API, whose
	// X-Forwarded-For names a request's source address (PAYKIT_TRUSTED_PROXIES); none by
	// default: the source is the peer.
	TrustedProxies []*net.IPNet
	// MigrateLockWait bounds how long one migration statement waits for its table's
	// metadata lock before it is retried (migrations.Options.LockWait).
	MigrateLockWait time.Duration
	// TraceOTLP exports spans over OTLP/HTTP: on when OTEL_EXPORTER_OTLP_ENDPOINT or
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set.
	TraceOTLP bool
	// TraceFile, if set (PAYKIT_TRACE_FILE), appends every span to this file as JSON
	// lines, which `paykit trace` prints as a tree.
	TraceFile string
	// TraceFileMaxBytes bounds the span file before it is rotated (PAYKIT_TRACE_FILE_MAX_MB).
	TraceFileMaxBytes int64
}

// env reads the variables of Vars, each with its default from there. A name missing from
// Vars is an error of the program (TestEveryVariableReadIsInVars).
type env struct {
	lookup   func(string) (string, bool)
	defaults map[string]string
	errs     []string
}

func newEnv(lookup func(string) (string, bool)) *env {
	e := &env{lookup: lookup, defaults: map[string]string{}}
	for _, v := range Vars() {
		e.defaults[v.Name] = v.Default
	}
	return e
}

// get returns the variable's value, or its default from Vars when it is unset or empty.
func (e *env) get(key string) (v string, set bool) {
	def, known := e.defaults[key]
	if !known {
		e.errs = append(e.errs, fmt.Sprintf("%s is read but not declared in config.Vars", key))
	}
	if v, ok := e.lookup(key); ok && v != "" {
		return v, true
	}
	return def, false
}

func (e *env) str(key string) string {
	v, _ := e.get(key)
	return v
}

func (e *env) dur(key string) time.Duration {
	v, _ := e.get(key)
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		e.errs = append(e.errs, fmt.Sprintf("%s=%q is not a positive duration like 30s or 15m", key, v))
		return 0
	}
	return d
}

func (e *env) bool(key string) bool {
	v, _ := e.get(key)
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.errs = append(e.errs, fmt.Sprintf("%s=%q is not true or false", key, v))
		return false
	}
	return b
}

// oneOf is a setting with a fixed set of values, its default among them.
func (e *env) oneOf(key string, values ...string) string {
	v, _ := e.get(key)
	for _, w := range values {
		if v == w {
			return v
		}
	}
	e.errs = append(e.errs, fmt.Sprintf("%s=%q is not one of %s", key, v, strings.Join(values, ", ")))
	return ""
}

// count is a non-negative integer setting.
func (e *env) count(key string) int {
	return e.integer(key, 0, "a non-negative integer")
}

func (e *env) int(key string) int {
	return e.integer(key, 1, "a positive integer")
}

func (e *env) integer(key string, lowest int, what string) int {
	v, _ := e.get(key)
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lowest {
		e.errs = append(e.errs, fmt.Sprintf("%s=%q is not %s", key, v, what))
		return 0
	}
	return n
}

// networks is a comma-separated list of CIDRs. A network of every address is refused: all
// of X-Forwarded-For would then be trusted, and its first address is the client's to write.
func (e *env) networks(key string) []*net.IPNet {
	v, _ := e.get(key)
	var ns []*net.IPNet
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		_, n, err := net.ParseCIDR(f)
		if err != nil {
			e.errs = append(e.errs, fmt.Sprintf("%s: %q is not a CIDR like 10.0.0.0/8, 10.0.0.5/32 or fd00::/8", key, f))
			continue
		}
		if ones, _ := n.Mask.Size(); ones == 0 {
			e.errs = append(e.errs, fmt.Sprintf("%s: %s trusts every peer, so that any client could name its own source address in X-Forwarded-For", key, f))
			continue
		}
		ns = append(ns, n)
	}
	return ns
}

// minNotificationRetention is the shortest PAYKIT_NOTIFICATION_RETENTION accepted: longer
// than Alipay's 25 h of redeliveries.
const minNotificationRetention = 48 * time.Hour

// minEventRetention is the shortest PAYKIT_EVENT_RETENTION accepted: a week, longer than
// the audit's window and its recheck of what it could not verify, and than a merchant's
// poller may reasonably be down.
const minEventRetention = 7 * 24 * time.Hour

// minAnomalyRetention is the shortest PAYKIT_ANOMALY_RETENTION accepted: 30 days after
// the resolution, for the month's books to be closed with it.
const minAnomalyRetention = 30 * 24 * time.Hour

// Load reads the configuration from the environment through lookup (os.LookupEnv).
func Load(lookup func(string) (string, bool)) (Config, error) {
	e := newEnv(lookup)
	c := Config{
		MySQLDSN:          e.str("PAYKIT_MYSQL_DSN"),
		RedisAddr:         e.str("PAYKIT_REDIS_ADDR"),
		TemporalAddr:      e.str("PAYKIT_TEMPORAL_ADDR"),
		TemporalNamespace: e.str("PAYKIT_TEMPORAL_NAMESPACE"),
		TemporalConn: temporalconn.Settings{
			TLS:        e.bool("PAYKIT_TEMPORAL_TLS"),
			CAFile:     e.str("PAYKIT_TEMPORAL_TLS_CA_FILE"),
			ServerName: e.str("PAYKIT_TEMPORAL_TLS_SERVER_NAME"),
			CertFile:   e.str("PAYKIT_TEMPORAL_TLS_CERT_FILE"),
			KeyFile:    e.str("PAYKIT_TEMPORAL_TLS_KEY_FILE"),
			APIKey:     e.str("PAYKIT_TEMPORAL_API_KEY"),
			APIKeyFile: e.str("PAYKIT_TEMPORAL_API_KEY_FILE"),
		},
		TaskQueue:       e.str("PAYKIT_TASK_QUEUE"),
		HTTPAddr:        e.str("PAYKIT_HTTP_ADDR"),
		APIAdminAddr:    e.str("PAYKIT_API_ADMIN_ADDR"),
		WorkerAdminAddr: e.str("PAYKIT_WORKER_ADMIN_ADDR"),
		PublicURL:       strings.TrimRight(e.str("PAYKIT_PUBLIC_URL"), "/"),

		AlipayAppID:             e.str("ALIPAY_APP_ID"),
		AlipaySellerID:          e.str("ALIPAY_SELLER_ID"),
		AlipayGatewayURL:        e.str("ALIPAY_GATEWAY_URL"),
		AlipayCashierBaseURL:    e.str("ALIPAY_CASHIER_BASE_URL"),
		AlipayAppPrivateKey:     e.str("ALIPAY_APP_PRIVATE_KEY"),
		AlipayPublicKey:         e.str("ALIPAY_PUBLIC_KEY"),
		AlipayAppPrivateKeyFile: e.str("ALIPAY_APP_PRIVATE_KEY_FILE"),
		AlipayPublicKeyFile:     e.str("ALIPAY_PUBLIC_KEY_FILE"),
		AlipayCerts: AlipayCerts{
			App: e.str("ALIPAY_APP_CERT"), AppFile: e.str("ALIPAY_APP_CERT_FILE"),
			Public: e.str("ALIPAY_PUBLIC_CERT"), PublicFile: e.str("ALIPAY_PUBLIC_CERT_FILE"),
			Root: e.str("ALIPAY_ROOT_CERT"), RootFile: e.str("ALIPAY_ROOT_CERT_FILE"),
		},
		SecretsKeys: e.str("PAYKIT_SECRETS_KEYS"),

		Timing: workflows.Timing{
			PaymentTTL:             e.dur("PAYKIT_PAYMENT_TTL"),
			ReconcileInterval:      e.dur("PAYKIT_RECONCILE_INTERVAL"),
			WebhookInitialInterval: e.dur("PAYKIT_WEBHOOK_INITIAL_INTERVAL"),
			WebhookMaxInterval:     e.dur("PAYKIT_WEBHOOK_MAX_INTERVAL"),
			WebhookMaxAttempts:     int32(e.int("PAYKIT_WEBHOOK_MAX_ATTEMPTS")),
		},
		EventRetry: payment.EventRetry{
			Base:        e.dur("PAYKIT_WEBHOOK_SWEEP_INITIAL_INTERVAL"),
			Max:         e.dur("PAYKIT_WEBHOOK_SWEEP_MAX_INTERVAL"),
			MaxAttempts: e.int("PAYKIT_WEBHOOK_SWEEP_MAX_ATTEMPTS"),
		},
		EventRetention:        e.dur("PAYKIT_EVENT_RETENTION"),
		AlipayCallRate:        float64(e.count("PAYKIT_ALIPAY_CALL_RATE")),
		AlipayCallBurst:       e.int("PAYKIT_ALIPAY_CALL_BURST"),
		AlipayCallHold:        e.dur("PAYKIT_ALIPAY_CALL_HOLD"),
		AnomalyRetention:      e.dur("PAYKIT_ANOMALY_RETENTION"),
		IdempotencyTTL:        e.dur("PAYKIT_IDEMPOTENCY_TTL"),
		IdempotencyLock:       e.dur("PAYKIT_IDEMPOTENCY_LOCK"),
		CheckoutTokenTTL:      e.dur("PAYKIT_CHECKOUT_TOKEN_TTL"),
		InboxSettleBound:      e.dur("PAYKIT_INBOX_SETTLE_BOUND"),
		InboxSweepInterval:    e.dur("PAYKIT_INBOX_SWEEP_INTERVAL"),
		NotificationRetention: e.dur("PAYKIT_NOTIFICATION_RETENTION"),
		DirectCheckout:        e.bool("PAYKIT_CHECKOUT_DIRECT"),
		ReconcilerEvery:       e.dur("PAYKIT_RECONCILER_EVERY"),
		SweepEvery:            e.dur("PAYKIT_SWEEP_EVERY"),
		SweepStaleAfter:       e.dur("PAYKIT_SWEEP_STALE_AFTER"),
		SweepGrantGrace:       e.dur("PAYKIT_SWEEP_GRANT_GRACE"),
		PurgeEvery:            e.dur("PAYKIT_PURGE_EVERY"),
		AuditEvery:            e.dur("PAYKIT_AUDIT_EVERY"),
		Benefit:               e.str("PAYKIT_BENEFIT"),
		Statement:             loadStatement(e),
		WorkflowTaskPollers:   e.int("PAYKIT_WORKFLOW_TASK_POLLERS"),
		WorkflowCacheSize:     e.count("PAYKIT_WORKFLOW_CACHE_SIZE"),
		EachPaymentChange:     e.oneOf("PAYKIT_PAYMENT_VERSION_MARKERS", "one", "each") == "each",
		ActivityTaskPollers:   e.int("PAYKIT_ACTIVITY_TASK_POLLERS"),
		LogLevel:              e.str("PAYKIT_LOG_LEVEL"),
		LogFormat:             e.str("PAYKIT_LOG_FORMAT"),
		TraceOTLP:             e.str("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || e.str("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "",
		TraceFile:             e.str("PAYKIT_TRACE_FILE"),
		TraceFileMaxBytes:     int64(e.count("PAYKIT_TRACE_FILE_MAX_MB")) << 20,
		MigrateLockWait:       e.dur("PAYKIT_MIGRATE_LOCK_WAIT"),
		Limits: api.Limits{
			CheckoutTokens:        float64(e.count("PAYKIT_RATE_CHECKOUT_TOKENS")),
			Checkouts:             float64(e.count("PAYKIT_RATE_CHECKOUTS")),
			Refunds:               float64(e.count("PAYKIT_RATE_REFUNDS")),
			Redeliveries:          float64(e.count("PAYKIT_RATE_REDELIVERIES")),
			Cancels:               float64(e.count("PAYKIT_RATE_CANCELS")),
			Burst:                 e.dur("PAYKIT_RATE_BURST"),
			MaxOpenCheckoutTokens: e.count("PAYKIT_MAX_OPEN_CHECKOUT_TOKENS"),
		},
		AuthFailuresPerMinute: e.count("PAYKIT_AUTH_FAILURES_PER_MINUTE"),
		TrustedProxies:        e.networks("PAYKIT_TRUSTED_PROXIES"),
		WebhookPolicy: activities.WebhookPolicy{
			RequireHTTPS:  !e.bool("PAYKIT_WEBHOOK_ALLOW_HTTP"),
			RefusePrivate: !e.bool("PAYKIT_WEBHOOK_ALLOW_PRIVATE"),
		},
	}
	c.WechatPay = loadWechatPay(e)
	c.loadRedis(e, lookup)
	c.loadVersioning(e)
	if c.SweepStaleAfter == 0 {
		// A pending payment is only suspicious once it should have been closed.
		c.SweepStaleAfter = c.Timing.PaymentTTL + 2*c.Timing.ReconcileInterval
	}
	if c.ReconcilerEvery == 0 {
		c.ReconcilerEvery = worker.DefaultReconcilerEvery(c.Timing.ReconcileInterval)
	}
	e.errs = append(e.errs, c.check()...)
	if len(e.errs) > 0 {
		return c, fmt.Errorf("configuration: %s", strings.Join(e.errs, "; "))
	}
	return c, nil
}

// loadVersioning reads the Worker Deployment Version the worker polls as, if versioning
// is on: the deployment is paykit-<task queue> unless named, the build id is the commit
// the binary was built from unless set.
func (c *Config) loadVersioning(e *env) {
	v := worker.Versioning{DeploymentName: e.str("PAYKIT_WORKER_DEPLOYMENT"), BuildID: e.str("PAYKIT_WORKER_BUILD_ID")}
	if !e.bool("PAYKIT_WORKER_VERSIONING") {
		return
	}
	if v.DeploymentName == "" {
		v.DeploymentName = "paykit-" + strings.ReplaceAll(c.TaskQueue, ".", "-")
	}
	if v.BuildID == "" {
		v.BuildID = buildinfo.Read().Commit
	}
	switch {
	case v.BuildID == "unknown":
		e.errs = append(e.errs, "PAYKIT_WORKER_BUILD_ID: this binary records no commit (go run, or -buildvcs=false); set the build id")
	case strings.Contains(v.DeploymentName, "."), strings.Contains(v.BuildID, "."):
		e.errs = append(e.errs, fmt.Sprintf("PAYKIT_WORKER_DEPLOYMENT (%q) and PAYKIT_WORKER_BUILD_ID (%q) must not contain a dot", v.DeploymentName, v.BuildID))
	}
	c.WorkerVersioning = v
}

// loadRedis reads the Redis deployment: off, one server, a cluster or Sentinels.
func (c *Config) loadRedis(e *env, lookup func(string) (string, bool)) {
	if v, ok := lookup("PAYKIT_REDIS_ADDR"); ok && (v == "" || v == "off") {
		c.RedisAddr = ""
	}
	c.RedisCluster = e.bool("PAYKIT_REDIS_CLUSTER")
	c.RedisMasterName = e.str("PAYKIT_REDIS_MASTER_NAME")
	c.RedisKeyPrefix = e.str("PAYKIT_REDIS_KEY_PREFIX")
	if p := c.RedisKeyPrefix; p == "" || len(p) > 64 || strings.ContainsAny(p, "{} \t\r\n") {
		e.errs = append(e.errs, fmt.Sprintf("PAYKIT_REDIS_KEY_PREFIX (%q): 1 to 64 bytes, with no braces (a Redis Cluster hash slot's) and no white space", p))
	}
	if c.RedisCluster && c.RedisMasterName != "" {
		e.errs = append(e.errs, "PAYKIT_REDIS_CLUSTER and PAYKIT_REDIS_MASTER_NAME exclude each other: a Redis Cluster has no Sentinel master")
	}
	if c.RedisAddr != "" {
		if err := c.Redis().Check(); err != nil {
			e.errs = append(e.errs, fmt.Sprintf("PAYKIT_REDIS_ADDR: %v (off disables Redis)", err))
		}
	}
}

// check returns what is wrong with settings that must agree with each other.
func (c Config) check() []string {
	var errs []string
	// The sweeper must not find an event due while its workflow is still retrying it.
	if c.EventRetry.Base < c.Timing.WebhookInitialInterval || c.EventRetry.Max < c.Timing.WebhookMaxInterval {
		errs = append(errs, fmt.Sprintf("PAYKIT_WEBHOOK_SWEEP_INITIAL_INTERVAL (%v) and _MAX_INTERVAL (%v) must be at least "+
			"PAYKIT_WEBHOOK_INITIAL_INTERVAL (%v) and _MAX_INTERVAL (%v), or the sweeper redelivers events the workflow is still retrying",
			c.EventRetry.Base, c.EventRetry.Max, c.Timing.WebhookInitialInterval, c.Timing.WebhookMaxInterval))
	}
	// A notification is deduped by its row: it must outlive Alipay's 25 h of redeliveries.
	if c.NotificationRetention < minNotificationRetention {
		errs = append(errs, fmt.Sprintf("PAYKIT_NOTIFICATION_RETENTION (%v) must be at least %v: Alipay redelivers a notification for 25 h, and its row is what dedupes it",
			c.NotificationRetention, minNotificationRetention))
	}
	if c.EventRetention < minEventRetention {
		errs = append(errs, fmt.Sprintf("PAYKIT_EVENT_RETENTION (%v) must be at least %v: the audit and the events feed read delivered events for that long",
			c.EventRetention, minEventRetention))
	}
	if c.AnomalyRetention < minAnomalyRetention {
		errs = append(errs, fmt.Sprintf("PAYKIT_ANOMALY_RETENTION (%v) must be at least %v after an anomaly's resolution",
			c.AnomalyRetention, minAnomalyRetention))
	}
	if c.InboxSettleBound <= 0 || c.InboxSweepInterval <= 0 {
		errs = append(errs, "PAYKIT_INBOX_SETTLE_BOUND and PAYKIT_INBOX_SWEEP_INTERVAL must be positive")
	}
	errs = append(errs, c.WechatPay.check()...)
	if err := c.AlipayCerts.check(); err != nil {
		errs = append(errs, err.Error())
	}
	if c.APIAdminAddr == c.HTTPAddr {
		errs = append(errs, "PAYKIT_API_ADMIN_ADDR must differ from PAYKIT_HTTP_ADDR: readiness, metrics and profiles stay off the public listener")
	}
	return errs
}

// DefaultAppCredentials returns the keys of the default app (ALIPAY_*): the app private
// key and the Alipay public key, from the inline variables or else from the files, and
// in certificate mode the three certificates. In certificate mode the Alipay public key
// comes from its certificate, so only an inline ALIPAY_PUBLIC_KEY is returned (and
// refused by the adapter as a mixed setup); the default file is not read.
func (c Config) DefaultAppCredentials() (payment.AlipayCredentials, error) {
	appPriv, alipayPub := c.AlipayAppPrivateKey, c.AlipayPublicKey
	if appPriv == "" {
		b, err := os.ReadFile(c.AlipayAppPrivateKeyFile)
		if err != nil {
			return payment.AlipayCredentials{}, fmt.Errorf("app private key: set ALIPAY_APP_PRIVATE_KEY or ALIPAY_APP_PRIVATE_KEY_FILE (generate dev keys with `go run ./cmd/alipaysim keygen -out .dev/keys`): %w", err)
		}
		appPriv = string(b)
	}
	if alipayPub == "" && c.AlipayCerts.set() == 0 {
		b, err := os.ReadFile(c.AlipayPublicKeyFile)
		if err != nil {
			return payment.AlipayCredentials{}, fmt.Errorf("alipay public key: set ALIPAY_PUBLIC_KEY or ALIPAY_PUBLIC_KEY_FILE: %w", err)
		}
		alipayPub = string(b)
	}
	appCert, alipayCert, rootCert, err := c.AlipayCerts.load()
	if err != nil {
		return payment.AlipayCredentials{}, err
	}
	return payment.AlipayCredentials{
		AppPrivateKeyPEM: appPriv, AlipayPublicKeyPEM: alipayPub,
		AppCertPEM: appCert, AlipayCertPEM: alipayCert, RootCertPEM: rootCert,
	}, nil
}

// SecretsKeyring returns the keyring of PAYKIT_SECRETS_KEYS, or nil if it is not set
// (then no tenant can have an Alipay app of its own).
func (c Config) SecretsKeyring() (*secrets.Keyring, error) {
	if c.SecretsKeys == "" {
		return nil, nil
	}
	kr, err := secrets.ParseKeyring(c.SecretsKeys)
	if err != nil {
		return nil, fmt.Errorf("PAYKIT_SECRETS_KEYS: %w", err)
	}
	return kr, nil
}

// Statement is the daily reconciliation's settings.
type Statement struct {
	// At is when the schedule runs each morning, China time, as an offset from midnight
	// (PAYKIT_STATEMENT_AT=09:30).
	At time.Duration
	// RetryEvery and GiveUpAfter: how often to ask again for a bill not yet published,
	// and how long after the day's end to keep asking.
	RetryEvery  time.Duration
	GiveUpAfter time.Duration
	// TempDir holds a bill while it is read (empty: the system's).
	TempDir string
}

func loadStatement(e *env) Statement {
	c := Statement{
		RetryEvery:  e.dur("PAYKIT_STATEMENT_RETRY_EVERY"),
		GiveUpAfter: e.dur("PAYKIT_STATEMENT_GIVE_UP_AFTER"),
		TempDir:     e.str("PAYKIT_STATEMENT_DIR"),
	}
	at := e.str("PAYKIT_STATEMENT_AT")
	t, err := time.Parse("15:04", at)
	if err != nil {
		e.errs = append(e.errs, fmt.Sprintf("PAYKIT_STATEMENT_AT=%q is not a China time of day like 09:30", at))
		t, _ = time.Parse("15:04", "09:30")
	}
	c.At = time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute
	return c
}

// Redis is the Redis deployment RedisAddr names: one server, a Redis Cluster (several
// addresses, or RedisCluster), or the Sentinels of RedisMasterName.
func (c Config) Redis() redis.Deployment {
	return redis.Deployment{Addr: c.RedisAddr, Cluster: c.RedisCluster, MasterName: c.RedisMasterName}
}
