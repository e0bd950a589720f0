// Command alipaysim runs the Alipay simulator as its own process, or generates a
// development key set.
//
//	alipaysim keygen -out DIR [-bits 2048] [-cert]
//	alipaysim [serve] [-addr 127.0.0.1:8090]
//
// serve reads its configuration from the environment:
//
//	ALIPAYSIM_ADDR                        listen address (default 127.0.0.1:8090)
//	ALIPAYSIM_APP_ID                      merchant app_id (default 2021000000000001)
//	ALIPAYSIM_SELLER_ID                   merchant PID sent as seller_id (default 2088000000000001)
//	ALIPAYSIM_KEY_DIR                     directory written by keygen (reads app_public_key.pem, alipay_private_key.pem)
//	ALIPAYSIM_APP_PUBLIC_KEY_FILE         app public key file (overrides KEY_DIR)
//	ALIPAYSIM_ALIPAY_PRIVATE_KEY_FILE     Alipay private key file (overrides KEY_DIR)
//	ALIPAYSIM_APP_PUBLIC_KEY              app public key PEM contents (overrides the file)
//	ALIPAYSIM_ALIPAY_PRIVATE_KEY          Alipay private key PEM contents (overrides the file)
//	ALIPAYSIM_APP_CERT[_FILE]             certificate mode: the app certificate (KEY_DIR: app_cert.pem)
//	ALIPAYSIM_ALIPAY_CERT[_FILE]          certificate mode: the Alipay certificate (KEY_DIR: alipay_cert.pem)
//	ALIPAYSIM_ALIPAY_ROOT_CERT[_FILE]     certificate mode: the root bundle (KEY_DIR: alipay_root_cert.pem)
//	ALIPAYSIM_TIME_SCALE                  notification schedule speed-up, e.g. 60 (default 1)
//	ALIPAYSIM_PUBLIC_URL                  base URL used in qr_code links (default: request Host)
//	ALIPAYSIM_NOTIFY_TIMEOUT              one delivery attempt's timeout (default 10s)
//	ALIPAYSIM_PAYMENT_NOTIFICATIONS_ONLY  "true": notify only TRADE_SUCCESS on payment
//	ALIPAYSIM_LOG_LEVEL                   debug|info|warn|error (default info)
//	ALIPAYSIM_LOG_FORMAT                  json|text (default json)
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

	"github.com/paykit/paykit/alipaysim"
)

func main() {
	if err := run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "alipaysim:", err)
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
	out := fs.String("out", "", "directory to write the PEM files into (required)")
	bits := fs.Int("bits", 2048, "RSA key size")
	cert := fs.Bool("cert", false, "also issue a development root CA, an Alipay certificate and an app certificate (certificate mode)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("keygen: -out DIR is required")
	}
	ks, err := alipaysim.GenerateKeys(*bits)
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if err := ks.WriteDir(*out); err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s, %s, %s, %s in %s (development keys only)\n",
		alipaysim.AppPrivateKeyFile, alipaysim.AppPublicKeyFile,
		alipaysim.AlipayPrivateKeyFile, alipaysim.AlipayPublicKeyFile, *out)
	if *cert {
		cs, err := alipaysim.GenerateCerts(ks)
		if err != nil {
			return fmt.Errorf("keygen: %w", err)
		}
		if err := cs.WriteDir(*out); err != nil {
			return fmt.Errorf("keygen: %w", err)
		}
		fmt.Fprintf(stdout, "wrote %s, %s, %s in %s (development certificates only): the simulator runs in certificate mode\n",
			alipaysim.AppCertFile, alipaysim.AlipayCertFile, alipaysim.AlipayRootCertFile, *out)
	}
	fmt.Fprintf(stdout, "run the simulator with ALIPAYSIM_KEY_DIR=%s\n", *out)
	return nil
}

// config is everything serve reads from the environment and flags.
type config struct {
	Addr      string
	LogLevel  slog.Level
	LogFormat string
	Sim       alipaysim.Config
}

// loadConfig reads serve's configuration from the environment and its flags.
func loadConfig(args []string, getenv func(string) string) (config, error) {
	c := config{Addr: getenv("ALIPAYSIM_ADDR"), LogFormat: getenv("ALIPAYSIM_LOG_FORMAT")}
	if c.Addr == "" {
		c.Addr = "127.0.0.1:8090"
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&c.Addr, "addr", c.Addr, "listen address (env ALIPAYSIM_ADDR)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.LogFormat == "" {
		c.LogFormat = "json"
	}
	if lvl := getenv("ALIPAYSIM_LOG_LEVEL"); lvl != "" {
		if err := c.LogLevel.UnmarshalText([]byte(lvl)); err != nil {
			return c, fmt.Errorf("ALIPAYSIM_LOG_LEVEL: %w", err)
		}
	}
	sim, err := simConfig(getenv)
	c.Sim = sim
	return c, err
}

