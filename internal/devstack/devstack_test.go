package devstack_test

import (
	"log/slog"
	"testing"

	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/internal/devstack"
)

func TestDevCertsIssuedOnceThenLoaded(t *testing.T) {
	dir := t.TempDir()
	keys, err := alipaysim.GenerateKeys(1024)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	first, err := devstack.Certs(dir, keys, logger)
	if err != nil {
		t.Fatal(err)
	}
	again, err := devstack.Certs(dir, keys, logger)
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
