// Command paykit runs the payment system: the HTTP API, the Temporal worker, the
// migrations, tenant administration, the operator's anomaly list and audit, and `dev`,
// which runs everything locally.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/audit"
	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/migrations"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/redis"
	"github.com/paykit/paykit/secrets"
	"github.com/paykit/paykit/worker"
)

const usage = `usage: paykit <command> [flags]

commands:
  dev       run the whole system locally: Temporal dev server + UI, migrations, Redis,
            the Alipay simulator, the worker and the API
  api       run the HTTP API
  worker    run the Temporal worker (workflows, activities, schedules)
  migrate   create the database if missing and apply the migrations (-down-to N [-force]: roll back)
  temporal-setup
            create the Temporal namespace if missing and register the payment search
            attributes (a real Temporal server; the dev server does it itself)
  tenant    create or update a tenant (see: paykit tenant -h)
  anomalies list payments an operator must resolve (see: paykit anomalies -h)
  audit     compare a window of payments with Alipay and report broken invariants;
            exits 1 on findings, 2 if it cannot audit (see: paykit audit -h)
  statement show (with -run: reconcile) a day's Alipay bill against the local records;
            exits 1 on discrepancies, 2 if there is no report (see: paykit statement -h)
  trace     print a payment's spans as a tree from a PAYKIT_TRACE_FILE (see: paykit trace -h)

Configuration comes from the environment; see README.md.`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := config.Load(os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "paykit:", err)
		os.Exit(2)
	}
	logger := newLogger(cfg)
	slog.SetDefault(logger)
	goredis.SetLogger(redis.SlogLogger{Logger: logger})
	cmd, args := os.Args[1], os.Args[2:]
	switch cmd {
	case "api":
		err = runAPI(ctx, cfg, logger)
	case "worker":
		err = runWorker(ctx, cfg, logger)
	case "migrate":
		err = runMigrateCmd(ctx, cfg, args, logger)
	case "temporal-setup":
		err = runTemporalSetup(ctx, cfg, args, logger)
	case "tenant":
		err = runTenant(ctx, cfg, args)
	case "anomalies":
		err = runAnomalies(ctx, cfg, args, os.Stdout)
	case "audit":
		code := runAudit(ctx, cfg, args, os.Stdout, os.Stderr, logger)
		stop()
		os.Exit(code)
	case "statement":
		code := runStatement(ctx, cfg, args, os.Stdout, os.Stderr, logger)
		stop()
		os.Exit(code)
	case "dev":
		err = runDev(ctx, cfg, args)
	case "trace":
		err = runTrace(cfg, args, os.Stdout)
	case "-h", "--help", "help":
		fmt.Println(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "paykit: unknown command %q\n\n%s\n", cmd, usage)
		os.Exit(2)
	}
	if code := exitCode(logger, cmd, err); code != 0 {
		os.Exit(code)
	}
}

// exitCode logs a command's failure and returns the exit code. Asking for help (-h),
// which the flag package returns as flag.ErrHelp after printing the usage, is not a
// failure, nor is an interrupt.
func exitCode(logger *slog.Logger, cmd string, err error) int {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	logger.Error("paykit "+cmd+" failed", "err", err)
	return 1
}

// runMigrate creates the database if it is missing (CREATE DATABASE IF NOT EXISTS, so a
// user without that privilege on an existing database loses nothing) and applies the
// migrations.
func runMigrate(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	if err := ensureDatabase(ctx, cfg.MySQLDSN); err != nil {
		logger.Warn("could not create the database; migrating it if it exists", "err", err)
	}
	store, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = store.Close(); _ = store.DB().Close() }()
	if err := migrations.UpWith(ctx, store.DB(), migrateOptions(cfg, logger)); err != nil {
		return err
	}
	v, err := migrations.Version(ctx, store.DB())
	if err != nil {
		return err
	}
	logger.Info("migrations applied", "version", v)
	return nil
}

func migrateOptions(cfg config.Config, logger *slog.Logger) migrations.Options {
	return migrations.Options{LockWait: cfg.MigrateLockWait, Logger: logger}
}

