package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/alipay"
	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/internal/tracing"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/shop"
	"github.com/paykit/paykit/webhook"
	"github.com/paykit/paykit/worker"
	"github.com/paykit/paykit/workflows"
)

// Demo tenant created by `paykit dev`. The key is for local use only.
const (
	demoTenantID      = "demo"
	demoAPIKey        = "sk_test_demo_local_only_0001"
	demoWebhookSecret = "whsec_demo_local_only"
)

type devOptions struct {
	dir         string
	simAddr     string
	merchantAdr string
	shopAddr    string
	temporalCLI string
	uiPort      int
	cert        bool
	traces      string
}

// devTracing writes the spans of `paykit dev` to a file (emptied first), unless -traces
// is "off", so that `paykit trace -tenant demo -order 1001` shows a payment's trace with
// no collector to run. An OTLP endpoint in the environment is used as well.
func devTracing(ctx context.Context, cfg *config.Config, o devOptions, logger *slog.Logger) (*tracing.Tracing, error) {
	switch o.traces {
	case "off":
		cfg.TraceFile = ""
	case "":
		cfg.TraceFile = filepath.Join(o.dir, "traces.jsonl")
	default:
		cfg.TraceFile = o.traces
	}
	if cfg.TraceFile != "" {
		if err := os.WriteFile(cfg.TraceFile, nil, 0o644); err != nil {
			return nil, fmt.Errorf("dev: span file: %w", err)
		}
	}
	return setupTracing(ctx, *cfg, "paykit-dev", logger)
}

