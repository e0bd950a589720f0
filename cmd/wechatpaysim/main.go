// Command wechatpaysim runs the WeChat Pay API v3 simulator as its own process, or
// generates a merchant's development credentials.
//
//	wechatpaysim keygen -out DIR [-mchid 1230000109] [-appid wxd678efh567hg6787] [-bits 2048]
//	wechatpaysim [serve] [-addr 127.0.0.1:8091]
//
// serve reads its configuration from the environment:
//
//	WECHATPAYSIM_ADDR                 listen address (default 127.0.0.1:8091)
//	WECHATPAYSIM_KEY_DIR              directory written by keygen (required unless every key below is set)
//	WECHATPAYSIM_MCHID, _APPID        override the key dir's mchid.txt and appid.txt (APPID: comma-separated)
//	WECHATPAYSIM_MERCHANT_SERIAL      override merchant_serial_no.txt
//	WECHATPAYSIM_MERCHANT_CERT[_FILE] the merchant API certificate or public key (KEY_DIR: apiclient_cert.pem)
//	WECHATPAYSIM_APIV3_KEY[_FILE]     the APIv3 key (KEY_DIR: apiv3_key.txt)
//	WECHATPAYSIM_PLATFORM_CERT[_FILE], WECHATPAYSIM_PLATFORM_PRIVATE_KEY[_FILE]
//	                                  the platform certificate and its key (KEY_DIR: platform_cert.pem, platform_private_key.pem)
//	WECHATPAYSIM_PUB_KEY_ID, WECHATPAYSIM_PUB_KEY_PRIVATE[_FILE]
//	                                  the WeChat Pay public key's ID and private key (KEY_DIR: pub_key_id.txt, pub_key_private.pem)
//	WECHATPAYSIM_KEY_MODE             both|platform|public_key (default both)
//	WECHATPAYSIM_NOTIFY_SIGNER        platform|public_key (default: platform, public_key in public_key mode)
//	WECHATPAYSIM_TIME_SCALE           notification schedule speed-up, e.g. 60 (default 1)
//	WECHATPAYSIM_NOTIFY_TIMEOUT       one delivery's timeout (default 5s)
//	WECHATPAYSIM_SIGNATURE_PROBES     "true": a signature probe before each notification
//	WECHATPAYSIM_CLOSE_PAID           orderpaid|trade_error|no_content (default orderpaid)
//	WECHATPAYSIM_CLOSE_CLOSED         no_content|order_closed (default no_content)
//	WECHATPAYSIM_PUBLIC_URL           base URL of the cashier links in GET /_sim/orders (default: request Host)
//	WECHATPAYSIM_REFUND_DELAY         how long a refund stays PROCESSING, scaled by TIME_SCALE (default 1m;
//	                                  negative: until the control API settles it)
//	WECHATPAYSIM_REFUND_INTERVAL      least time between two refunds of an order (default 1m; negative: none)
//	WECHATPAYSIM_REFUND_MAX_PER_ORDER refunds an order may have (default 50)
//	WECHATPAYSIM_REFUND_WINDOW        how long after payment an order can be refunded (default 8760h)
//	WECHATPAYSIM_REFUND_MISMATCH      invalid_request|refund_fee_mismatch (default invalid_request)
//	WECHATPAYSIM_OVER_REFUND          invalid_request|not_enough (default invalid_request)
//	WECHATPAYSIM_REFUND_TOO_SOON      frequency_limited|invalid_request (default frequency_limited)
//	WECHATPAYSIM_BILL_READY_HOUR      hour of the next day a bill is ready (default 10; negative: at once)
//	WECHATPAYSIM_LATE_BILLS           comma-separated bill dates held STATEMENT_CREATING until released
//	WECHATPAYSIM_BILL_URL_LIFETIME    how long a download_url works (default 5m)
//	WECHATPAYSIM_BILL_HASH_COMPRESSED "true": hash_value of a GZIP bill over the gzip bytes
//	WECHATPAYSIM_FEE_RATE_BP          fee rate in hundredths of a percent (default 60: 0.60%; negative: none)
//	WECHATPAYSIM_LOG_LEVEL            debug|info|warn|error (default info)
//	WECHATPAYSIM_LOG_FORMAT           json|text (default json)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/paykit/paykit/wechatpaysim"
)

func main() {
	if err := run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "wechatpaysim:", err)
		os.Exit(1)
	}
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(args, getenv, stderr)
	case "keygen":
		return keygen(args, stdout)
	default:
		return fmt.Errorf("unknown command %q (want serve or keygen)", cmd)
	}
}