// runMigrateCmd is `paykit migrate`: up to the latest version, or with -down-to back to
// a version, which refuses to drop tables holding payments, refunds or credentials
// unless -force.
func runMigrateCmd(ctx context.Context, cfg config.Config, args []string, logger *slog.Logger) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	downTo := fs.Int64("down-to", -1, "roll back to this version (0: an empty schema) instead of migrating up")
	force := fs.Bool("force", false, "with -down-to: drop tables and columns even if they hold records")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *downTo < 0 {
		if *force {
			return errors.New("migrate: -force goes with -down-to")
		}
		return runMigrate(ctx, cfg, logger)
	}
	store, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = store.Close(); _ = store.DB().Close() }()
	o := migrateOptions(cfg, logger)
	o.Force = *force
	if err := migrations.DownTo(ctx, store.DB(), *downTo, o); err != nil {
		return err
	}
	logger.Info("migrations rolled back", "version", *downTo)
	return nil
}

func runAPI(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	tr, err := setupTracing(ctx, cfg, "paykit-api", logger)
	if err != nil {
		return err
	}
	defer shutdownTracing(tr, logger)
	reg := newRegistry()
	sys, err := openSystem(ctx, cfg, logger, reg, tr)
	if err != nil {
		return err
	}
	defer sys.close()
	startPprof(ctx, cfg, logger)
	logger.Info("api listening", "addr", cfg.HTTPAddr, "notify_url", cfg.PublicURL+"/callbacks/alipay")
	return sys.apiServer(cfg, logger, api.NewMetrics(reg)).ListenAndServe(ctx, cfg.HTTPAddr, 20*time.Second)
}

func runWorker(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	tr, err := setupTracing(ctx, cfg, "paykit-worker", logger)
	if err != nil {
		return err
	}
	defer shutdownTracing(tr, logger)
	reg := newRegistry()
	sys, err := openSystem(ctx, cfg, logger, reg, tr)
	if err != nil {
		return err
	}
	defer sys.close()
	startPprof(ctx, cfg, logger)
	acts := sys.activities(cfg, logger)
	acts.Metrics = activities.NewMetrics(reg)
	acts.StatementMetrics = activities.NewStatementMetrics(reg)
	wcfg := workerConfig(cfg, sys.statementAppIDs(ctx, cfg, logger))
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return worker.Run(gctx, sys.tc, wcfg, acts, logger) })
	g.Go(func() error { return runGauges(gctx, sys, wcfg, reg, logger) })
	g.Go(func() error {
		logger.Info("worker admin listening", "addr", cfg.WorkerAdminAddr, "endpoints", "/healthz /readyz /metrics")
		return serve(gctx, cfg.WorkerAdminAddr, worker.AdminHandler(reg, sys.ping, logger))
	})
	return g.Wait()
}

func workerConfig(cfg config.Config, statementAppIDs []string) worker.Config {
	return worker.Config{
		TaskQueue: cfg.TaskQueue, SweepEvery: cfg.SweepEvery, SweepStaleAfter: cfg.SweepStaleAfter,
		SweepGrantGrace: cfg.SweepGrantGrace, PurgeEvery: cfg.PurgeEvery,
		AuditEvery: cfg.AuditEvery, AuditLag: auditLag(cfg),
		MaxConcurrentActivities: 200, MaxConcurrentLocalActivities: 200, ShutdownGrace: 20 * time.Second,
		WorkflowTaskPollers: cfg.WorkflowTaskPollers, ActivityTaskPollers: cfg.ActivityTaskPollers,
		WorkflowCacheSize: cfg.WorkflowCacheSize,
		Statements:        statementSchedule(cfg, statementAppIDs),
	}
}

// auditLag is how long before a scheduled audit its window ends: long enough that every
// payment in it is past its expiry plus the pending grace, and one paid at the last moment
// of its life is past the grant and webhook SLAs. A lag of the SLAs alone let a payment
// created near the window's end and paid near its expiry be audited before its webhook
// was due, and never again.
func auditLag(cfg config.Config) time.Duration {
	ttl := cfg.Timing.PaymentTTL
	return max(ttl+audit.DefaultGrantSLA, ttl+audit.DefaultWebhookSLA, ttl+audit.DefaultPendingGrace)
}

