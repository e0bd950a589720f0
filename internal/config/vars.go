package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/migrations"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
)

//go:generate go run ./gendoc -o ../../docs/operate/configuration.md

// Var is one environment variable of the paykit binary. Load takes each variable's
// default from here, and docs/operate/configuration.md is generated from the same table
// (go generate ./internal/config), so the reference cannot drift from the code.
type Var struct {
	// Name is the variable, e.g. PAYKIT_MYSQL_DSN.
	Name string
	// Default is the value Load uses when the variable is unset or empty, written as it
	// would be in the environment; empty is no value.
	Default string
	// Shown replaces Default in the reference when the default is derived from other
	// settings, or is not a value (off).
	Shown string
	// Doc is what the variable does, in Markdown.
	Doc string
}

// Vars is every environment variable Load reads, in the reference's order.
func Vars() []Var {
	d := workflows.DefaultTiming()
	dr := payment.DefaultEventRetry()
	return []Var{
		{Name: "PAYKIT_MYSQL_DSN", Default: "root@tcp(127.0.0.1:3306)/paykit", Doc: "go-sql-driver DSN of the database"},
		{Name: "PAYKIT_REDIS_ADDR", Default: "127.0.0.1:6379", Doc: "`host:port` or `redis://` URL; several comma-separated `host:port` are a Redis Cluster's (or, with `PAYKIT_REDIS_MASTER_NAME`, Sentinels); `off` disables Redis ([Redis](redis.md))"},
		{Name: "PAYKIT_REDIS_CLUSTER", Default: "false", Doc: "one address that is a Redis Cluster's configuration endpoint"},
		{Name: "PAYKIT_REDIS_KEY_PREFIX", Default: "paykit:", Doc: "what every key paykit writes to Redis starts with: two deployments sharing one Redis each set their own (no `{` or `}`, which would move a Redis Cluster's hash slots)"},
		{Name: "PAYKIT_REDIS_MASTER_NAME", Doc: "the Sentinel master's name: `PAYKIT_REDIS_ADDR` lists the Sentinels (excludes `PAYKIT_REDIS_CLUSTER`)"},
		{Name: "PAYKIT_TEMPORAL_ADDR", Default: "127.0.0.1:7233", Doc: "the Temporal frontend"},
		{Name: "PAYKIT_TEMPORAL_NAMESPACE", Default: "default", Doc: "the Temporal namespace"},
		{Name: "PAYKIT_TEMPORAL_TLS", Default: "false", Doc: "TLS to the frontend with the system's roots; each of the next six turns TLS on too (see [Temporal with TLS, mTLS or an API key](temporal.md))"},
		{Name: "PAYKIT_TEMPORAL_TLS_CA_FILE", Doc: "PEM bundle the frontend's certificate must chain to, instead of the system's roots"},
		{Name: "PAYKIT_TEMPORAL_TLS_SERVER_NAME", Shown: "host of the address", Doc: "name the frontend's certificate must carry (behind a load balancer, or an IP address)"},
		{Name: "PAYKIT_TEMPORAL_TLS_CERT_FILE", Doc: "client certificate (mutual TLS), read again when it changes"},
		{Name: "PAYKIT_TEMPORAL_TLS_KEY_FILE", Doc: "client key (mutual TLS), read again when it changes"},
		{Name: "PAYKIT_TEMPORAL_API_KEY", Doc: "a Temporal Cloud API key (or `PAYKIT_TEMPORAL_API_KEY_FILE`, not both)"},
		{Name: "PAYKIT_TEMPORAL_API_KEY_FILE", Doc: "a file holding the Temporal Cloud API key, read again when it changes"},
		{Name: "PAYKIT_TASK_QUEUE", Default: "payments", Doc: "the task queue of the workflows and activities"},
		{Name: "PAYKIT_HTTP_ADDR", Default: "127.0.0.1:8080", Doc: "API listen address, public: the merchant API, Alipay's callbacks and `/healthz`"},
		{Name: "PAYKIT_API_ADMIN_ADDR", Default: "127.0.0.1:8084", Doc: "the API's `/healthz`, `/readyz`, `/metrics` and `/debug/pprof/`; keep it private (it must differ from `PAYKIT_HTTP_ADDR`)"},
		{Name: "PAYKIT_WORKER_ADMIN_ADDR", Default: "127.0.0.1:8082", Doc: "the worker's `/healthz`, `/readyz`, `/metrics` and `/debug/pprof/`; keep it private"},
		{Name: "PAYKIT_PUBLIC_URL", Default: "http://127.0.0.1:8080", Doc: "how Alipay reaches the API; notify_url is `${PAYKIT_PUBLIC_URL}/callbacks/alipay`"},

		{Name: "ALIPAY_APP_ID", Default: "2021000000000001", Doc: "the default Alipay app (the simulator's by default), used by every tenant without an app of its own"},
		{Name: "ALIPAY_SELLER_ID", Default: "2088000000000001", Doc: "the default app's PID, checked on every notification"},
		{Name: "ALIPAY_GATEWAY_URL", Default: "http://127.0.0.1:8090/gateway.do", Doc: "production `https://openapi.alipay.com/gateway.do`, the sandbox, or the simulator"},
		{Name: "ALIPAY_CASHIER_BASE_URL", Doc: "rewrites the scheme and host of page-pay URLs (Docker: the browser's view of the simulator)"},
		{Name: "ALIPAY_APP_PRIVATE_KEY", Doc: "the app's private key (PEM), which signs requests; else read from `ALIPAY_APP_PRIVATE_KEY_FILE`"},
		{Name: "ALIPAY_PUBLIC_KEY", Doc: "Alipay's public key (PEM), which verifies answers and notifications in public-key mode; else read from `ALIPAY_PUBLIC_KEY_FILE`"},
		{Name: "ALIPAY_APP_PRIVATE_KEY_FILE", Default: ".dev/keys/app_private_key.pem", Doc: "the file of the app's private key"},
		{Name: "ALIPAY_PUBLIC_KEY_FILE", Default: ".dev/keys/alipay_public_key.pem", Doc: "the file of Alipay's public key (not read in certificate mode)"},
		{Name: "ALIPAY_APP_CERT", Doc: "certificate mode (公钥证书模式), when all three certificates are set (some but not all is a configuration error): the app certificate, `appCertPublicKey_<app_id>.crt`"},
		{Name: "ALIPAY_APP_CERT_FILE", Doc: "the file of `ALIPAY_APP_CERT`"},
		{Name: "ALIPAY_PUBLIC_CERT", Doc: "certificate mode: Alipay's certificate, `alipayCertPublicKey_RSA2.crt`, which then verifies instead of `ALIPAY_PUBLIC_KEY`. An answer or notification naming another `alipay_cert_sn` is refused as a bad signature: certificates are never downloaded, so after Alipay rotates its certificate, load the new one"},
		{Name: "ALIPAY_PUBLIC_CERT_FILE", Doc: "the file of `ALIPAY_PUBLIC_CERT`"},
		{Name: "ALIPAY_ROOT_CERT", Doc: "certificate mode: the root bundle, `alipayRootCert.crt`"},
		{Name: "ALIPAY_ROOT_CERT_FILE", Doc: "the file of `ALIPAY_ROOT_CERT`"},
		{Name: "WECHATPAY_MCHID", Doc: "the deployment's WeChat Pay merchant (mchid), on which every tenant's `wechat_*` payments are opened; unset, WeChat Pay is not configured: a `wechat_*` checkout is refused (422, \"WeChat Pay is not configured\") and the other `WECHATPAY_*` are not read. Its notify_url is `${PAYKIT_PUBLIC_URL}/callbacks/wechatpay`"},
		{Name: "WECHATPAY_APPID", Doc: "the appid bound to the merchant, which its payments are for and its notifications must name"},
		{Name: "WECHATPAY_MERCHANT_SERIAL", Doc: "the serial number of the merchant's API certificate; else read from `WECHATPAY_MERCHANT_SERIAL_FILE`"},
		{Name: "WECHATPAY_MERCHANT_SERIAL_FILE", Doc: "the file of `WECHATPAY_MERCHANT_SERIAL` (surrounding white space ignored)"},
		{Name: "WECHATPAY_PRIVATE_KEY", Doc: "the merchant's API private key (PEM, `apiclient_key.pem`), which signs requests; else read from `WECHATPAY_PRIVATE_KEY_FILE`"},
		{Name: "WECHATPAY_PRIVATE_KEY_FILE", Doc: "the file of `WECHATPAY_PRIVATE_KEY`"},
		{Name: "WECHATPAY_APIV3_KEY", Doc: "the APIv3 key (32 bytes), which decrypts notifications and platform certificates; else read from `WECHATPAY_APIV3_KEY_FILE`"},
		{Name: "WECHATPAY_APIV3_KEY_FILE", Doc: "the file of `WECHATPAY_APIV3_KEY`"},
		{Name: "WECHATPAY_PUBLIC_KEY", Doc: "the WeChat Pay public key (PEM, 微信支付公钥), with `WECHATPAY_PUBLIC_KEY_ID`, which verifies answers and notifications; unset, the platform certificates are fetched from `/v3/certificates` at start instead (and again for a serial not yet seen); else read from `WECHATPAY_PUBLIC_KEY_FILE`"},
		{Name: "WECHATPAY_PUBLIC_KEY_FILE", Doc: "the file of `WECHATPAY_PUBLIC_KEY`"},
		{Name: "WECHATPAY_PUBLIC_KEY_ID", Doc: "the public key's ID, `PUB_KEY_ID_…`, which requests name in `Wechatpay-Serial`; else read from `WECHATPAY_PUBLIC_KEY_ID_FILE`"},
		{Name: "WECHATPAY_PUBLIC_KEY_ID_FILE", Doc: "the file of `WECHATPAY_PUBLIC_KEY_ID` (surrounding white space ignored)"},
		{Name: "WECHATPAY_PLATFORM_CERTIFICATES", Default: "false", Doc: "with the public key, fetch the platform certificates too: while a merchant switches to the public key, WeChat Pay signs some notifications with either"},
		{Name: "WECHATPAY_BASE_URL", Default: "https://api.mch.weixin.qq.com", Doc: "WeChat Pay's API host, or the simulator's (`cmd/wechatpaysim`)"},
		{Name: "WECHATPAY_CASHIER_BASE_URL", Doc: "rewrites the scheme and host of `wechat_h5` payments' h5_url, which WeChat Pay answers on `https://wx.tenpay.com`: the browser's view of the simulator, which serves the same path (`paykit dev` sets it to its own)"},
		{Name: "PAYKIT_SECRETS_KEYS", Doc: "`id:base64key,…` (32-byte keys): seals tenants' own Alipay keys and webhook secrets; the first seals, all open (see [Tenants and their own Alipay apps](../integrate/tenants.md)). Needed by `paykit tenant` and the worker as soon as a tenant has a notify_url or its own app (`paykit dev` makes one in `.dev/keys`)"},

		{Name: "PAYKIT_PAYMENT_TTL", Default: durationText(d.PaymentTTL), Doc: "how long the buyer has to pay"},
		{Name: "PAYKIT_RECONCILE_INTERVAL", Default: durationText(d.ReconcileInterval), Doc: "the first delay of a pending payment's query backoff at Alipay (then 2, 4, 8 × it, ±20%)"},
		{Name: "PAYKIT_WEBHOOK_INITIAL_INTERVAL", Default: durationText(d.WebhookInitialInterval), Doc: "merchant webhook backoff inside the workflow: the first delay (the sweeper redelivers afterwards)"},
		{Name: "PAYKIT_WEBHOOK_MAX_INTERVAL", Default: durationText(d.WebhookMaxInterval), Doc: "merchant webhook backoff inside the workflow: the longest delay"},
		{Name: "PAYKIT_WEBHOOK_MAX_ATTEMPTS", Default: strconv.Itoa(int(d.WebhookMaxAttempts)), Doc: "merchant webhook attempts inside the workflow"},
		{Name: "PAYKIT_WEBHOOK_SWEEP_INITIAL_INTERVAL", Default: durationText(dr.Base), Doc: "per-event backoff of failed webhooks, which the sweeper follows: the first delay, at least `PAYKIT_WEBHOOK_INITIAL_INTERVAL`"},
		{Name: "PAYKIT_WEBHOOK_SWEEP_MAX_INTERVAL", Default: durationText(dr.Max), Doc: "the sweeper's longest delay, at least `PAYKIT_WEBHOOK_MAX_INTERVAL`"},
		{Name: "PAYKIT_WEBHOOK_SWEEP_MAX_ATTEMPTS", Default: strconv.Itoa(dr.MaxAttempts), Doc: "the cap on an event's deliveries, the workflow's attempts included"},
		{Name: "PAYKIT_IDEMPOTENCY_TTL", Default: "24h", Doc: "how long Idempotency-Keys are kept"},
		{Name: "PAYKIT_IDEMPOTENCY_LOCK", Default: durationText(api.DefaultIdempotencyLock), Doc: "how long an in-flight Idempotency-Key stays locked without a renewal (its request renews it every third of this while it runs): the longest a crashed request blocks its client's retry"},
		{Name: "PAYKIT_CHECKOUT_TOKEN_TTL", Default: "30m", Doc: "how long an unspent checkout token lives"},
		{Name: "PAYKIT_INBOX_SETTLE_BOUND", Default: durationText(api.DefaultInboxSettleBound), Doc: "how long an acknowledged notification may go without its effect before the inbox hands it over again (then with backoff, doubling to 15 minutes)"},
		{Name: "PAYKIT_INBOX_SWEEP_INTERVAL", Default: durationText(api.DefaultInboxSweepInterval), Doc: "how often each API process sweeps the inbox"},
		{Name: "PAYKIT_NOTIFICATION_RETENTION", Default: durationText(api.DefaultNotificationRetention), Doc: "how long a notification that needs nothing more is kept (at least 48 h: its row dedupes Alipay's 25 h of redeliveries); unsettled ones are kept whatever their age"},
		{Name: "PAYKIT_EVENT_RETENTION", Default: durationText(payment.DefaultEventRetention), Doc: "how long a delivered merchant event is kept (at least 168 h) for the events feed and redelivery on request; undelivered and dead events are kept whatever their age. The scheduled purge (`paykit-purge-<queue>`) deletes the older ones"},
		{Name: "PAYKIT_ANOMALY_RETENTION", Default: durationText(payment.DefaultAnomalyRetention), Doc: "how long a resolved anomaly is kept after its resolution (at least 720 h); open anomalies are kept whatever their age. The scheduled purge deletes the older ones"},
		{Name: "PAYKIT_ALIPAY_CALL_RATE", Default: "100", Doc: "calls a second each Alipay app may get on paykit's own initiative (queries, closes, bill downloads), shared by every process through Redis; 0 for no limit. See [Running in production](production.md)"},
		{Name: "PAYKIT_ALIPAY_CALL_BURST", Default: "50", Doc: "the burst of `PAYKIT_ALIPAY_CALL_RATE`"},
		{Name: "PAYKIT_ALIPAY_CALL_HOLD", Default: "1s", Doc: "how long every process holds an app's limited calls after Alipay answers 40005 (over its call frequency)"},
		{Name: "PAYKIT_CHECKOUT_DIRECT", Default: "true", Doc: "a page, wap or app checkout is created by the API, which starts its workflow without waiting for its first task; `false` leaves every checkout to the workflow's checkout update"},
		{Name: "PAYKIT_RECONCILER_EVERY", Shown: "`PAYKIT_RECONCILE_INTERVAL` / 4, within 1 s to 15 s", Doc: "how often the scheduled reconciler (`paykit-reconcile-<queue>`) makes a pass: each queries Alipay about the pending payments whose next query is due and wakes the runs of those Alipay says are paid; one run makes twenty passes (from 1 to 5 minutes of them), and the schedule starts one each such period"},
		{Name: "PAYKIT_SWEEP_EVERY", Default: "1m", Doc: "the sweeper's schedule"},
		{Name: "PAYKIT_SWEEP_STALE_AFTER", Shown: "`PAYKIT_PAYMENT_TTL` + 2 × `PAYKIT_RECONCILE_INTERVAL`", Doc: "how old a pending payment is before the sweeper looks at it"},
		{Name: "PAYKIT_SWEEP_GRANT_GRACE", Default: durationText(activities.DefaultGrantGrace), Doc: "how long after MarkPaid the sweeper grants a benefit the workflow has not"},
		{Name: "PAYKIT_PURGE_EVERY", Default: "1h", Doc: "the purge schedule: expired Idempotency-Keys, then delivered events and resolved anomalies past their retention"},
		{Name: "PAYKIT_AUDIT_EVERY", Default: "24h", Doc: "the audit schedule; each run audits what changed since its watermark, one such interval at a time, up to `PAYKIT_PAYMENT_TTL` + 1 h (the webhook SLA) before the run was due"},
		{Name: "PAYKIT_BENEFIT", Default: "order_fulfilment", Doc: "the benefit a paid payment grants"},
		{Name: "PAYKIT_STATEMENT_AT", Default: "09:30", Doc: "when the daily statement reconciliation runs, China time"},
		{Name: "PAYKIT_STATEMENT_RETRY_EVERY", Default: durationText(workflows.DefaultStatementRetryEvery), Doc: "how often to ask again for a bill Alipay has not published yet"},
		{Name: "PAYKIT_STATEMENT_GIVE_UP_AFTER", Default: durationText(workflows.DefaultStatementGiveUp), Doc: "how long after the day's end to keep asking for its bill"},
		{Name: "PAYKIT_STATEMENT_DIR", Shown: "the system's", Doc: "where a bill is kept while it is read"},
		{Name: "PAYKIT_WORKFLOW_TASK_POLLERS", Default: "16", Doc: "the worker's long polls on the workflow task queue"},
		{Name: "PAYKIT_ACTIVITY_TASK_POLLERS", Default: "8", Doc: "the worker's long polls on the activity task queue"},
		{Name: "PAYKIT_WORKFLOW_CACHE_SIZE", Default: "0", Doc: "workflow executions the worker keeps in its sticky cache; `0` turns sticky execution off, so that every workflow task poll serves the task queue (with sticky execution on, the SDK sends every poll to the sticky queue while a sticky poll's backlog hint is stale, and new checkouts' first workflow tasks wait)"},
		{Name: "PAYKIT_WORKER_VERSIONING", Default: "false", Doc: "`true` makes the worker poll as a Worker Deployment Version: payment and refund runs are pinned to the build that started them, and new runs go to the deployment's current version, which an operator sets (see [Upgrades](upgrades.md#worker-versioning))"},
		{Name: "PAYKIT_WORKER_DEPLOYMENT", Shown: "`paykit-` and the task queue", Doc: "the Worker Deployment the worker's version belongs to, with `PAYKIT_WORKER_VERSIONING` (no dots)"},
		{Name: "PAYKIT_WORKER_BUILD_ID", Shown: "the binary's commit", Doc: "the worker's build id within its deployment, with `PAYKIT_WORKER_VERSIONING` (no dots); a binary built without VCS information (`go run`) must set it"},
		{Name: "PAYKIT_PAYMENT_VERSION_MARKERS", Default: "one", Doc: "`each` makes new payment runs record each change's own version marker instead of the one `payment-changes-1` stands for: set it on the new workers while workers built before `payment-changes-1` still poll the task queue (see [Upgrades](upgrades.md#upgrading-from-a-build-before-payment-changes-1)), and unset it once they are gone"},
		{Name: "PAYKIT_LOG_LEVEL", Default: "info", Doc: "`debug`, `info`, `warn` or `error`"},
		{Name: "PAYKIT_LOG_FORMAT", Default: "json", Doc: "`json`, or `text` for humans"},
		{Name: "PAYKIT_RATE_CHECKOUT_TOKENS", Default: strconv.Itoa(api.DefaultCheckoutTokenRate), Doc: "per-tenant checkout tokens a second, shared by the API processes through Redis; `0` is no limit"},
		{Name: "PAYKIT_RATE_CHECKOUTS", Default: strconv.Itoa(api.DefaultCheckoutRate), Doc: "per-tenant checkouts a second; `0` is no limit"},
		{Name: "PAYKIT_RATE_REFUNDS", Default: strconv.Itoa(api.DefaultRefundRate), Doc: "per-tenant refunds a second; `0` is no limit"},
		{Name: "PAYKIT_RATE_REDELIVERIES", Default: strconv.Itoa(api.DefaultRedeliveryRate), Doc: "per-tenant webhook redeliveries asked a second; `0` is no limit"},
		{Name: "PAYKIT_RATE_CANCELS", Default: strconv.Itoa(api.DefaultCancelRate), Doc: "per-tenant payment cancels a second (each may hold a Temporal call for up to 10 s); `0` is no limit"},
		{Name: "PAYKIT_RATE_BURST", Default: durationText(api.DefaultRateBurst), Doc: "how much of its rate a tenant may spend at once"},
		{Name: "PAYKIT_MAX_OPEN_CHECKOUT_TOKENS", Default: strconv.Itoa(api.DefaultMaxOpenCheckoutTokens), Doc: "unspent checkout tokens a tenant may hold; `0` is no bound"},
		{Name: "PAYKIT_AUTH_FAILURES_PER_MINUTE", Default: strconv.Itoa(api.DefaultAuthFailuresPerMinute), Doc: "API keys that do not authenticate one source address may have looked up by one API process a minute; `0` is no limit. Past it, the source's keys are still looked up within a few a second for every such source together, so that a valid key passes, and answered 429 when those are spent too"},
		{Name: "PAYKIT_TRUSTED_PROXIES", Shown: "(none)", Doc: "comma-separated CIDRs of the load balancers or ingresses in front of the API, e.g. `10.0.0.0/8,fd00::/8`: from a peer in one of them, a request's source address (which `PAYKIT_AUTH_FAILURES_PER_MINUTE` counts) is the last `X-Forwarded-For` address outside them. Unset, it is the peer's address and `X-Forwarded-For` is ignored: behind a balancer every client then shares its address (see [Running in production](production.md#source-addresses-behind-a-load-balancer))"},
		{Name: "PAYKIT_WEBHOOK_ALLOW_HTTP", Default: "false", Doc: "merchant webhooks go only to `https` notify_urls; `true` allows plain http (`paykit dev` and the tests). `paykit tenant -notify-url` checks the URL the same way"},
		{Name: "PAYKIT_WEBHOOK_ALLOW_PRIVATE", Default: "false", Doc: "merchant webhooks go only to public addresses: a loopback, private, link-local (cloud metadata), carrier-grade NAT or other special-purpose address is refused when the worker connects, after DNS, so a name resolving inside is refused too, and no proxy is used; `true` allows internal hosts (`paykit dev` and the tests)"},
		{Name: "PAYKIT_MIGRATE_LOCK_WAIT", Default: durationText(migrations.DefaultLockWait), Doc: "`paykit migrate`: how long one DDL statement waits for its table's metadata lock before it gives way to the application's queries and is retried (see [Migrating a live database](migrations.md))"},
		{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Shown: "(off)", Doc: "turns tracing on: spans go over OTLP/HTTP (protobuf) to this collector, e.g. `http://otel-collector:4318`; the exporter's other standard `OTEL_*` variables (headers, timeout), the sampler (`OTEL_TRACES_SAMPLER`, default: every trace) and the batching (`OTEL_BSP_*`) apply, read by OpenTelemetry's SDK"},
		{Name: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", Shown: "(off)", Doc: "as `OTEL_EXPORTER_OTLP_ENDPOINT`, for traces only"},
		{Name: "PAYKIT_TRACE_FILE", Shown: "(off; `paykit dev`: `.dev/traces.jsonl`)", Doc: "also turns tracing on: every span appended to this file as a JSON line, which `paykit trace` prints"},
		{Name: "PAYKIT_TRACE_FILE_MAX_MB", Default: "256", Doc: "the span file is rotated to `<file>.1` (replacing the one before) once past this size, by whichever process writes it next; every process writing it follows the new file"},
	}
}

// durationText writes d as a person would set it: 15m, 24h, 1h30m, not 15m0s.
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Reference is the Markdown table of Vars, which go generate writes into
// docs/operate/configuration.md between ReferenceBegin and ReferenceEnd.
func Reference() string {
	var b strings.Builder
	b.WriteString("| variable | default | meaning |\n|---|---|---|\n")
	for _, v := range Vars() {
		def := v.Shown
		if def == "" && v.Default != "" {
			def = "`" + v.Default + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", v.Name, def, strings.ReplaceAll(v.Doc, "|", `\|`))
	}
	return b.String()
}

// The markers around the generated table in docs/operate/configuration.md.
const (
	ReferenceBegin = "<!-- BEGIN generated by go generate ./internal/config from config.Vars; do not edit -->"
	ReferenceEnd   = "<!-- END generated -->"
)

// WithReference returns page with the text between its markers replaced by Reference.
func WithReference(page string) (string, error) {
	i := strings.Index(page, ReferenceBegin)
	j := strings.Index(page, ReferenceEnd)
	if i < 0 || j < i {
		return "", fmt.Errorf("config: the page lacks the markers %q and %q", ReferenceBegin, ReferenceEnd)
	}
	return page[:i+len(ReferenceBegin)] + "\n" + Reference() + page[j:], nil
}