// runDev runs the whole system locally: it starts (or reuses) a Temporal dev server with
// its Web UI, applies the migrations, makes sure Redis answers, and runs the Alipay
// simulator, a demo merchant webhook receiver, the worker and the API in this process.
func runDev(ctx context.Context, cfg config.Config, args []string) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	var o devOptions
	fs.StringVar(&o.dir, "dir", ".dev", "directory for keys, the Temporal database and logs")
	fs.StringVar(&o.simAddr, "sim-addr", "127.0.0.1:8090", "Alipay simulator listen address")
	fs.StringVar(&o.merchantAdr, "merchant-addr", "127.0.0.1:8081", "demo merchant webhook receiver address")
	fs.StringVar(&o.shopAddr, "shop-addr", "127.0.0.1:8082", "demo shop (product page, Pay button, result page) address")
	fs.StringVar(&o.temporalCLI, "temporal-cli", "", "path to a temporal CLI binary (default: .bin/temporal, built from tools/go.mod if missing)")
	fs.IntVar(&o.uiPort, "ui-port", 8233, "Temporal Web UI port")
	fs.BoolVar(&o.cert, "cert", false, "run the gateway and the simulator in certificate mode (公钥证书模式)")
	fs.StringVar(&o.traces, "traces", "", "span file, emptied at start, that `paykit trace` reads (default: <dir>/traces.jsonl; \"off\" disables)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	logger := newLogger(config.Config{LogLevel: cfg.LogLevel, LogFormat: "text"})
	slog.SetDefault(logger)
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}

	keyDir := filepath.Join(o.dir, "keys")
	keys, err := alipaysim.LoadKeyDir(keyDir)
	if err != nil {
		logger.Info("generating development Alipay keys", "dir", keyDir)
		if keys, err = alipaysim.GenerateKeys(2048); err != nil {
			return err
		}
		if err := keys.WriteDir(keyDir); err != nil {
			return err
		}
	}
	cfg.AlipayAppPrivateKey, cfg.AlipayPublicKey = keys.AppPrivateKeyPEM, keys.AlipayPublicKeyPEM
	var certs alipaysim.CertSet
	if o.cert {
		if certs, err = devCerts(keyDir, keys, logger); err != nil {
			return err
		}
		cfg.AlipayPublicKey = ""
		cfg.AlipayCerts = config.AlipayCerts{App: certs.AppCertPEM, Public: certs.AlipayCertPEM, Root: certs.AlipayRootCertPEM}
	}
	simURL := "http://" + o.simAddr
	cfg.AlipayGatewayURL = simURL + alipaysim.GatewayPath
	// The demo merchant listens on plain http on this machine.
	cfg.WebhookPolicy = activities.WebhookPolicy{}

	if err := ensureDatabase(ctx, cfg.MySQLDSN); err != nil {
		return err
	}
	if err := runMigrate(ctx, cfg, logger); err != nil {
		return err
	}
	ensureRedis(ctx, cfg, logger)

	temporalProc, err := ensureTemporal(ctx, cfg, o, logger)
	if err != nil {
		return err
	}
	if temporalProc != nil {
		defer func() {
			// The server may run under `go tool`; stop the whole process group.
			_ = syscall.Kill(-temporalProc.Process.Pid, syscall.SIGTERM)
			_ = temporalProc.Wait()
		}()
	}

	tr, err := devTracing(ctx, &cfg, o, logger)
	if err != nil {
		return err
	}
	defer shutdownTracing(tr, logger)
	// One registry: the API's /metrics also shows the worker's counters in dev.
	reg := newRegistry()
	sys, err := openSystem(ctx, cfg, logger, reg, tr)
	if err != nil {
		return err
	}
	defer sys.close()
	if err := registerSearchAttributes(ctx, sys.tc, cfg.TemporalNamespace); err != nil {
		return err
	}
	if err := sys.store.UpsertTenant(ctx, payment.Tenant{
		ID: demoTenantID, Name: "Demo merchant", APIKeyHash: api.HashAPIKey(demoAPIKey),
		NotifyURL: "http://" + o.merchantAdr + "/webhooks", WebhookSecret: demoWebhookSecret,
		AlipayAppID: cfg.AlipayAppID, AlipaySeller: cfg.AlipaySellerID,
	}); err != nil {
		return fmt.Errorf("seed demo tenant: %w", err)
	}

	sim, err := alipaysim.New(alipaysim.Config{
		AppID: cfg.AlipayAppID, SellerID: cfg.AlipaySellerID, AppPublicKeyPEM: keys.AppPublicKeyPEM,
		AlipayPrivateKeyPEM: keys.AlipayPrivateKeyPEM, PublicURL: simURL, Logger: logger,
		AppCertPEM: certs.AppCertPEM, AlipayCertPEM: certs.AlipayCertPEM, AlipayRootCertPEM: certs.AlipayRootCertPEM,
	})
	if err != nil {
		return err
	}
	defer sim.Close()
	acts := sys.activities(cfg, logger.With("component", "worker"))
	acts.Metrics = activities.NewMetrics(reg)
	acts.StatementMetrics = activities.NewStatementMetrics(reg)
	srv := sys.apiServer(cfg, logger.With("component", "api"), api.NewMetrics(reg))

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return serve(gctx, o.simAddr, sim.Handler()) })
	// The demo merchant verifies the cashier's return redirect with Alipay's public key,
	// as a merchant's own server would.
	returns, err := alipay.New(alipay.Config{
		AppID: cfg.AlipayAppID, SellerID: cfg.AlipaySellerID, AppPrivateKeyPEM: keys.AppPrivateKeyPEM,
		AlipayPublicKeyPEM: keys.AlipayPublicKeyPEM, GatewayURL: cfg.AlipayGatewayURL, NotifyURL: cfg.PublicURL + "/callbacks/alipay",
	})
	if err != nil {
		return err
	}
	g.Go(func() error { return serve(gctx, o.merchantAdr, demoMerchant(logger, returns)) })
	g.Go(func() error {
		return serve(gctx, o.shopAddr, shop.New(shop.Config{APIURL: "http://" + cfg.HTTPAddr, APIKey: demoAPIKey,
			PublicURL: "http://" + o.shopAddr, Logger: logger}))
	})
	g.Go(func() error {
		return worker.Run(gctx, sys.tc, workerConfig(cfg, sys.statementAppIDs(ctx, cfg, logger)), acts, logger.With("component", "worker"))
	})
	g.Go(func() error { return srv.ListenAndServe(gctx, cfg.HTTPAddr, 5*time.Second) })
	printWalkthrough(cfg, o, simURL)
	err = g.Wait()
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func serve(ctx context.Context, addr string, h http.Handler) error {
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return fmt.Errorf("listen %s: %w", addr, err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}

// returnVerifier verifies the signed parameters of the cashier's return redirect.
type returnVerifier interface {
	VerifyReturn(ctx context.Context, q url.Values) (alipay.Return, error)
}

// demoMerchant plays the merchant: GET /return is the return_url page the cashier sends
// the buyer back to, which verifies Alipay's signed return parameters and shows them;
// every other request is the webhook endpoint, which verifies each signature and logs the
// event, so the walk-through shows the whole loop.
func demoMerchant(logger *slog.Logger, returns returnVerifier) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /return", func(w http.ResponseWriter, r *http.Request) {
		ret, err := returns.VerifyReturn(r.Context(), r.URL.Query())
		logger.Info("demo merchant: buyer returned from the cashier", "component", "merchant", "payment_no", r.URL.Query().Get("out_trade_no"),
			"signature_ok", err == nil, "err", err)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, "<!doctype html><title>Return not verified</title><h1 id=\"result\">Return NOT verified</h1><p>%s</p>\n",
				html.EscapeString(err.Error()))
			return
		}
		fmt.Fprintf(w, "<!doctype html><title>Thank you</title><h1 id=\"result\">Return verified</h1>"+
			"<p>payment <code id=\"payment_no\">%s</code> · Alipay trade <code id=\"trade_no\">%s</code> · ¥ <span id=\"amount\">%s</span> (%s)</p>"+
			"<p>The buyer is back; the order is paid once paykit says so (webhook payment.paid or GET /v1/payments/%[1]s), not because of this page.</p>\n",
			html.EscapeString(ret.PaymentNo), html.EscapeString(ret.TradeNo), ret.Amount.Yuan(), html.EscapeString(ret.Method))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		id, err := webhook.VerifyEvent(r.Header.Get(activities.SignatureHeader), r.Header.Get(activities.EventIDHeader),
			body, demoWebhookSecret, webhook.DefaultTolerance)
		ok := err == nil
		logger.Info("demo merchant received webhook", "component", "merchant", "event_id", id,
			"type", r.Header.Get(activities.EventTypeHeader), "signature_ok", ok, "body", string(body))
		if !ok {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

func ensureDatabase(ctx context.Context, dsn string) error {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return err
	}
	name := c.DBName
	if name == "" {
		return errors.New("PAYKIT_MYSQL_DSN must name a database")
	}
	c.DBName = ""
	conn, err := gomysql.NewConnector(c)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("mysql at %s is not reachable; start MariaDB with `start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd`: %w", c.Addr, err)
	}
	_, err = db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+strings.ReplaceAll(name, "`", "")+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
	return err
}

