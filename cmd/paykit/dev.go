package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/alipay"
	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/internal/devstack"
	"github.com/paykit/paykit/internal/system"
	"github.com/paykit/paykit/orchestrator"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/shop"
	"github.com/paykit/paykit/tenants"
	"github.com/paykit/paykit/wechatpaysim"
	"github.com/paykit/paykit/worker"
)

// Demo tenant created by `paykit dev`. The key is for local use only.
const (
	demoTenantID      = "demo"
	demoAPIKey        = "sk_test_demo_local_only_0001"
	demoWebhookSecret = "whsec_demo_local_only_0123456789abcdef"
)

type devOptions struct {
	dir         string
	simAddr     string
	wxSimAddr   string
	merchantAdr string
	shopAddr    string
	temporalCLI string
	uiPort      int
	cert        bool
	traces      string
}

// runDev runs the whole system locally: it starts (or reuses) a Temporal dev server with
// its Web UI, applies the migrations, makes sure Redis answers, and runs the Alipay and
// WeChat Pay simulators, a demo merchant webhook receiver, the worker and the API in this
// process.
func runDev(ctx context.Context, cfg config.Config, args []string) error {
	o, err := parseDevFlags(args)
	if err != nil {
		return err
	}
	logger := system.NewLogger(config.Config{LogLevel: cfg.LogLevel, LogFormat: "text"})
	slog.SetDefault(logger)
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	cfg, keys, err := devConfig(cfg, o, logger)
	if err != nil {
		return err
	}
	if err := prepareDevStorage(ctx, cfg, logger); err != nil {
		return err
	}

	stopTemporal, err := devstack.StartTemporal(ctx, devstack.Temporal{Addr: cfg.TemporalAddr, Namespace: cfg.TemporalNamespace,
		UIPort: o.uiPort, Dir: o.dir, CLI: o.temporalCLI}, logger)
	// A server started but never ready (or interrupted while it came up) is stopped too.
	defer stopTemporal()
	if err != nil {
		return err
	}

	if cfg.TraceFile, err = devstack.TraceFile(o.dir, o.traces); err != nil {
		return err
	}
	tr, err := system.SetupTracing(ctx, cfg, "paykit-dev", logger)
	if err != nil {
		return err
	}
	defer system.ShutdownTracing(tr, logger)
	// One registry: the API admin's /metrics also shows the worker's counters in dev.
	reg := system.NewRegistry()
	sys, err := system.Open(ctx, cfg, logger, reg, tr)
	if err != nil {
		return err
	}
	defer sys.Close()
	if err := orchestrator.RegisterSearchAttributes(ctx, sys.Temporal, cfg.TemporalNamespace); err != nil {
		return err
	}
	if err := seedDemoTenant(ctx, cfg, sys.Store, "http://"+o.merchantAdr+"/webhooks"); err != nil {
		return err
	}
	return serveDev(ctx, cfg, o, keys, sys, reg, logger)
}

// parseDevFlags reads `paykit dev`'s flags.
func parseDevFlags(args []string) (devOptions, error) {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	var o devOptions
	fs.StringVar(&o.dir, "dir", ".dev", "directory for keys, the Temporal database and logs")
	fs.StringVar(&o.simAddr, "sim-addr", "127.0.0.1:8090", "Alipay simulator listen address")
	fs.StringVar(&o.wxSimAddr, "wechatpay-sim-addr", "127.0.0.1:8091", "WeChat Pay simulator listen address (used unless WECHATPAY_MCHID names a merchant of your own)")
	fs.StringVar(&o.merchantAdr, "merchant-addr", "127.0.0.1:8081", "demo merchant webhook receiver address")
	fs.StringVar(&o.shopAddr, "shop-addr", "127.0.0.1:8082", "demo shop (product page, Pay button, result page) address")
	fs.StringVar(&o.temporalCLI, "temporal-cli", "", "path to a temporal CLI binary (default: .bin/temporal, built from tools/go.mod if missing)")
	fs.IntVar(&o.uiPort, "ui-port", 8233, "Temporal Web UI port")
	fs.BoolVar(&o.cert, "cert", false, "run the gateway and the simulator in certificate mode (公钥证书模式)")
	fs.StringVar(&o.traces, "traces", "", "span file, emptied at start, that `paykit trace` reads (default: <dir>/traces.jsonl; \"off\" disables)")
	err := fs.Parse(args)
	return o, err
}

