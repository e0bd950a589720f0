// Package simtest runs the Alipay simulator behind a real HTTP server for Go tests, with
// the committed insecure test key set. Only tests import it.
package simtest

import (
	"embed"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

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

// PaidNotification is a genuine TRADE_SUCCESS notification from AppID and SellerID for
// outTradeNo, signed with the test Alipay key: notifyID, tradeNo and totalAmount (yuan,
// "9.90") as given, its times now in Beijing time.
func PaidNotification(tb testing.TB, notifyID, outTradeNo, tradeNo, totalAmount string) url.Values {
	tb.Helper()
	now := time.Now().In(time.FixedZone("CST", 8*3600)).Format("2006-01-02 15:04:05")
	form := url.Values{
		"notify_time": {now}, "notify_type": {"trade_status_sync"}, "notify_id": {notifyID},
		"app_id": {AppID}, "charset": {"utf-8"}, "version": {"1.0"},
		"trade_no": {tradeNo}, "out_trade_no": {outTradeNo}, "seller_id": {SellerID},
		"buyer_id": {"2088000000000009"}, "trade_status": {"TRADE_SUCCESS"}, "total_amount": {totalAmount},
		"receipt_amount": {totalAmount}, "gmt_create": {now}, "gmt_payment": {now}, "subject": {"x"},
	}
	if err := alipaysim.SignNotification(Keys(tb).AlipayPrivateKeyPEM, form); err != nil {
		tb.Fatalf("simtest: sign notification: %v", err)
	}
	return form
}