func ensureRedis(ctx context.Context, cfg config.Config, logger *slog.Logger) {
	if cfg.RedisAddr == "" || reachable(cfg.RedisAddr) {
		return
	}
	path, err := exec.LookPath("redis-server")
	if err != nil {
		logger.Warn("redis is not reachable and redis-server is not installed; running on MySQL alone", "addr", cfg.RedisAddr)
		return
	}
	_, port, _ := net.SplitHostPort(cfg.RedisAddr)
	logger.Info("starting redis-server", "port", port)
	cmd := exec.CommandContext(ctx, path, "--daemonize", "yes", "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no")
	if out, err := cmd.CombinedOutput(); err != nil {
		logger.Warn("could not start redis-server; running on MySQL alone", "err", err, "output", string(out))
	}
}

func reachable(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// ensureTemporal reuses a server already listening on the configured address, or starts
// the pinned dev server with a persistent SQLite database in WAL mode and the search
// attributes registered.
func ensureTemporal(ctx context.Context, cfg config.Config, o devOptions, logger *slog.Logger) (*exec.Cmd, error) {
	if reachable(cfg.TemporalAddr) {
		logger.Info("using the Temporal server already running", "addr", cfg.TemporalAddr)
		return nil, nil
	}
	host, port, err := net.SplitHostPort(cfg.TemporalAddr)
	if err != nil {
		return nil, err
	}
	args := []string{"server", "start-dev", "--ip", host, "--port", port, "--ui-port", fmt.Sprint(o.uiPort),
		"--namespace", cfg.TemporalNamespace,
		"--db-filename", filepath.Join(o.dir, "temporal.db"),
		"--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal",
		"--log-level", "warn"}
	for name, typ := range workflows.SearchAttributeTypes() {
		args = append(args, "--search-attribute", name+"="+typ)
	}
	cli := o.temporalCLI
	if cli == "" {
		cli = filepath.Join(".bin", "temporal")
		if !fileExists(cli) {
			logger.Info("building the pinned Temporal CLI from tools/go.mod into .bin/temporal (the first build takes several minutes)")
			build := exec.CommandContext(ctx, "go", "-C", "tools", "build", "-o", "../.bin/temporal", "github.com/temporalio/cli/cmd/temporal")
			build.Stdout, build.Stderr = os.Stderr, os.Stderr
			if err := build.Run(); err != nil {
				return nil, fmt.Errorf("build the Temporal CLI (run from the repository root): %w", err)
			}
		}
	}
	cmd := exec.Command(cli, args...)
	logPath := filepath.Join(o.dir, "temporal.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start temporal dev server: %w", err)
	}
	logger.Info("starting the Temporal dev server", "addr", cfg.TemporalAddr, "log", logPath)
	deadline := time.Now().Add(20 * time.Minute)
	for !reachable(cfg.TemporalAddr) {
		if time.Now().After(deadline) {
			return cmd, fmt.Errorf("temporal dev server did not come up; see %s", logPath)
		}
		select {
		case <-ctx.Done():
			return cmd, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return cmd, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// registerSearchAttributes adds the payment search attributes to the namespace. An
// unregistered attribute would leave every payment workflow stuck on its first task.
func registerSearchAttributes(ctx context.Context, tc client.Client, namespace string) error {
	attrs := map[string]enumspb.IndexedValueType{}
	for name, typ := range workflows.SearchAttributeTypes() {
		switch typ {
		case "Int":
			attrs[name] = enumspb.INDEXED_VALUE_TYPE_INT
		default:
			attrs[name] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
		}
	}
	existing, err := tc.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	for name := range existing.GetCustomAttributes() {
		delete(attrs, name)
	}
	if len(attrs) == 0 {
		return nil
	}
	_, err = tc.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: attrs,
	})
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("register search attributes: %w", err)
	}
	return nil
}

