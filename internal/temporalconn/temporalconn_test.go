package temporalconn

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

// selfSigned returns a certificate and key PEM named cn.
func selfSigned(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// write writes a file and moves its modification time on, so that a rewrite within the
// file system's time resolution is still seen as a change.
func write(t *testing.T, name string, b []byte, at time.Time) {
	t.Helper()
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(name, at, at); err != nil {
		t.Fatal(err)
	}
}

func TestNoSettingsLeaveThePlainConnection(t *testing.T) {
	var opts client.Options
	if err := (Settings{}).Apply(&opts); err != nil || opts.ConnectionOptions.TLS != nil || opts.Credentials != nil {
		t.Fatalf("no settings: %+v, %v; want plain gRPC", opts.ConnectionOptions, err)
	}
}

// Every bad setting fails at start, naming the variable, the file and the problem.
func TestBadSettingsFailAtStartNamingTheFile(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, "c")
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	write(t, certFile, cert, time.Now())
	write(t, keyFile, key, time.Now())
	junk := filepath.Join(dir, "junk.pem")
	write(t, junk, []byte("not a certificate"), time.Now())
	empty := filepath.Join(dir, "empty")
	write(t, empty, []byte("\n"), time.Now())
	for _, tc := range []struct {
		name string
		s    Settings
		want []string
	}{
		{"missing CA file", Settings{CAFile: filepath.Join(dir, "nope.pem")}, []string{"PAYKIT_TEMPORAL_TLS_CA_FILE", "nope.pem", "no such file"}},
		{"CA file without a certificate", Settings{CAFile: junk}, []string{"PAYKIT_TEMPORAL_TLS_CA_FILE", "junk.pem", "no PEM certificate"}},
		{"certificate without its key", Settings{CertFile: certFile}, []string{"PAYKIT_TEMPORAL_TLS_KEY_FILE"}},
		{"missing certificate", Settings{CertFile: filepath.Join(dir, "gone.pem"), KeyFile: keyFile}, []string{"PAYKIT_TEMPORAL_TLS_CERT_FILE", "gone.pem"}},
		{"key of another certificate", Settings{CertFile: certFile, KeyFile: junk}, []string{"do not load", "junk.pem"}},
		{"API key twice", Settings{APIKey: "k", APIKeyFile: keyFile}, []string{"not both"}},
		{"empty API key file", Settings{APIKeyFile: empty}, []string{"PAYKIT_TEMPORAL_API_KEY_FILE", "empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts client.Options
			err := tc.s.Apply(&opts)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// A rotated client certificate and a rotated API key are picked up without a restart;
// a rotation caught half-written keeps the last good one.
func TestCertificateAndAPIKeyAreReadAgainWhenTheyChange(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	c1, k1 := selfSigned(t, "first")
	t0 := time.Now().Add(-time.Minute)
	write(t, certFile, c1, t0)
	write(t, keyFile, k1, t0)
	kp := &keyPair{certFile: certFile, keyFile: keyFile}
	first, err := kp.get()
	if err != nil || first.Leaf.Subject.CommonName != "first" {
		t.Fatalf("first pair: %v, %v", first, err)
	}
	c2, k2 := selfSigned(t, "second")
	write(t, certFile, c2, t0.Add(time.Second))
	if got, err := kp.get(); err != nil || got.Leaf.Subject.CommonName != "first" {
		t.Fatalf("certificate rotated, key not yet: %v, %v; want the last good pair", got, err)
	}
	write(t, keyFile, k2, t0.Add(2*time.Second))
	if got, err := kp.get(); err != nil || got.Leaf.Subject.CommonName != "second" {
		t.Fatalf("after the rotation: %v, %v; want the second certificate", got, err)
	}

	keyPath := filepath.Join(dir, "apikey")
	write(t, keyPath, []byte("key-one\n"), t0)
	var opts client.Options
	if err := (Settings{APIKeyFile: keyPath}).Apply(&opts); err != nil || opts.Credentials == nil || opts.ConnectionOptions.TLS == nil {
		t.Fatalf("API key file: %+v, %v; want credentials over TLS", opts.ConnectionOptions, err)
	}
	f := &fileValue{name: keyPath}
	if v, err := f.get(); err != nil || v != "key-one" {
		t.Fatalf("API key %q, %v", v, err)
	}
	write(t, keyPath, []byte("key-two"), t0.Add(time.Second))
	if v, err := f.get(); err != nil || v != "key-two" {
		t.Fatalf("rotated API key %q, %v; want key-two", v, err)
	}
	if err := os.Remove(keyPath); err != nil {
		t.Fatal(err)
	}
	if v, err := f.get(); err != nil || v != "key-two" {
		t.Fatalf("API key file gone mid-rotation: %q, %v; want the last good key", v, err)
	}
}