func keygen(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	out := fs.String("out", "", "directory to write the credential files into (required)")
	mchid := fs.String("mchid", wechatpaysim.DefaultMchID, "merchant number")
	appid := fs.String("appid", wechatpaysim.DefaultAppID, "appid bound to the merchant")
	bits := fs.Int("bits", 2048, "RSA key size")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("keygen: -out DIR is required")
	}
	ks, err := wechatpaysim.GenerateKeys(*mchid, *appid, *bits)
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if err := ks.WriteDir(*out); err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	fmt.Fprintf(stdout, "wrote development credentials for mchid %s (appid %s) in %s: merchant serial %s, platform serial %s, %s\n",
		ks.MchID, ks.AppID, *out, ks.MerchantSerialNo, ks.PlatformSerialNo, ks.PublicKeyID)
	fmt.Fprintf(stdout, "a client uses %s, %s, %s, %s and %s (or %s with %s); run the simulator with WECHATPAYSIM_KEY_DIR=%s\n",
		wechatpaysim.MchIDFile, wechatpaysim.MerchantSerialFile, wechatpaysim.MerchantPrivateKeyFile, wechatpaysim.APIv3KeyFile,
		wechatpaysim.PlatformCertFile, wechatpaysim.PublicKeyFile, wechatpaysim.PublicKeyIDFile, *out)
	return nil
}

// config is everything serve reads from the environment and flags.
type config struct {
	Addr      string
	LogLevel  slog.Level
	LogFormat string
	Sim       wechatpaysim.Config
}

// loadConfig reads serve's configuration from the environment and its flags.
func loadConfig(args []string, getenv func(string) string) (config, error) {
	c := config{Addr: getenv("WECHATPAYSIM_ADDR"), LogFormat: getenv("WECHATPAYSIM_LOG_FORMAT")}
	if c.Addr == "" {
		c.Addr = "127.0.0.1:8091"
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&c.Addr, "addr", c.Addr, "listen address (env WECHATPAYSIM_ADDR)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.LogFormat == "" {
		c.LogFormat = "json"
	}
	if lvl := getenv("WECHATPAYSIM_LOG_LEVEL"); lvl != "" {
		if err := c.LogLevel.UnmarshalText([]byte(lvl)); err != nil {
			return c, fmt.Errorf("WECHATPAYSIM_LOG_LEVEL: %w", err)
		}
	}
	ks, err := simKeys(getenv)
	if err != nil {
		return c, err
	}
	c.Sim, err = simConfig(ks, getenv)
	return c, err
}

// simConfig builds the simulator's configuration for the key set's merchant and the
// behaviour settings of the environment.
func simConfig(ks wechatpaysim.KeySet, getenv func(string) string) (wechatpaysim.Config, error) {
	cfg := ks.Config()
	m := &cfg.Merchants[0]
	if v := getenv("WECHATPAYSIM_APPID"); v != "" {
		m.AppIDs = strings.Split(v, ",")
	}
	m.KeyMode = getenv("WECHATPAYSIM_KEY_MODE")
	m.NotifySigner = getenv("WECHATPAYSIM_NOTIFY_SIGNER")
	cfg.PublicURL = getenv("WECHATPAYSIM_PUBLIC_URL")
	cfg.SignatureProbes = getenv("WECHATPAYSIM_SIGNATURE_PROBES") == "true"
	cfg.ClosePaid = getenv("WECHATPAYSIM_CLOSE_PAID")
	cfg.CloseClosed = getenv("WECHATPAYSIM_CLOSE_CLOSED")
	cfg.TimeScale = 1
	if v := getenv("WECHATPAYSIM_TIME_SCALE"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			return cfg, fmt.Errorf("WECHATPAYSIM_TIME_SCALE %q must be a positive number", v)
		}
		cfg.TimeScale = f
	}
	if v := getenv("WECHATPAYSIM_NOTIFY_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return cfg, fmt.Errorf("WECHATPAYSIM_NOTIFY_TIMEOUT: %w", err)
		}
		cfg.NotifyTimeout = d
	}
	return cfg, refundAndBillSettings(&cfg, getenv)
}

