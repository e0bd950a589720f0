package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paykit/paykit/wechatpaysim"
)

func TestKeygenThenLoadConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	var out bytes.Buffer
	if err := run([]string{"keygen", "-out", dir, "-bits", "1024", "-mchid", "1900000001"}, func(string) string { return "" }, &out, &out); err != nil {
		t.Fatal(err)
	}
	ks, err := wechatpaysim.LoadKeyDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ks.MchID != "1900000001" || len(ks.APIv3Key) != 32 || len(ks.MerchantSerialNo) != 40 || !strings.HasPrefix(ks.PublicKeyID, "PUB_KEY_ID_") || len(ks.PublicKeyID) != 45 {
		t.Fatalf("key set %+v", ks)
	}
	if fi, err := os.Stat(filepath.Join(dir, wechatpaysim.MerchantPrivateKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key file: %v %v", fi, err)
	}

	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr string
		check   func(t *testing.T, c config)
	}{
		{"key dir and defaults", map[string]string{"WECHATPAYSIM_KEY_DIR": dir}, nil, "", func(t *testing.T, c config) {
			m := c.Sim.Merchants[0]
			if c.Addr != "127.0.0.1:8091" || c.Sim.TimeScale != 1 || m.MchID != "1900000001" || m.APIv3Key != ks.APIv3Key || c.LogFormat != "json" ||
				c.Sim.PublicKeyID != ks.PublicKeyID || m.AppIDs[0] != wechatpaysim.DefaultAppID {
				t.Fatalf("config = %+v", c)
			}
		}},
		{"settings and flag addr", map[string]string{
			"WECHATPAYSIM_KEY_DIR": dir, "WECHATPAYSIM_TIME_SCALE": "600", "WECHATPAYSIM_APPID": "wxa,wxb",
			"WECHATPAYSIM_KEY_MODE": "public_key", "WECHATPAYSIM_CLOSE_PAID": "trade_error", "WECHATPAYSIM_SIGNATURE_PROBES": "true",
			"WECHATPAYSIM_ADDR": "0.0.0.0:1",
		}, []string{"-addr", "127.0.0.1:9999"}, "", func(t *testing.T, c config) {
			m := c.Sim.Merchants[0]
			if c.Addr != "127.0.0.1:9999" || c.Sim.TimeScale != 600 || len(m.AppIDs) != 2 || m.KeyMode != "public_key" ||
				c.Sim.ClosePaid != "trade_error" || !c.Sim.SignatureProbes {
				t.Fatalf("config = %+v", c)
			}
		}},
		{"a variable wins over the key dir", map[string]string{
			"WECHATPAYSIM_KEY_DIR": dir, "WECHATPAYSIM_APIV3_KEY": strings.Repeat("k", 32), "WECHATPAYSIM_MCHID": "1900000002",
		}, nil, "", func(t *testing.T, c config) {
			if c.Sim.Merchants[0].APIv3Key != strings.Repeat("k", 32) || c.Sim.Merchants[0].MchID != "1900000002" {
				t.Fatalf("config = %+v", c)
			}
		}},
		{"no keys", map[string]string{}, nil, "incomplete credentials", nil},
		{"bad scale", map[string]string{"WECHATPAYSIM_KEY_DIR": dir, "WECHATPAYSIM_TIME_SCALE": "-1"}, nil, "TIME_SCALE", nil},
		{"missing key file", map[string]string{"WECHATPAYSIM_KEY_DIR": dir, "WECHATPAYSIM_PLATFORM_CERT_FILE": "/nonexistent"}, nil, "FILE", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadConfig(tc.args, func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
			if _, err := wechatpaysim.New(c.Sim); err != nil {
				t.Fatalf("the simulator refuses the configuration: %v", err)
			}
		})
	}
}

func TestUnknownCommand(t *testing.T) {
	if err := run([]string{"frobnicate"}, func(string) string { return "" }, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Fatal("an unknown command ran")
	}
	if err := run([]string{"keygen"}, func(string) string { return "" }, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Fatal("keygen without -out ran")
	}
}