// simConfig reads the simulator's own configuration from the environment: its keys, the
// merchant it plays Alipay for, and how fast and how it notifies.
func simConfig(getenv func(string) string) (alipaysim.Config, error) {
	appPub, aliPriv, certs, err := simKeys(getenv)
	if err != nil {
		return alipaysim.Config{}, err
	}
	sim := alipaysim.Config{
		AppID:                    getenv("ALIPAYSIM_APP_ID"),
		SellerID:                 getenv("ALIPAYSIM_SELLER_ID"),
		AppPublicKeyPEM:          appPub,
		AlipayPrivateKeyPEM:      aliPriv,
		AppCertPEM:               certs.AppCertPEM,
		AlipayCertPEM:            certs.AlipayCertPEM,
		AlipayRootCertPEM:        certs.AlipayRootCertPEM,
		PublicURL:                getenv("ALIPAYSIM_PUBLIC_URL"),
		PaymentNotificationsOnly: getenv("ALIPAYSIM_PAYMENT_NOTIFICATIONS_ONLY") == "true",
	}
	sim.TimeScale = 1
	if v := getenv("ALIPAYSIM_TIME_SCALE"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			return sim, fmt.Errorf("ALIPAYSIM_TIME_SCALE %q must be a positive number", v)
		}
		sim.TimeScale = f
	}
	if v := getenv("ALIPAYSIM_NOTIFY_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return sim, fmt.Errorf("ALIPAYSIM_NOTIFY_TIMEOUT: %w", err)
		}
		sim.NotifyTimeout = d
	}
	return sim, nil
}

// simKeys reads the app's public key (or its certificate, with Alipay's and the root's)
// and Alipay's private key: from ALIPAYSIM_KEY_DIR, each overridden by its own variable
// or its _FILE form. The simulator cannot run without them: none is an error.
func simKeys(getenv func(string) string) (appPub, aliPriv string, certs alipaysim.CertSet, err error) {
	var keys alipaysim.KeySet
	if dir := getenv("ALIPAYSIM_KEY_DIR"); dir != "" {
		ks, err := alipaysim.LoadKeyDir(dir)
		if err != nil {
			return "", "", certs, fmt.Errorf("ALIPAYSIM_KEY_DIR: %w", err)
		}
		keys = ks
		if certs, err = alipaysim.LoadCertDir(dir); err != nil {
			return "", "", certs, fmt.Errorf("ALIPAYSIM_KEY_DIR: %w", err)
		}
	}
	appPub, err = keyFromEnv(getenv, "ALIPAYSIM_APP_PUBLIC_KEY", keys.AppPublicKeyPEM)
	if err != nil {
		return "", "", certs, err
	}
	aliPriv, err = keyFromEnv(getenv, "ALIPAYSIM_ALIPAY_PRIVATE_KEY", keys.AlipayPrivateKeyPEM)
	if err != nil {
		return "", "", certs, err
	}
	if err := certsFromEnv(getenv, &certs); err != nil {
		return "", "", certs, err
	}
	if (appPub == "" && certs.AppCertPEM == "") || aliPriv == "" {
		return "", "", certs, errors.New("no keys: set ALIPAYSIM_KEY_DIR (see `alipaysim keygen -out DIR`), " +
			"or ALIPAYSIM_APP_PUBLIC_KEY[_FILE] and ALIPAYSIM_ALIPAY_PRIVATE_KEY[_FILE]")
	}
	return appPub, aliPriv, certs, nil
}

// certsFromEnv lets ALIPAYSIM_APP_CERT, ALIPAYSIM_ALIPAY_CERT and
// ALIPAYSIM_ALIPAY_ROOT_CERT (or their _FILE forms) override the key dir's certificates.
// Certificate mode needs all three or none.
func certsFromEnv(getenv func(string) string, cs *alipaysim.CertSet) error {
	for _, t := range []struct {
		name string
		dst  *string
	}{{"ALIPAYSIM_APP_CERT", &cs.AppCertPEM}, {"ALIPAYSIM_ALIPAY_CERT", &cs.AlipayCertPEM}, {"ALIPAYSIM_ALIPAY_ROOT_CERT", &cs.AlipayRootCertPEM}} {
		v, err := keyFromEnv(getenv, t.name, *t.dst)
		if err != nil {
			return err
		}
		*t.dst = v
	}
	set := 0
	for _, v := range []string{cs.AppCertPEM, cs.AlipayCertPEM, cs.AlipayRootCertPEM} {
		if v != "" {
			set++
		}
	}
	if set != 0 && set != 3 {
		return errors.New("certificate mode needs ALIPAYSIM_APP_CERT, ALIPAYSIM_ALIPAY_CERT and ALIPAYSIM_ALIPAY_ROOT_CERT (or _FILE, or all three files in ALIPAYSIM_KEY_DIR)")
	}
	return nil
}

// keyFromEnv returns NAME's contents, else the file named by NAME_FILE, else fallback.
func keyFromEnv(getenv func(string) string, name, fallback string) (string, error) {
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

	sim, err := alipaysim.New(cfg.Sim)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		sim.Close()
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: sim.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	logger.Info("alipaysim listening", "addr", ln.Addr().String(),
		"gateway_url", base+alipaysim.GatewayPath, "control_api", base+alipaysim.ControlPrefix,
		"time_scale", cfg.Sim.TimeScale)

	select {
	case err := <-errc:
		sim.Close()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	// Closing the simulator first releases requests held by a hang fault and stops
	// pending notification deliveries, so Shutdown does not wait on them.
	sim.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	logger.Info("stopped")
	return nil
}