// tenantFlags are the flags of `paykit tenant`.
type tenantFlags struct {
	id, name, apiKey, notifyURL, secret, appID, seller string
	autoRefund                                         bool
	// Files with the tenant's own Alipay app keys; empty leaves the stored ones.
	appPrivateKeyFile, alipayPublicKeyFile, appCertFile, alipayCertFile, rootCertFile string
	clearKeys                                                                         bool
	reencrypt                                                                         bool
	newKey                                                                            string
	// given names the flags on the command line; nil (a flag set built in a test) counts
	// every field as given. A field whose flag is not given keeps the stored value.
	given map[string]bool
}

// has reports whether the flag name was on the command line.
func (f tenantFlags) has(name string) bool { return f.given == nil || f.given[name] }

// over fills the fields whose flags were not given from the stored tenant, so that a
// re-run with fewer flags (a key rotation, say) changes only what it names.
func (f tenantFlags) over(old payment.Tenant) tenantFlags {
	keep := func(flag string, dst *string, v string) {
		if !f.has(flag) {
			*dst = v
		}
	}
	keep("name", &f.name, old.Name)
	keep("notify-url", &f.notifyURL, old.NotifyURL)
	keep("webhook-secret", &f.secret, old.WebhookSecret)
	keep("alipay-app-id", &f.appID, old.AlipayAppID)
	keep("alipay-seller-id", &f.seller, old.AlipaySeller)
	if !f.has("auto-refund-paid-after-close") {
		f.autoRefund = old.AutoRefundPaidAfterClose
	}
	return f
}

func runTenant(ctx context.Context, cfg config.Config, args []string) error {
	f, rot, err := parseTenantFlags(cfg, args)
	if err != nil {
		return err
	}
	return runTenantWith(ctx, cfg, f, rot)
}

// parseTenantFlags reads `paykit tenant`'s flags and records which were given.
func parseTenantFlags(cfg config.Config, args []string) (tenantFlags, secretRotation, error) {
	var f tenantFlags
	fs := flag.NewFlagSet("tenant", flag.ContinueOnError)
	fs.StringVar(&f.id, "id", "", "tenant id (A-Z a-z 0-9 _ -)")
	fs.StringVar(&f.name, "name", "", "display name")
	fs.StringVar(&f.apiKey, "api-key", "", "API key the tenant authenticates with (stored only as a hash); required for a new tenant. "+
		"On an existing tenant every flag left out keeps its stored value")
	fs.StringVar(&f.notifyURL, "notify-url", "", "merchant webhook URL")
	fs.StringVar(&f.secret, "webhook-secret", "", "HMAC-SHA256 secret for webhook signatures")
	fs.StringVar(&f.appID, "alipay-app-id", cfg.AlipayAppID, "Alipay app_id for this tenant (another app than ALIPAY_APP_ID needs its keys)")
	fs.StringVar(&f.seller, "alipay-seller-id", cfg.AlipaySellerID, "Alipay seller_id (PID) for this tenant")
	fs.BoolVar(&f.autoRefund, "auto-refund-paid-after-close", false, "refund money Alipay takes for a payment closed locally as soon as it is detected")
	fs.StringVar(&f.appPrivateKeyFile, "alipay-app-private-key-file", "", "PEM file of the tenant's own app private key (sealed with PAYKIT_SECRETS_KEYS)")
	fs.StringVar(&f.alipayPublicKeyFile, "alipay-public-key-file", "", "PEM file of the Alipay public key of the tenant's app")
	fs.StringVar(&f.appCertFile, "alipay-app-cert-file", "", "certificate mode: the app's certificate (appCertPublicKey_….crt)")
	fs.StringVar(&f.alipayCertFile, "alipay-public-cert-file", "", "certificate mode: Alipay's certificate (alipayCertPublicKey_RSA2.crt)")
	fs.StringVar(&f.rootCertFile, "alipay-root-cert-file", "", "certificate mode: Alipay's root certificate (alipayRootCert.crt)")
	fs.BoolVar(&f.clearKeys, "clear-alipay-keys", false, "remove the tenant's own app keys; its payments go through the default app")
	fs.BoolVar(&f.reencrypt, "reencrypt", false, "seal every tenant's Alipay keys again under the first key of PAYKIT_SECRETS_KEYS (after a rotation), then exit")
	fs.StringVar(&f.newKey, "new-secrets-key", "", "print a new random key for PAYKIT_SECRETS_KEYS with this id, then exit")
	var rot secretRotation
	fs.StringVar(&rot.newSecret, "rotate-webhook-secret", "", "make this the webhook secret, keeping the current one valid for -old-secret-valid-for (changes nothing else)")
	fs.DurationVar(&rot.window, "old-secret-valid-for", defaultOldSecretWindow, "how long the rotated-out webhook secret still signs")
	fs.BoolVar(&rot.expireOld, "expire-old-secret", false, "stop signing with the rotated-out webhook secret now (changes nothing else)")
	if err := fs.Parse(args); err != nil {
		return f, rot, err
	}
	f.given = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.given[fl.Name] = true })
	return f, rot, nil
}

