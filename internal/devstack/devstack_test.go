package devstack_test

import (
	"log/slog"
	"testing"

	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/internal/devstack"
	"github.com/paykit/paykit/secrets"
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

// paykit dev seals the demo tenant's webhook secret with a development keyring, made
// once in the key directory and read again on the next run, so that what one run sealed
// the next opens.
func TestDevSecretsKeyMadeOnceThenLoaded(t *testing.T) {
	dir := t.TempDir()
	logger := slog.New(slog.DiscardHandler)
	first, err := devstack.SecretsKeys(dir, logger)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.ParseKeyring(first); err != nil {
		t.Fatalf("the development key %q: %v", first, err)
	}
	if again, err := devstack.SecretsKeys(dir, logger); err != nil || again != first {
		t.Fatalf("second run made a new key (%v)", err)
	}
}
