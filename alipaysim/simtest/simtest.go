// Package simtest runs the Alipay simulator behind a real HTTP server for Go tests, with
// the committed insecure test key set. Only tests import it.
package simtest

import (
	"embed"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/paykit/paykit/alipaysim"
)

// The app and merchant the simulator knows by default.
const (
	AppID    = "2021000000000001"
	SellerID = "2088000000000001"
)

// keyFiles are INSECURE, PUBLIC test-only keys (see the README beside them).
//
//go:embed insecure-test-keys/*.pem
var keyFiles embed.FS

// Keys returns the test key set: the app key pair and the "Alipay" key pair.
func Keys(tb testing.TB) alipaysim.KeySet {
	tb.Helper()
	read := func(name string) string {
		b, err := keyFiles.ReadFile("insecure-test-keys/" + name)
		if err != nil {
			tb.Fatalf("simtest: %v", err)
		}
		return string(b)
	}
	return alipaysim.KeySet{
		AppPrivateKeyPEM:    read("app_private_key.pem"),
		AppPublicKeyPEM:     read("app_public_key.pem"),
		AlipayPrivateKeyPEM: read("alipay_private_key.pem"),
		AlipayPublicKeyPEM:  read("alipay_public_key.pem"),
	}
}

// Start runs a simulator for AppID/SellerID with the test keys behind an httptest
// server; mod, if not nil, adjusts the configuration first. Both stop when the test ends.
// The gateway URL is srv.URL + alipaysim.GatewayPath.
func Start(tb testing.TB, mod func(*alipaysim.Config)) (*alipaysim.Simulator, *httptest.Server) {
	tb.Helper()
	keys := Keys(tb)
	cfg := alipaysim.Config{
		AppID:               AppID,
		SellerID:            SellerID,
		AppPublicKeyPEM:     keys.AppPublicKeyPEM,
		AlipayPrivateKeyPEM: keys.AlipayPrivateKeyPEM,
		Logger:              slog.New(slog.DiscardHandler),
	}
	if mod != nil {
		mod(&cfg)
	}
	sim, err := alipaysim.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	tb.Cleanup(func() {
		srv.Close()
		sim.Close()
	})
	return sim, srv
}
