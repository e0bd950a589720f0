package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a leaf certificate for a server (with its DNS name) or a client, and
// returns its certificate and key PEM.
func (ca *testCA) issue(t *testing.T, cn string, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	if server {
		tmpl.ExtKeyUsage, tmpl.DNSNames = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, []string{cn}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// mtlsFront is a TLS listener that demands a client certificate of its CA and passes
// the decrypted gRPC stream on to the Temporal server at backend: the Temporal frontend
// of a deployment that turned on mTLS, as Temporal's security guide and Temporal Cloud
// do. It counts the handshakes it refused.
type mtlsFront struct {
	addr    string
	mu      sync.Mutex
	refused int
}

func startMTLSFront(t *testing.T, serverCA, clientCA *testCA, serverName, backend string) *mtlsFront {
	t.Helper()
	certPEM, keyPEM := serverCA.issue(t, serverName, true)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(clientCA.cert)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	f := &mtlsFront{addr: ln.Addr().String()}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tc := c.(*tls.Conn)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := tc.HandshakeContext(ctx)
				cancel()
				if err != nil {
					f.mu.Lock()
					f.refused++
					f.mu.Unlock()
					return
				}
				b, err := net.Dial("tcp", backend)
				if err != nil {
					return
				}
				defer b.Close()
				go func() { _, _ = io.Copy(b, tc); _ = b.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(tc, b)
			}()
		}
	}()
	return f
}

func (f *mtlsFront) refusals() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTemporalOverMutualTLS: every paykit process reaches a Temporal frontend that
// requires mutual TLS with the PAYKIT_TEMPORAL_TLS_* settings (a CA file, a server name,
// a client certificate): temporal-setup prepares the namespace through it and a payment
// is paid exactly once through it. A client without a certificate, with one from
// another CA, or with a certificate file that is missing fails at start, within
// seconds, with a message that says what is wrong, never a hang.
func TestTemporalOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, rogue := newTestCA(t, "paykit test temporal CA"), newTestCA(t, "another CA")
	const serverName = "temporal.paykit.test"
	front := startMTLSFront(t, ca, ca, serverName, env.temporalAddr)
	caFile := writeFile(t, dir, "ca.pem", ca.pem)
	cert, key := ca.issue(t, "paykit", false)
	rogueCert, rogueKey := rogue.issue(t, "paykit", false)
	tlsEnv := []string{
		"PAYKIT_TEMPORAL_ADDR=" + front.addr,
		"PAYKIT_TEMPORAL_TLS_CA_FILE=" + caFile,
		"PAYKIT_TEMPORAL_TLS_SERVER_NAME=" + serverName,
		"PAYKIT_TEMPORAL_TLS_CERT_FILE=" + writeFile(t, dir, "client.pem", cert),
		"PAYKIT_TEMPORAL_TLS_KEY_FILE=" + writeFile(t, dir, "client-key.pem", key),
	}
	setup := func(extra ...string) (string, time.Duration, error) {
		cmd := exec.Command(env.paykitBin, "temporal-setup", "-timeout", "30s")
		cmd.Env = append(append(os.Environ(), "PAYKIT_TEMPORAL_ADDR="+front.addr, "PAYKIT_TEMPORAL_TLS_CA_FILE="+caFile,
			"PAYKIT_TEMPORAL_TLS_SERVER_NAME="+serverName), extra...)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		return string(out), time.Since(start), err
	}
	if out, _, err := setup(tlsEnv...); err != nil {
		t.Fatalf("temporal-setup over mTLS: %v\n%s", err, out)
	}

	for _, tc := range []struct {
		name  string
		extra []string
		want  string
	}{
		{name: "no client certificate", want: "tls"},
		{name: "a certificate of another CA", want: "tls", extra: []string{
			"PAYKIT_TEMPORAL_TLS_CERT_FILE=" + writeFile(t, dir, "rogue.pem", rogueCert),
			"PAYKIT_TEMPORAL_TLS_KEY_FILE=" + writeFile(t, dir, "rogue-key.pem", rogueKey)}},
		{name: "a missing certificate file", want: "PAYKIT_TEMPORAL_TLS_CERT_FILE", extra: []string{
			"PAYKIT_TEMPORAL_TLS_CERT_FILE=" + filepath.Join(dir, "nowhere.pem"),
			"PAYKIT_TEMPORAL_TLS_KEY_FILE=" + filepath.Join(dir, "client-key.pem")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := front.refusals()
			out, took, err := setup(tc.extra...)
			if err == nil || !strings.Contains(strings.ToLower(out), strings.ToLower(tc.want)) {
				t.Fatalf("temporal-setup: %v after %s\n%s\nwant a failure saying %q", err, took, out, tc.want)
			}
			if took > 15*time.Second {
				t.Fatalf("temporal-setup took %s to fail; a refused certificate must fail at once, not at its timeout", took)
			}
			if tc.want == "tls" && front.refusals() == before {
				t.Fatalf("the frontend refused no handshake; the client never tried TLS")
			}
		})
	}

	st := newStack(t, stackOptions{extraEnv: tlsEnv})
	happyPath(t, st, env.simURL)
}
