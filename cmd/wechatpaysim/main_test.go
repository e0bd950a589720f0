package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
		{"refund and bill settings", map[string]string{
			"WECHATPAYSIM_KEY_DIR": dir, "WECHATPAYSIM_REFUND_DELAY": "-1s", "WECHATPAYSIM_REFUND_INTERVAL": "2s",
			"WECHATPAYSIM_REFUND_MAX_PER_ORDER": "3", "WECHATPAYSIM_REFUND_WINDOW": "1h", "WECHATPAYSIM_REFUND_MISMATCH": "refund_fee_mismatch",
			"WECHATPAYSIM_OVER_REFUND": "not_enough", "WECHATPAYSIM_REFUND_TOO_SOON": "invalid_request", "WECHATPAYSIM_BILL_READY_HOUR": "-1",
			"WECHATPAYSIM_LATE_BILLS": "2026-01-02,2026-01-03", "WECHATPAYSIM_BILL_URL_LIFETIME": "30s",
			"WECHATPAYSIM_BILL_HASH_COMPRESSED": "true", "WECHATPAYSIM_FEE_RATE_BP": "38",
		}, nil, "", func(t *testing.T, c config) {
			s := c.Sim
			if s.RefundDelay != -time.Second || s.RefundInterval != 2*time.Second || s.RefundMaxPerOrder != 3 || s.RefundWindow != time.Hour ||
				s.RefundMismatch != "refund_fee_mismatch" || s.OverRefund != "not_enough" || s.RefundTooSoon != "invalid_request" ||
				s.BillReadyHour != -1 || len(s.LateBills) != 2 || s.BillURLLifetime != 30*time.Second || !s.BillHashCompressed || s.FeeRateBP != 38 {
				t.Fatalf("config = %+v", s)
			}
		}},
		{"bad refund delay", map[string]string{"WECHATPAYSIM_KEY_DIR": dir, "WECHATPAYSIM_REFUND_DELAY": "soon"}, nil, "REFUND_DELAY", nil},
		{"bad ready hour", map[string]string{"WECHATPAYSIM_KEY_DIR": dir, "WECHATPAYSIM_BILL_READY_HOUR": "ten"}, nil, "BILL_READY_HOUR", nil},
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
