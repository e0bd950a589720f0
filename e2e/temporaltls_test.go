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
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
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
				b, err := dialBackend(backend)
				if err != nil {
					return
				}
				defer b.Close()
				go func() { _, _ = io.Copy(b, tc); _ = b.(interface{ CloseWrite() error }).CloseWrite() }()
				_, _ = io.Copy(tc, b)
			}()
		}
	}()
	return f
}

// dialBackend reaches the Temporal server behind a front: over TLS with the run's client
// certificate when the server itself requires it (PAYKIT_E2E_TEMPORAL=postgres-mtls).
func dialBackend(addr string) (net.Conn, error) {
	if env.temporalTLS == nil {
		return net.Dial("tcp", addr)
	}
	c := env.temporalTLS.Clone()
	c.NextProtos = []string{"h2"}
	return tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, c)
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

// TestTemporalServerRefusesClientsWithoutItsCertificate: the Temporal server of the
// postgres-mtls pass (scripts/temporal-postgres.sh with TEMPORAL_TLS_DIR, certificates of
// scripts/temporal-certs.sh) requires a client certificate of its CA. On its frontend a
// client in plaintext, one with TLS but no certificate, and one with a certificate of
// another CA (scripts/temporal-certs.sh into a directory of its own) are refused, by the
// SDK and by `paykit temporal-setup`, which fails within seconds on a refused certificate;
// the run's certificate is let in. Its history and matching ports (internode traffic)
// refuse a handshake without a certificate or with the other CA's.
func TestTemporalServerRefusesClientsWithoutItsCertificate(t *testing.T) {
	if temporalMode() != "postgres-mtls" {
		t.Skip("runs on the Temporal server with mutual TLS: PAYKIT_E2E_TEMPORAL=postgres-mtls (the pass in scripts/test.sh)")
	}
	certs := filepath.Join(env.dir, "temporal-tls")
	rogue := filepath.Join(t.TempDir(), "rogue")
	if err := makeTemporalCerts(rogue); err != nil {
		t.Fatal(err)
	}
	noCert, err := temporalClientTLS(certs, "")
	if err != nil {
		t.Fatal(err)
	}
	rogueCert, err := temporalClientTLS(certs, rogue)
	if err != nil {
		t.Fatal(err)
	}
	good, err := temporalClientTLS(certs, certs)
	if err != nil {
		t.Fatal(err)
	}
	sdkDial := func(c *tls.Config) (time.Duration, error) {
		start := time.Now()
		tc, err := client.Dial(client.Options{HostPort: env.temporalAddr, Logger: quietLogger{},
			ConnectionOptions: client.ConnectionOptions{TLS: c}})
		if err == nil {
			tc.Close()
		}
		return time.Since(start), err
	}
	setup := func(timeout time.Duration, envv []string) (string, time.Duration, error) {
		cmd := exec.Command(env.paykitBin, "temporal-setup", "-timeout", timeout.String())
		cmd.Env = append(append(os.Environ(), "PAYKIT_TEMPORAL_ADDR="+env.temporalAddr), envv...)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		return string(out), time.Since(start), err
	}

	if _, err := sdkDial(good); err != nil {
		t.Fatalf("the run's client certificate: %v", err)
	}
	if out, _, err := setup(30*time.Second, temporalTLSEnv(certs, certs)); err != nil {
		t.Fatalf("temporal-setup with the run's client certificate: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		name string
		tls  *tls.Config
		env  []string
	}{
		// A plaintext client sees the connection closed before the server's preface, as
		// from a server still starting: temporal-setup waits out its -timeout there.
		{name: "plaintext", env: nil},
		{name: "no client certificate", tls: noCert, env: temporalTLSEnv(certs, "")},
		{name: "a certificate of another CA", tls: rogueCert, env: temporalTLSEnv(certs, rogue)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if took, err := sdkDial(tc.tls); err == nil {
				t.Fatalf("the SDK connected (%s)", took)
			} else if took > 15*time.Second {
				t.Fatalf("the SDK took %s to be refused: %v", took, err)
			} else {
				t.Logf("SDK refused in %s: %v", took.Round(time.Millisecond), err)
			}
			timeout := 30 * time.Second
			if tc.tls == nil {
				timeout = 5 * time.Second
			}
			out, took, err := setup(timeout, tc.env)
			if err == nil {
				t.Fatalf("temporal-setup succeeded:\n%s", out)
			}
			if tc.tls != nil && took > 15*time.Second {
				t.Fatalf("temporal-setup took %s to fail; a refused certificate must fail at once, not at its timeout\n%s", took, out)
			}
			t.Logf("temporal-setup failed in %s: %s", took.Round(time.Millisecond), lastLine(out))
			if tc.tls == nil {
				return
			}
			// Internode: the history and matching ports of the node (scripts/temporal-postgres.sh:
			// the frontend's port +1 and +2) answer the run's certificate and refuse this one.
			host, port, _ := net.SplitHostPort(env.temporalAddr)
			p, _ := strconv.Atoi(port)
			for _, svc := range []struct {
				name   string
				offset int
			}{{"history", 1}, {"matching", 2}} {
				addr := net.JoinHostPort(host, strconv.Itoa(p+svc.offset))
				if err := tlsAnswer(t, addr, good); err != nil {
					t.Fatalf("%s at %s refused the run's certificate: %v", svc.name, addr, err)
				}
				err := tlsAnswer(t, addr, tc.tls)
				var ne net.Error
				if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
					t.Errorf("%s at %s let the client in (%v)", svc.name, addr, err)
				} else {
					t.Logf("%s refused: %v", svc.name, err)
				}
			}
		})
	}
}

// tlsAnswer connects to the TLS server at addr as the client of c and reads the first
// bytes it sends: a gRPC server that accepted the client sends its HTTP/2 settings at
// once, one that refused it fails the handshake or (TLS 1.3, where the server judges the
// client's certificate after the client finished) answers the read with its alert. It
// fails the test if nothing listens at addr.
func tlsAnswer(t *testing.T, addr string, c *tls.Config) error {
	t.Helper()
	raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("nothing listens at %s: %v", addr, err)
	}
	defer raw.Close()
	c = c.Clone()
	c.NextProtos = []string{"h2"}
	conn := tls.Client(raw, c)
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if err := conn.Handshake(); err != nil {
		return err
	}
	_, err = conn.Read(make([]byte, 1))
	return err
}