// simURL is the base URL of the Alipay simulator.
func (o devOptions) simURL() string { return "http://" + o.simAddr }

// wxSimURL is the base URL of the WeChat Pay simulator.
func (o devOptions) wxSimURL() string { return "http://" + o.wxSimAddr }

// devKeys are the keys dev keeps in its directory: the Alipay app's and simulator's
// (with -cert, certificates too) and, unless WECHATPAY_MCHID names a merchant of the
// user's own, the WeChat Pay merchant's and simulator's (wechat.MchID is empty then).
type devKeys struct {
	alipay alipaysim.KeySet
	certs  alipaysim.CertSet
	wechat wechatpaysim.KeySet
}

// devConfig points cfg at the simulators, with the apps' and the simulators' keys (and,
// with -cert, certificates) kept in the dev directory, made there on the first run, and
// returns them too.
func devConfig(cfg config.Config, o devOptions, logger *slog.Logger) (config.Config, devKeys, error) {
	var k devKeys
	keyDir := filepath.Join(o.dir, "keys")
	var err error
	if k.alipay, err = devstack.Keys(keyDir, logger); err != nil {
		return cfg, k, err
	}
	cfg.AlipayAppPrivateKey, cfg.AlipayPublicKey = k.alipay.AppPrivateKeyPEM, k.alipay.AlipayPublicKeyPEM
	// Webhook secrets are sealed: without a keyring of its own, dev makes one in .dev/keys.
	if cfg.SecretsKeys == "" {
		if cfg.SecretsKeys, err = devstack.SecretsKeys(keyDir, logger); err != nil {
			return cfg, k, err
		}
	}
	if o.cert {
		if k.certs, err = devstack.Certs(keyDir, k.alipay, logger); err != nil {
			return cfg, k, err
		}
		cfg.AlipayPublicKey = ""
		cfg.AlipayCerts = config.AlipayCerts{App: k.certs.AppCertPEM, Public: k.certs.AlipayCertPEM, Root: k.certs.AlipayRootCertPEM}
	}
	cfg.AlipayGatewayURL = o.simURL() + alipaysim.GatewayPath
	if !cfg.WechatPay.Configured() {
		if k.wechat, err = devstack.WechatKeys(keyDir, logger); err != nil {
			return cfg, k, err
		}
		cfg.WechatPay = config.WechatPay{
			MchID: k.wechat.MchID, AppID: k.wechat.AppID, MerchantSerial: k.wechat.MerchantSerialNo,
			PrivateKey: k.wechat.MerchantPrivateKeyPEM, APIv3Key: k.wechat.APIv3Key,
			PublicKey: k.wechat.PublicKeyPEM, PublicKeyID: k.wechat.PublicKeyID, BaseURL: o.wxSimURL(),
			// The browser opens an H5 payment's cashier at the simulator.
			CashierBaseURL: o.wxSimURL(),
		}
	}
	// The demo merchant listens on plain http on this machine.
	cfg.WebhookPolicy = activities.WebhookPolicy{}
	return cfg, k, nil
}

// prepareDevStorage creates the database if it is missing, applies the migrations and
// makes sure Redis answers.
func prepareDevStorage(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	if err := system.EnsureDatabase(ctx, cfg.MySQLDSN); err != nil {
		return err
	}
	if err := system.Migrate(ctx, cfg, logger); err != nil {
		return err
	}
	devstack.EnsureRedis(ctx, cfg.Redis(), logger)
	return nil
}

