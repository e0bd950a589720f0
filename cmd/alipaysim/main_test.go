package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paykit/paykit/alipaysim"
)

func TestKeygenThenLoadConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	var out bytes.Buffer
	if err := run([]string{"keygen", "-out", dir, "-bits", "1024"}, func(string) string { return "" }, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{alipaysim.AppPrivateKeyFile, alipaysim.AppPublicKeyFile, alipaysim.AlipayPrivateKeyFile, alipaysim.AlipayPublicKeyFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	appPub, _ := os.ReadFile(filepath.Join(dir, alipaysim.AppPublicKeyFile))

	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr string
		check   func(t *testing.T, c config)
	}{
		{"key dir and defaults", map[string]string{"ALIPAYSIM_KEY_DIR": dir}, nil, "", func(t *testing.T, c config) {
			if c.Addr != "127.0.0.1:8090" || c.Sim.TimeScale != 1 || c.Sim.AppPublicKeyPEM != string(appPub) || c.LogFormat != "json" {
				t.Fatalf("config = %+v", c)
			}
		}},
		{"files, scale, flag addr", map[string]string{
			"ALIPAYSIM_APP_PUBLIC_KEY_FILE":     filepath.Join(dir, alipaysim.AppPublicKeyFile),
			"ALIPAYSIM_ALIPAY_PRIVATE_KEY_FILE": filepath.Join(dir, alipaysim.AlipayPrivateKeyFile),
			"ALIPAYSIM_TIME_SCALE":              "60", "ALIPAYSIM_APP_ID": "2021x", "ALIPAYSIM_SELLER_ID": "2088x",
			"ALIPAYSIM_ADDR": "0.0.0.0:1",
		}, []string{"-addr", "127.0.0.1:9999"}, "", func(t *testing.T, c config) {
			if c.Addr != "127.0.0.1:9999" || c.Sim.TimeScale != 60 || c.Sim.AppID != "2021x" || c.Sim.SellerID != "2088x" {
				t.Fatalf("config = %+v", c)
			}
		}},
		{"PEM contents win over files", map[string]string{
			"ALIPAYSIM_KEY_DIR": dir, "ALIPAYSIM_APP_PUBLIC_KEY": "inline",
		}, nil, "", func(t *testing.T, c config) {
			if c.Sim.AppPublicKeyPEM != "inline" {
				t.Fatalf("config = %+v", c)
			}
		}},
		{"no keys", map[string]string{}, nil, "no keys", nil},
		{"bad scale", map[string]string{"ALIPAYSIM_KEY_DIR": dir, "ALIPAYSIM_TIME_SCALE": "-1"}, nil, "TIME_SCALE", nil},
		{"missing key file", map[string]string{"ALIPAYSIM_KEY_DIR": dir, "ALIPAYSIM_ALIPAY_PRIVATE_KEY_FILE": "/nonexistent"}, nil, "FILE", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadConfig(tc.args, func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v; want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestKeygenCertThenServeConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	var out bytes.Buffer
	if err := run([]string{"keygen", "-out", dir, "-bits", "1024", "-cert"}, func(string) string { return "" }, &out, &out); err != nil {
		t.Fatal(err)
	}
	c, err := loadConfig(nil, func(k string) string { return map[string]string{"ALIPAYSIM_KEY_DIR": dir}[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.Sim.AppCertPEM == "" || c.Sim.AlipayCertPEM == "" || c.Sim.AlipayRootCertPEM == "" {
		t.Fatalf("key dir certificates not loaded: %+v", c.Sim)
	}
	sim, err := alipaysim.New(c.Sim)
	if err != nil {
		t.Fatalf("the keygen -cert set does not start a simulator: %v", err)
	}
	sim.Close()
	_, err = loadConfig(nil, func(k string) string {
		return map[string]string{"ALIPAYSIM_KEY_DIR": dir, "ALIPAYSIM_APP_CERT_FILE": "/nonexistent"}[k]
	})
	if err == nil || !strings.Contains(err.Error(), "ALIPAYSIM_APP_CERT_FILE") {
		t.Fatalf("error = %v", err)
	}
	if err := os.Remove(filepath.Join(dir, alipaysim.AlipayRootCertFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(nil, func(k string) string { return map[string]string{"ALIPAYSIM_KEY_DIR": dir}[k] }); err == nil {
		t.Fatal("a key dir with only some certificates must be refused")
	}
}
