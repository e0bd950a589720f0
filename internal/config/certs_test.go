package config_test

import (
	"github.com/paykit/paykit/internal/config"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/gateways"
)

func TestAlipayCertificateModeConfig(t *testing.T) {
	dir := t.TempDir()
	keys, err := alipaysim.GenerateKeys(1024)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := alipaysim.GenerateCerts(keys)
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := certs.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	file := func(n string) string { return filepath.Join(dir, n) }
	full := map[string]string{
		"ALIPAY_APP_PRIVATE_KEY_FILE": file(alipaysim.AppPrivateKeyFile),
		"ALIPAY_PUBLIC_KEY_FILE":      file("does-not-exist.pem"), // never read in certificate mode
		"ALIPAY_APP_CERT_FILE":        file(alipaysim.AppCertFile),
		"ALIPAY_PUBLIC_CERT_FILE":     file(alipaysim.AlipayCertFile),
		"ALIPAY_ROOT_CERT":            certs.AlipayRootCertPEM,
	}
	load := func(t *testing.T, env map[string]string) (config.Config, error) {
		t.Helper()
		return config.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	}
	t.Run("all three: certificate mode", func(t *testing.T) {
		c, err := load(t, full)
		if err != nil {
			t.Fatal(err)
		}
		if err := defaultGateway(c); err != nil {
			t.Fatalf("gateway in certificate mode: %v", err)
		}
	})
	for _, drop := range []string{"ALIPAY_APP_CERT_FILE", "ALIPAY_PUBLIC_CERT_FILE", "ALIPAY_ROOT_CERT"} {
		t.Run("without "+drop, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range full {
				if k != drop {
					env[k] = v
				}
			}
			_, err := load(t, env)
			want := strings.TrimSuffix(drop, "_FILE") + "[_FILE]"
			if err == nil || !strings.Contains(err.Error(), "missing "+want) {
				t.Fatalf("error %v; want one naming %s", err, want)
			}
		})
	}
	t.Run("unreadable certificate file", func(t *testing.T) {
		env := map[string]string{}
		for k, v := range full {
			env[k] = v
		}
		env["ALIPAY_APP_CERT_FILE"] = file("nope.crt")
		c, err := load(t, env)
		if err != nil {
			t.Fatal(err)
		}
		if err := defaultGateway(c); err == nil || !strings.Contains(err.Error(), "ALIPAY_APP_CERT_FILE") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("inline public key beside the certificates", func(t *testing.T) {
		env := map[string]string{"ALIPAY_PUBLIC_KEY": keys.AlipayPublicKeyPEM}
		for k, v := range full {
			env[k] = v
		}
		c, err := load(t, env)
		if err != nil {
			t.Fatal(err)
		}
		if err := defaultGateway(c); err == nil || !strings.Contains(err.Error(), "not both") {
			t.Fatalf("error %v", err)
		}
	})
	if _, err := os.Stat(file("does-not-exist.pem")); err == nil {
		t.Fatal("test setup")
	}
}

// defaultGateway builds the default app's gateway from c, as the command does.
func defaultGateway(c config.Config) error {
	creds, err := c.DefaultAppCredentials()
	if err != nil {
		return err
	}
	_, err = gateways.Alipay{GatewayURL: c.AlipayGatewayURL, NotifyURL: c.PublicURL + "/callbacks/alipay"}.Build(c.AlipayAppID, c.AlipaySellerID, creds)
	return err
}