func runTenantWith(ctx context.Context, cfg config.Config, f tenantFlags, rot secretRotation) error {
	if rot.requested() {
		store, err := openStore(ctx, cfg)
		if err != nil {
			return err
		}
		defer func() { _ = store.Close(); _ = store.DB().Close() }()
		msg, err := rotateSecret(ctx, store, f.id, rot, time.Now())
		if err == nil {
			fmt.Println(msg)
		}
		return err
	}
	if f.newKey != "" {
		k, err := secrets.NewKey(f.newKey)
		if err != nil {
			return err
		}
		fmt.Println(k)
		return nil
	}
	if f.reencrypt {
		kr, err := cfg.SecretsKeyring()
		if err != nil {
			return err
		}
		if kr == nil {
			return errNoSecretsKey
		}
		store, err := openStore(ctx, cfg)
		if err != nil {
			return err
		}
		defer func() { _ = store.Close(); _ = store.DB().Close() }()
		n, total, err := reencryptTenants(ctx, store, kr)
		fmt.Printf("re-encrypted %d of %d tenants' Alipay keys (current and kept apps) under key %q\n", n, total, kr.PrimaryID())
		return err
	}
	if err := payment.ValidateTenantID(f.id); err != nil {
		return err
	}
	if f.has("api-key") && len(f.apiKey) < 16 {
		return errors.New("tenant: -api-key must be at least 16 characters")
	}
	creds, setKeys, err := f.credentials()
	if err != nil {
		return err
	}
	store, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = store.Close(); _ = store.DB().Close() }()
	return setTenant(ctx, cfg, store, f, creds, setKeys)
}

// credentials reads the key files; setKeys is false when none is given.
func (f tenantFlags) credentials() (payment.AlipayCredentials, bool, error) {
	var c payment.AlipayCredentials
	files := []struct {
		path string
		dst  *string
	}{
		{f.appPrivateKeyFile, &c.AppPrivateKeyPEM}, {f.alipayPublicKeyFile, &c.AlipayPublicKeyPEM},
		{f.appCertFile, &c.AppCertPEM}, {f.alipayCertFile, &c.AlipayCertPEM}, {f.rootCertFile, &c.RootCertPEM},
	}
	set := false
	for _, file := range files {
		if file.path == "" {
			continue
		}
		b, err := os.ReadFile(file.path)
		if err != nil {
			return c, false, fmt.Errorf("tenant: %w", err)
		}
		*file.dst, set = string(b), true
	}
	if set && f.clearKeys {
		return c, false, errors.New("tenant: -clear-alipay-keys and key files exclude each other")
	}
	if set {
		if err := c.Validate(); err != nil {
			return c, false, fmt.Errorf("tenant: %w", err)
		}
	}
	return c, set, nil
}

// tenantStore is what `paykit tenant` writes; *mysql.Store implements it.
type tenantStore interface {
	GetTenant(ctx context.Context, id string) (payment.Tenant, error)
	UpsertTenant(ctx context.Context, t payment.Tenant) error
	SetTenantAlipayCredentials(ctx context.Context, tenantID, sealed string) error
	TenantsByAlipayApp(ctx context.Context, appID string) ([]payment.Tenant, error)
}