func printWalkthrough(cfg config.Config, o devOptions, simURL string) {
	api := "http://" + cfg.HTTPAddr
	fmt.Printf(`
================================================================================
 paykit is running
   API                  %[1]s            (health: %[1]s/readyz)
   Temporal Web UI      http://127.0.0.1:%[2]d
   Alipay simulator     %[3]s/gateway.do   (control API: %[3]s/_sim/trades)
   Demo merchant hooks  http://%[4]s/webhooks   (verified webhooks are logged here)
   Demo merchant return http://%[4]s/return     (verifies the cashier's signed return)
   Demo tenant API key  %[5]s
   Demo shop            http://%[6]s   (a product, a Pay button, the result page)

 Walk-through (copy and paste):

 1. Create a payment (repeat it: same Idempotency-Key, same answer):
    curl -s -X POST %[1]s/v1/payments \
      -H 'Authorization: Bearer %[5]s' -H 'Content-Type: application/json' \
      -H 'Idempotency-Key: demo-order-1001-try-1' \
      -d '{"order_id":"1001","amount_fen":990,"subject":"Coffee beans","return_url":"http://%[4]s/return"}'
    ("method":"wap" for a phone's browser, "qr", or "app" for an order string.)

 2. Open the "pay_url" from the answer in a browser and press Pay: the cashier sends
    you back to the demo merchant, which verifies Alipay's signed return. Or from the
    shell, open the cashier once as the browser would, then pay:
      curl -s "<pay_url>" > /dev/null
      curl -s -X POST %[3]s/_sim/trades/<payment_no>/pay
    For "method":"app", pay the "order_string" as the Alipay app would:
      curl -s -X POST %[3]s/_sim/app/pay -d '{"order_string":"<order_string>"}'

 3. Watch it complete: Temporal UI → Workflows → payment:demo:1001, or filter with
    PaymentStatus="PAID"; then
    curl -s %[1]s/v1/orders/1001/payments -H 'Authorization: Bearer %[5]s'

 4. Follow it as one trace, from the checkout to the webhook (spans of this run):
    go run ./cmd/paykit trace -file .dev/traces.jsonl -tenant demo -order 1001
================================================================================
`, api, o.uiPort, simURL, o.merchantAdr, demoAPIKey, o.shopAddr)
}

// devCerts loads the development certificates from keyDir, issuing them for keys the
// first time.
func devCerts(keyDir string, keys alipaysim.KeySet, logger *slog.Logger) (alipaysim.CertSet, error) {
	certs, err := alipaysim.LoadCertDir(keyDir)
	if err != nil || certs.AppCertPEM != "" {
		return certs, err
	}
	logger.Info("issuing development Alipay certificates (certificate mode)", "dir", keyDir)
	if certs, err = alipaysim.GenerateCerts(keys); err != nil {
		return certs, err
	}
	return certs, certs.WriteDir(keyDir)
}
