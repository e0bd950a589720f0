// Package simtest runs the WeChat Pay simulator behind a real HTTP server for Go tests,
// with the committed insecure test credentials. Only tests import it.
package simtest

import (
	"embed"
	"io/fs"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/paykit/paykit/wechatpaysim"
)

// The merchant the test credentials are for.
const (
	MchID = wechatpaysim.DefaultMchID
	AppID = wechatpaysim.DefaultAppID
)

// keyFiles are INSECURE, PUBLIC test-only credentials (see the README beside them).
//
//go:embed insecure-test-keys
var keyFiles embed.FS

// Keys returns the test credentials: the merchant's, the platform certificate's and the
// WeChat Pay public key's.
func Keys(tb testing.TB) wechatpaysim.KeySet {
	tb.Helper()
	sub, err := fs.Sub(keyFiles, "insecure-test-keys")
	if err != nil {
		tb.Fatalf("simtest: %v", err)
	}
	ks, err := wechatpaysim.LoadKeyFS(sub)
	if err != nil {
		tb.Fatalf("simtest: %v", err)
	}
	return ks
}

// Start runs a simulator for the test merchant behind an httptest server; mod, if not
// nil, adjusts the configuration first. Both stop when the test ends. Point a client's
// base URL (gopay: SetProxyHost) at srv.URL.
func Start(tb testing.TB, mod func(*wechatpaysim.Config)) (*wechatpaysim.Simulator, *httptest.Server) {
	tb.Helper()
	cfg := Keys(tb).Config()
	cfg.Logger = slog.New(slog.DiscardHandler)
	if mod != nil {
		mod(&cfg)
	}
	sim, err := wechatpaysim.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	tb.Cleanup(func() {
		srv.Close()
		_ = sim.Close()
	})
	return sim, srv
}