// serveDev runs the simulators, the demo merchant and shop, the worker and the API on sys
// until ctx ends or one of them fails; the end of ctx is not an error.
func serveDev(ctx context.Context, cfg config.Config, o devOptions, k devKeys,
	sys *system.System, reg *prometheus.Registry, logger *slog.Logger) error {
	simURL := o.simURL()
	keys, certs := k.alipay, k.certs
	sim, err := alipaysim.New(alipaysim.Config{
		AppID: cfg.AlipayAppID, SellerID: cfg.AlipaySellerID, AppPublicKeyPEM: keys.AppPublicKeyPEM,
		AlipayPrivateKeyPEM: keys.AlipayPrivateKeyPEM, PublicURL: simURL, Logger: logger,
		AppCertPEM: certs.AppCertPEM, AlipayCertPEM: certs.AlipayCertPEM, AlipayRootCertPEM: certs.AlipayRootCertPEM,
	})
	if err != nil {
		return err
	}
	defer sim.Close()
	g, gctx := errgroup.WithContext(ctx)
	wxSimURL := ""
	if k.wechat.MchID != "" {
		wxCfg := k.wechat.Config()
		wxCfg.PublicURL, wxCfg.Logger = o.wxSimURL(), logger.With("component", "wechatpaysim")
		// dev's merchant has the WeChat Pay public key and no platform certificate, as a
		// merchant opened today does: everything WeChat Pay signs, it signs with that key.
		wxCfg.Merchants[0].KeyMode = wechatpaysim.KeyModePublicKey
		wxSim, err := wechatpaysim.New(wxCfg)
		if err != nil {
			return err
		}
		defer wxSim.Close()
		wxSimURL = o.wxSimURL()
		g.Go(func() error { return system.Serve(gctx, o.wxSimAddr, wxSim.Handler()) })
	}
	acts := sys.Activities(cfg, logger.With("component", "worker"))
	acts.Metrics = activities.NewMetrics(reg)
	acts.StatementMetrics = activities.NewStatementMetrics(reg)
	srv := sys.APIServer(cfg, logger.With("component", "api"), api.NewMetrics(reg))

	g.Go(func() error { return system.Serve(gctx, o.simAddr, sim.Handler()) })
	// The demo merchant verifies the cashier's return redirect with Alipay's public key,
	// as a merchant's own server would.
	returns, err := alipay.New(alipay.Config{
		AppID: cfg.AlipayAppID, SellerID: cfg.AlipaySellerID, AppPrivateKeyPEM: keys.AppPrivateKeyPEM,
		AlipayPublicKeyPEM: keys.AlipayPublicKeyPEM, GatewayURL: cfg.AlipayGatewayURL, NotifyURL: cfg.PublicURL + "/callbacks/alipay",
	})
	if err != nil {
		return err
	}
	g.Go(func() error {
		return system.Serve(gctx, o.merchantAdr, devstack.Merchant(logger, returns, demoWebhookSecret))
	})
	g.Go(func() error {
		return system.Serve(gctx, o.shopAddr, shop.New(shop.Config{APIURL: "http://" + cfg.HTTPAddr, APIKey: demoAPIKey,
			PublicURL: "http://" + o.shopAddr, Logger: logger}))
	})
	g.Go(func() error {
		return worker.Run(gctx, sys.Temporal, system.WorkerConfig(cfg, sys.StatementAppIDs(ctx, cfg, logger)), acts, logger.With("component", "worker"))
	})
	g.Go(func() error { return srv.ListenAndServe(gctx, cfg.HTTPAddr, 5*time.Second) })
	g.Go(func() error { return system.Serve(gctx, cfg.APIAdminAddr, srv.AdminHandler()) })
	devstack.Walkthrough{API: "http://" + cfg.HTTPAddr, Admin: "http://" + cfg.APIAdminAddr, Sim: simURL, WechatSim: wxSimURL, Merchant: o.merchantAdr,
		Shop: o.shopAddr, UIPort: o.uiPort, APIKey: demoAPIKey}.Print(os.Stdout)
	err = g.Wait()
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// seedDemoTenant sets the demo tenant through the rules of `paykit tenant`, so that its
// webhook secret is sealed with cfg's keyring as any tenant's is.
func seedDemoTenant(ctx context.Context, cfg config.Config, store tenants.Store, notifyURL string) error {
	if _, err := tenantAdmin(cfg, store).Set(ctx, tenants.Change{
		ID: demoTenantID, Name: "Demo merchant", APIKey: demoAPIKey, NotifyURL: notifyURL, WebhookSecret: demoWebhookSecret,
		AppID: cfg.AlipayAppID, Seller: cfg.AlipaySellerID,
	}, payment.AlipayCredentials{}, false); err != nil {
		return fmt.Errorf("seed demo tenant: %w", err)
	}
	return nil
}