// refundAndBillSettings reads the refund and bill settings of the environment.
func refundAndBillSettings(cfg *wechatpaysim.Config, getenv func(string) string) error {
	cfg.RefundMismatch = getenv("WECHATPAYSIM_REFUND_MISMATCH")
	cfg.OverRefund = getenv("WECHATPAYSIM_OVER_REFUND")
	cfg.RefundTooSoon = getenv("WECHATPAYSIM_REFUND_TOO_SOON")
	cfg.BillHashCompressed = getenv("WECHATPAYSIM_BILL_HASH_COMPRESSED") == "true"
	if v := getenv("WECHATPAYSIM_LATE_BILLS"); v != "" {
		cfg.LateBills = strings.Split(v, ",")
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{
		{"WECHATPAYSIM_REFUND_DELAY", &cfg.RefundDelay},
		{"WECHATPAYSIM_REFUND_INTERVAL", &cfg.RefundInterval},
		{"WECHATPAYSIM_REFUND_WINDOW", &cfg.RefundWindow},
		{"WECHATPAYSIM_BILL_URL_LIFETIME", &cfg.BillURLLifetime},
	} {
		if v := getenv(d.name); v != "" {
			parsed, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("%s: %w", d.name, err)
			}
			*d.dst = parsed
		}
	}
	for _, n := range []struct {
		name string
		dst  *int
	}{
		{"WECHATPAYSIM_REFUND_MAX_PER_ORDER", &cfg.RefundMaxPerOrder},
		{"WECHATPAYSIM_BILL_READY_HOUR", &cfg.BillReadyHour},
		{"WECHATPAYSIM_FEE_RATE_BP", &cfg.FeeRateBP},
	} {
		if v := getenv(n.name); v != "" {
			parsed, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("%s: %w", n.name, err)
			}
			*n.dst = parsed
		}
	}
	return nil
}

// simKeys reads the credentials from WECHATPAYSIM_KEY_DIR, each overridden by its own
// variable (or its _FILE form). The simulator cannot run without them.
func simKeys(getenv func(string) string) (wechatpaysim.KeySet, error) {
	var ks wechatpaysim.KeySet
	if dir := getenv("WECHATPAYSIM_KEY_DIR"); dir != "" {
		loaded, err := wechatpaysim.LoadKeyDir(dir)
		if err != nil {
			return ks, fmt.Errorf("WECHATPAYSIM_KEY_DIR: %w", err)
		}
		ks = loaded
	}
	overrides := []struct {
		name string
		dst  *string
	}{
		{"WECHATPAYSIM_MCHID", &ks.MchID},
		{"WECHATPAYSIM_APPID", &ks.AppID},
		{"WECHATPAYSIM_MERCHANT_SERIAL", &ks.MerchantSerialNo},
		{"WECHATPAYSIM_MERCHANT_CERT", &ks.MerchantCertPEM},
		{"WECHATPAYSIM_APIV3_KEY", &ks.APIv3Key},
		{"WECHATPAYSIM_PLATFORM_CERT", &ks.PlatformCertPEM},
		{"WECHATPAYSIM_PLATFORM_PRIVATE_KEY", &ks.PlatformPrivateKeyPEM},
		{"WECHATPAYSIM_PUB_KEY_ID", &ks.PublicKeyID},
		{"WECHATPAYSIM_PUB_KEY_PRIVATE", &ks.PublicKeyPrivateKeyPEM},
	}
	for _, o := range overrides {
		v, err := fromEnv(getenv, o.name, *o.dst)
		if err != nil {
			return ks, err
		}
		*o.dst = strings.TrimSpace(v)
	}
	if ks.MchID == "" || ks.AppID == "" || (ks.MerchantCertPEM == "" && ks.MerchantPublicKeyPEM == "") || ks.APIv3Key == "" ||
		ks.PlatformCertPEM == "" || ks.PlatformPrivateKeyPEM == "" || ks.PublicKeyID == "" || ks.PublicKeyPrivateKeyPEM == "" {
		return ks, errors.New("incomplete credentials: set WECHATPAYSIM_KEY_DIR (see `wechatpaysim keygen -out DIR`) or every WECHATPAYSIM_* key variable")
	}
	return ks, nil
}

// fromEnv returns NAME's contents, else the file named by NAME_FILE, else fallback.
func fromEnv(getenv func(string) string, name, fallback string) (string, error) {
	if v := getenv(name); v != "" {
		return v, nil
	}
	if p := getenv(name + "_FILE"); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", fmt.Errorf("%s_FILE: %w", name, err)
		}
		return string(b), nil
	}
	return fallback, nil
}

func serve(args []string, getenv func(string) string, stderr io.Writer) error {
	cfg, err := loadConfig(args, getenv)
	if err != nil {
		return err
	}
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	var h slog.Handler = slog.NewJSONHandler(stderr, opts)
	if cfg.LogFormat == "text" {
		h = slog.NewTextHandler(stderr, opts)
	}
	logger := slog.New(h)
	cfg.Sim.Logger = logger

	sim, err := wechatpaysim.New(cfg.Sim)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		_ = sim.Close()
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: sim.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	logger.Info("wechatpaysim listening", "addr", ln.Addr().String(), "base_url", base,
		"control_api", base+wechatpaysim.ControlPrefix, "time_scale", cfg.Sim.TimeScale)

	select {
	case err := <-errc:
		_ = sim.Close()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	// Closing the simulator first releases requests held by a hang fault and stops
	// pending notification deliveries, so Shutdown does not wait on them.
	_ = sim.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	logger.Info("stopped")
	return nil
}
