package main

import (
	"testing"

	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/internal/config"
)

func TestDevCertsIssuedOnceThenLoaded(t *testing.T) {
	dir := t.TempDir()
	keys, err := alipaysim.GenerateKeys(1024)
	if err != nil {
		t.Fatal(err)
	}
	logger := newLogger(config.Config{LogLevel: "error", LogFormat: "text"})
	first, err := devCerts(dir, keys, logger)
	if err != nil {
		t.Fatal(err)
	}
	again, err := devCerts(dir, keys, logger)
	if err != nil || again != first {
		t.Fatalf("second run issued new certificates (%v)", err)
	}
	sim, err := alipaysim.New(alipaysim.Config{AppCertPEM: first.AppCertPEM, AlipayCertPEM: first.AlipayCertPEM,
		AlipayRootCertPEM: first.AlipayRootCertPEM, AlipayPrivateKeyPEM: keys.AlipayPrivateKeyPEM})
	if err != nil {
		t.Fatalf("dev certificates do not start a simulator: %v", err)
	}
	sim.Close()
}