// setTenant creates or updates the tenant and, if given, seals and stores its own app
// keys. The keys are checked by building the app's gateway before anything is written.
// A tenant may move to another app at any time: its payments keep the app they were
// opened on, and the store keeps the old app's keys (mysql.Store.UpsertTenant and
// SetTenantAlipayCredentials) in the transaction that moves it.
func setTenant(ctx context.Context, cfg config.Config, store tenantStore, f tenantFlags, creds payment.AlipayCredentials, setKeys bool) error {
	stored, err := store.GetTenant(ctx, f.id)
	exists := err == nil
	if err != nil && !errors.Is(err, payment.ErrNotFound) {
		return err
	}
	keyHash := stored.APIKeyHash
	switch {
	case exists:
		f = f.over(stored)
	case f.apiKey == "":
		return fmt.Errorf("tenant: %s is new: give its -api-key (at least 16 characters)", f.id)
	}
	if f.apiKey != "" {
		keyHash = api.HashAPIKey(f.apiKey)
	}
	if f.name == "" {
		f.name = f.id
	}
	sealed := ""
	if setKeys && f.appID == cfg.AlipayAppID {
		return fmt.Errorf("tenant: app %s is the default app, whose keys are the deployment's (ALIPAY_*); give -alipay-app-id and -alipay-seller-id of the tenant's own app with its key files", f.appID)
	}
	if setKeys {
		if err := checkSharedApp(ctx, cfg, store, f, creds); err != nil {
			return err
		}
		if _, err := alipayApps(cfg).Build(f.appID, f.seller, creds); err != nil {
			if creds.CertMode() {
				return errors.New("tenant: the app private key or the certificates do not load (app certificate, Alipay certificate and Alipay root bundle, PEM)")
			}
			return errors.New("tenant: the app private key or the Alipay public key does not load (PKCS#1 or PKCS#8 PEM, PKIX public key)")
		}
		kr, err := cfg.SecretsKeyring()
		if err != nil {
			return err
		}
		if kr == nil {
			return errNoSecretsKey
		}
		plain, err := creds.EncodeForSealing()
		if err != nil {
			return err
		}
		if sealed, err = kr.Seal(plain, payment.AlipayCredentialsAAD(f.id)); err != nil {
			return err
		}
	} else if !f.clearKeys {
		old, err := store.GetTenant(ctx, f.id)
		if err != nil && !errors.Is(err, payment.ErrNotFound) {
			return err
		}
		switch {
		case old.AlipayCredentialsSealed == "" && f.appID != cfg.AlipayAppID:
			return fmt.Errorf("tenant: app %s is not the default app (ALIPAY_APP_ID=%s): give its keys with -alipay-app-private-key-file and -alipay-public-key-file", f.appID, cfg.AlipayAppID)
		case old.AlipayCredentialsSealed != "" && (f.appID != old.AlipayAppID || f.seller != old.AlipaySeller):
			return fmt.Errorf("tenant: its stored keys belong to app %s (seller %s): give -alipay-app-id and -alipay-seller-id as they are, new key files, or -clear-alipay-keys", old.AlipayAppID, old.AlipaySeller)
		}
	}
	if f.clearKeys && f.appID != cfg.AlipayAppID {
		return fmt.Errorf("tenant: without keys of its own the tenant uses the default app; set -alipay-app-id %s", cfg.AlipayAppID)
	}
	if f.clearKeys {
		// Cleared first: a crash before the upsert leaves a tenant naming its own app
		// without keys, which is refused, never paid through the default app.
		if err := store.SetTenantAlipayCredentials(ctx, f.id, ""); err != nil && !errors.Is(err, payment.ErrNotFound) {
			return err
		}
	}
	if f.notifyURL != "" {
		if err := cfg.WebhookPolicy.CheckURL(f.notifyURL); err != nil {
			return fmt.Errorf("tenant: -notify-url %q: %w (PAYKIT_WEBHOOK_ALLOW_HTTP and PAYKIT_WEBHOOK_ALLOW_PRIVATE allow http and internal hosts, for development)", f.notifyURL, err)
		}
	}
	// New keys go in with the app_id and seller, in one statement.
	return store.UpsertTenant(ctx, payment.Tenant{
		ID: f.id, Name: f.name, APIKeyHash: keyHash, NotifyURL: f.notifyURL, WebhookSecret: f.secret,
		AlipayAppID: f.appID, AlipaySeller: f.seller, AutoRefundPaidAfterClose: f.autoRefund, AlipayCredentialsSealed: sealed,
	})
}

