// Package temporalconn is how every paykit process reaches Temporal's frontend: plain
// gRPC to a local server, server-verified TLS (a CA file and a server name), mutual TLS
// with a client certificate that is read again when its files change, and Temporal
// Cloud's API key, given inline or in a file that is read again when it changes.
package temporalconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
)

// Settings are the connection settings of internal/config (PAYKIT_TEMPORAL_TLS*,
// PAYKIT_TEMPORAL_API_KEY*).
type Settings struct {
	// TLS turns TLS on with the system's roots; CAFile, ServerName, a client
	// certificate or an API key each turn it on too.
	TLS bool
	// CAFile is a PEM bundle of the CAs the server's certificate must chain to, instead
	// of the system's roots.
	CAFile string
	// ServerName is the name the server's certificate must carry, when it is not the
	// host of the address (a load balancer, an IP address).
	ServerName string
	// CertFile and KeyFile are the client certificate and key (mutual TLS), read again
	// when either file changes, so a rotated certificate needs no restart.
	CertFile, KeyFile string
	// APIKey is a Temporal Cloud API key; APIKeyFile is a file holding one, read again
	// when it changes. At most one of them.
	APIKey, APIKeyFile string
}

// Enabled reports whether the connection uses TLS.
func (s Settings) Enabled() bool {
	return s.TLS || s.CAFile != "" || s.ServerName != "" || s.CertFile != "" || s.KeyFile != "" || s.APIKey != "" || s.APIKeyFile != ""
}

// Apply sets the TLS configuration and credentials of opts from s. Every file is read
// and checked here, so a missing or bad one fails at start with its name and the
// problem, before any connection is tried.
func (s Settings) Apply(opts *client.Options) error {
	if !s.Enabled() {
		return nil
	}
	if (s.CertFile == "") != (s.KeyFile == "") {
		return errors.New("temporal mTLS: set both PAYKIT_TEMPORAL_TLS_CERT_FILE and PAYKIT_TEMPORAL_TLS_KEY_FILE, or neither")
	}
	if s.APIKey != "" && s.APIKeyFile != "" {
		return errors.New("temporal API key: set PAYKIT_TEMPORAL_API_KEY or PAYKIT_TEMPORAL_API_KEY_FILE, not both")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.ServerName}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return fmt.Errorf("temporal TLS CA file (PAYKIT_TEMPORAL_TLS_CA_FILE): %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("temporal TLS CA file %s (PAYKIT_TEMPORAL_TLS_CA_FILE): no PEM certificate in it", s.CAFile)
		}
		cfg.RootCAs = pool
	}
	if s.CertFile != "" {
		kp := &keyPair{certFile: s.CertFile, keyFile: s.KeyFile}
		if _, err := kp.get(); err != nil {
			return err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return kp.get() }
	}
	opts.ConnectionOptions.TLS = cfg
	switch {
	case s.APIKey != "":
		opts.Credentials = client.NewAPIKeyStaticCredentials(s.APIKey)
	case s.APIKeyFile != "":
		f := &fileValue{name: s.APIKeyFile}
		if _, err := f.get(); err != nil {
			return err
		}
		opts.Credentials = client.NewAPIKeyDynamicCredentials(func(context.Context) (string, error) { return f.get() })
	}
	return nil
}

// stamp is what says a file changed: its size and modification time.
type stamp struct {
	size int64
	mod  time.Time
}

func statOf(name string) (stamp, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return stamp{}, err
	}
	return stamp{size: fi.Size(), mod: fi.ModTime()}, nil
}

// keyPair is a client certificate read again when either of its files changes. A
// change that does not load (a half-written rotation) keeps the last good pair and is
// reported by the next handshake that has none.
type keyPair struct {
	certFile, keyFile string
	mu                sync.Mutex
	certStamp         stamp
	keyStamp          stamp
	cert              *tls.Certificate
}

func (k *keyPair) get() (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	cs, err := statOf(k.certFile)
	if err != nil {
		return k.lastOr(fmt.Errorf("temporal mTLS certificate (PAYKIT_TEMPORAL_TLS_CERT_FILE): %w", err))
	}
	ks, err := statOf(k.keyFile)
	if err != nil {
		return k.lastOr(fmt.Errorf("temporal mTLS key (PAYKIT_TEMPORAL_TLS_KEY_FILE): %w", err))
	}
	if k.cert != nil && cs == k.certStamp && ks == k.keyStamp {
		return k.cert, nil
	}
	c, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		return k.lastOr(fmt.Errorf("temporal mTLS certificate %s and key %s (PAYKIT_TEMPORAL_TLS_CERT_FILE, _KEY_FILE) do not load: %w", k.certFile, k.keyFile, err))
	}
	if c.Leaf != nil && time.Now().After(c.Leaf.NotAfter) {
		return k.lastOr(fmt.Errorf("temporal mTLS certificate %s expired at %s", k.certFile, c.Leaf.NotAfter.UTC().Format(time.RFC3339)))
	}
	k.cert, k.certStamp, k.keyStamp = &c, cs, ks
	return k.cert, nil
}

func (k *keyPair) lastOr(err error) (*tls.Certificate, error) {
	if k.cert != nil {
		return k.cert, nil
	}
	return nil, err
}

// fileValue is a secret in a file (an API key), trimmed, read again when it changes.
type fileValue struct {
	name  string
	mu    sync.Mutex
	st    stamp
	value string
}

func (f *fileValue) get() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := statOf(f.name)
	if err == nil && f.value != "" && st == f.st {
		return f.value, nil
	}
	var b []byte
	if err == nil {
		b, err = os.ReadFile(f.name)
	}
	v := strings.TrimSpace(string(b))
	if err == nil && v == "" {
		err = errors.New("the file is empty")
	}
	if err != nil {
		if f.value != "" {
			return f.value, nil
		}
		return "", fmt.Errorf("temporal API key file %s (PAYKIT_TEMPORAL_API_KEY_FILE): %w", f.name, err)
	}
	f.value, f.st = v, st
	return v, nil
}
