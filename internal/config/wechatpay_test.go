package config_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paykit/paykit/internal/config"
)

// WeChat Pay is optional: without WECHATPAY_MCHID nothing is required; with it, what the
// adapter needs is, and the keys are read inline or from their files without ever
// printing or logging.
func TestWechatPayConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, v string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const privateKey, v3Key, publicKey = "-----BEGIN PRIVATE KEY-----\nsecret-private\n-----END PRIVATE KEY-----\n", "0123456789abcdef0123456789abcdef", "-----BEGIN PUBLIC KEY-----\npub\n-----END PUBLIC KEY-----\n"
	full := map[string]string{
		"WECHATPAY_MCHID": "1230000109", "WECHATPAY_APPID": "wxd678efh567hg6787", "WECHATPAY_MERCHANT_SERIAL": "SERIAL1",
		"WECHATPAY_PRIVATE_KEY_FILE": write("key.pem", privateKey), "WECHATPAY_APIV3_KEY_FILE": write("v3.txt", v3Key+"\n"),
		"WECHATPAY_PUBLIC_KEY": publicKey, "WECHATPAY_PUBLIC_KEY_ID": "PUB_KEY_ID_0000000000000024101100397200000006",
		"WECHATPAY_BASE_URL": "http://127.0.0.1:8091/",
	}
	without := func(keys ...string) map[string]string {
		m := map[string]string{}
		for k, v := range full {
			m[k] = v
		}
		for _, k := range keys {
			delete(m, k)
		}
		return m
	}
	tests := []struct {
		name    string
		env     map[string]string
		on      bool
		wantErr string
	}{
		{"not configured", nil, false, ""},
		{"not configured, others ignored", map[string]string{"WECHATPAY_APPID": "wx1"}, false, ""},
		{"configured", full, true, ""},
		{"platform certificates only", without("WECHATPAY_PUBLIC_KEY", "WECHATPAY_PUBLIC_KEY_ID"), true, ""},
		{"no appid", without("WECHATPAY_APPID"), false, "WECHATPAY_APPID"},
		{"no private key", without("WECHATPAY_PRIVATE_KEY_FILE"), false, "WECHATPAY_PRIVATE_KEY"},
		{"no apiv3 key", without("WECHATPAY_APIV3_KEY_FILE"), false, "WECHATPAY_APIV3_KEY"},
		{"public key without its id", without("WECHATPAY_PUBLIC_KEY_ID"), false, "WECHATPAY_PUBLIC_KEY_ID"},
		{"no merchant serial", without("WECHATPAY_MERCHANT_SERIAL"), false, "WECHATPAY_MERCHANT_SERIAL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Load(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.WechatPay.Configured() != tc.on {
				t.Fatalf("configured %v, want %v", c.WechatPay.Configured(), tc.on)
			}
		})
	}

	c, err := config.Load(func(k string) (string, bool) { v, ok := full[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	wc, err := c.WechatPay.Adapter("https://pay.example.com/callbacks/wechatpay")
	if err != nil {
		t.Fatal(err)
	}
	if wc.MchID != "1230000109" || wc.MerchantPrivateKeyPEM != privateKey || wc.APIv3Key != v3Key || wc.PublicKeyPEM != publicKey ||
		wc.BaseURL != "http://127.0.0.1:8091" || wc.NotifyURL != "https://pay.example.com/callbacks/wechatpay" {
		t.Fatalf("adapter config %+v: want the keys read from their files and variables", wc)
	}
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "wechatpay", c.WechatPay)
	for _, out := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c.WechatPay), logged.String()} {
		if strings.Contains(out, "secret-private") || strings.Contains(out, v3Key) || !strings.Contains(out, "redacted") {
			t.Fatalf("the configuration printed its keys, or no redaction: %.300s", out)
		}
	}
	// The serial and the public key's ID from files too, as keys mounted from a volume
	// are (docker-compose.yml), white space around them ignored.
	fromFiles := without("WECHATPAY_MERCHANT_SERIAL", "WECHATPAY_PUBLIC_KEY_ID")
	fromFiles["WECHATPAY_MERCHANT_SERIAL_FILE"] = write("serial.txt", "SERIAL1\n")
	fromFiles["WECHATPAY_PUBLIC_KEY_ID_FILE"] = write("pubid.txt", " PUB_KEY_ID_0000000000000024101100397200000006\n")
	cf, err := config.Load(func(k string) (string, bool) { v, ok := fromFiles[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if wf, err := cf.WechatPay.Adapter("https://x/callbacks/wechatpay"); err != nil || wf.MerchantSerialNo != "SERIAL1" ||
		wf.PublicKeyID != "PUB_KEY_ID_0000000000000024101100397200000006" {
		t.Fatalf("serial %q and public key id %q from files (%v): want them trimmed", wf.MerchantSerialNo, wf.PublicKeyID, err)
	}
	missing := c.WechatPay
	missing.PrivateKeyFile = filepath.Join(dir, "none.pem")
	missing.PrivateKey = ""
	if _, err := missing.Adapter("https://x/callbacks/wechatpay"); err == nil || !strings.Contains(err.Error(), "WECHATPAY_PRIVATE_KEY_FILE") {
		t.Fatalf("a missing key file: %v, want an error naming WECHATPAY_PRIVATE_KEY_FILE", err)
	}
}