// checkSharedApp refuses keys for an app_id that another tenant holds with other keys or
// another seller: notifications of that app could no longer be verified for either.
func checkSharedApp(ctx context.Context, cfg config.Config, store tenantStore, f tenantFlags, creds payment.AlipayCredentials) error {
	others, err := store.TenantsByAlipayApp(ctx, f.appID)
	if err != nil {
		return err
	}
	for _, o := range others {
		if o.ID == f.id || o.AlipayCredentialsSealed == "" {
			continue
		}
		same := o.AlipaySeller == f.seller
		if same {
			kr, err := cfg.SecretsKeyring()
			if err != nil {
				return err
			}
			if kr == nil {
				return errNoSecretsKey
			}
			plain, err := kr.Open(o.AlipayCredentialsSealed, payment.AlipayCredentialsAAD(o.ID))
			if err != nil {
				return fmt.Errorf("tenant: app %s is held by tenant %s, whose keys cannot be opened to compare: %w", f.appID, o.ID, err)
			}
			theirs, err := payment.DecodeAlipayCredentials(plain)
			if err != nil {
				return fmt.Errorf("tenant: app %s is held by tenant %s: %w", f.appID, o.ID, err)
			}
			same = theirs == creds
		}
		if !same {
			return fmt.Errorf("tenant: app %s is already held by tenant %s with other keys or another seller; tenants share an app only with the same keys and seller", f.appID, o.ID)
		}
	}
	return nil
}

// credentialResealer is what the re-encryption reads and writes; *mysql.Store implements it.
type credentialResealer interface {
	TenantsWithAlipayCredentials(ctx context.Context, afterID string) ([]payment.Tenant, error)
	SwapTenantAlipayCredentials(ctx context.Context, tenantID, old, sealed string) (bool, error)
	KeptAlipayApps(ctx context.Context, afterTenant, afterApp string) ([]payment.KeptAlipayApp, error)
	SwapKeptAlipayCredentials(ctx context.Context, tenantID, appID, old, sealed string) (bool, error)
}

// reencryptTenants seals every tenant's credentials again under the keyring's first key,
// those of its current app and those it keeps of the apps it has left: after it, the
// old key can leave PAYKIT_SECRETS_KEYS without making an old app's payments
// unreachable. It is idempotent: a value already sealed by that key is left alone, and a
// value changed meanwhile (new keys set) is not overwritten.
func reencryptTenants(ctx context.Context, store credentialResealer, kr *secrets.Keyring) (changed, total int, err error) {
	after := ""
	for {
		ts, err := store.TenantsWithAlipayCredentials(ctx, after)
		if err != nil {
			return changed, total, err
		}
		if len(ts) == 0 {
			break
		}
		for _, t := range ts {
			total++
			after = t.ID
			re, ok, err := kr.Reseal(t.AlipayCredentialsSealed, payment.AlipayCredentialsAAD(t.ID))
			if err != nil {
				return changed, total, fmt.Errorf("tenant %s: %w", t.ID, err)
			}
			if !ok {
				continue
			}
			swapped, err := store.SwapTenantAlipayCredentials(ctx, t.ID, t.AlipayCredentialsSealed, re)
			if err != nil {
				return changed, total, err
			}
			if swapped {
				changed++
			}
		}
	}
	afterTenant, afterApp := "", ""
	for {
		ks, err := store.KeptAlipayApps(ctx, afterTenant, afterApp)
		if err != nil {
			return changed, total, err
		}
		if len(ks) == 0 {
			return changed, total, nil
		}
		for _, k := range ks {
			total++
			afterTenant, afterApp = k.TenantID, k.AppID
			re, ok, err := kr.Reseal(k.CredentialsSealed, payment.AlipayCredentialsAAD(k.TenantID))
			if err != nil {
				return changed, total, fmt.Errorf("tenant %s kept app %s: %w", k.TenantID, k.AppID, err)
			}
			if !ok {
				continue
			}
			swapped, err := store.SwapKeptAlipayCredentials(ctx, k.TenantID, k.AppID, k.CredentialsSealed, re)
			if err != nil {
				return changed, total, err
			}
			if swapped {
				changed++
			}
		}
	}
}

// errNoSecretsKey is returned when credentials must be sealed without a keyring.
var errNoSecretsKey = errors.New("PAYKIT_SECRETS_KEYS is not set: generate a key with `paykit tenant -new-secrets-key` and set PAYKIT_SECRETS_KEYS=<id>:<key> for every paykit process")
