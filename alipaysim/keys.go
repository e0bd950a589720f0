package alipaysim

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// File names written by KeySet.WriteDir and read by LoadKeyDir.
const (
	AppPrivateKeyFile    = "app_private_key.pem"
	AppPublicKeyFile     = "app_public_key.pem"
	AlipayPrivateKeyFile = "alipay_private_key.pem"
	AlipayPublicKeyFile  = "alipay_public_key.pem"
)

// KeySet is a development key set: the merchant app's key pair (the app signs requests,
// the simulator verifies them) and the "Alipay" key pair (the simulator signs responses
// and notifications, the app verifies them). Private keys are PKCS#8 PEM, public keys PKIX PEM.
type KeySet struct {
	AppPrivateKeyPEM    string `json:"app_private_key_pem"`
	AppPublicKeyPEM     string `json:"app_public_key_pem"`
	AlipayPrivateKeyPEM string `json:"alipay_private_key_pem"`
	AlipayPublicKeyPEM  string `json:"alipay_public_key_pem"`
}

// GenerateKeys returns a fresh in-memory KeySet with RSA keys of the given size (2048 is
// what Alipay uses). It is meant for tests and local development only.
func GenerateKeys(bits int) (KeySet, error) {
	appPriv, appPub, err := generatePair(bits)
	if err != nil {
		return KeySet{}, fmt.Errorf("generate app key: %w", err)
	}
	aliPriv, aliPub, err := generatePair(bits)
	if err != nil {
		return KeySet{}, fmt.Errorf("generate alipay key: %w", err)
	}
	return KeySet{
		AppPrivateKeyPEM:    appPriv,
		AppPublicKeyPEM:     appPub,
		AlipayPrivateKeyPEM: aliPriv,
		AlipayPublicKeyPEM:  aliPub,
	}, nil
}

func generatePair(bits int) (privPEM, pubPEM string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		return "", "", err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	privPEM = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	pubPEM = string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}))
	return privPEM, pubPEM, nil
}

// WriteDir writes the four PEM files into dir, creating it if needed. Private keys get
// mode 0600. Existing files are not overwritten.
func (k KeySet) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create key dir: %w", err)
	}
	files := []struct {
		name, content string
		mode          os.FileMode
	}{
		{AppPrivateKeyFile, k.AppPrivateKeyPEM, 0o600},
		{AppPublicKeyFile, k.AppPublicKeyPEM, 0o644},
		{AlipayPrivateKeyFile, k.AlipayPrivateKeyPEM, 0o600},
		{AlipayPublicKeyFile, k.AlipayPublicKeyPEM, 0o644},
	}
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		fh, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.mode)
		if err != nil {
			return fmt.Errorf("write key file: %w", err)
		}
		if _, err := fh.WriteString(f.content); err != nil {
			fh.Close()
			return fmt.Errorf("write key file %s: %w", p, err)
		}
		if err := fh.Close(); err != nil {
			return fmt.Errorf("write key file %s: %w", p, err)
		}
	}
	return nil
}

// LoadKeyDir reads the PEM files written by WriteDir. Missing private files are left
// empty, so a directory holding only app_public_key.pem and alipay_private_key.pem (what
// the simulator needs) loads too.
func LoadKeyDir(dir string) (KeySet, error) {
	var ks KeySet
	targets := []struct {
		name string
		dst  *string
	}{
		{AppPrivateKeyFile, &ks.AppPrivateKeyPEM},
		{AppPublicKeyFile, &ks.AppPublicKeyPEM},
		{AlipayPrivateKeyFile, &ks.AlipayPrivateKeyPEM},
		{AlipayPublicKeyFile, &ks.AlipayPublicKeyPEM},
	}
	found := 0
	for _, t := range targets {
		b, err := os.ReadFile(filepath.Join(dir, t.name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return KeySet{}, fmt.Errorf("load key dir: %w", err)
		}
		*t.dst = string(b)
		found++
	}
	if found == 0 {
		return KeySet{}, fmt.Errorf("load key dir %s: no key files found", dir)
	}
	return ks, nil
}

// parsePrivateKey accepts PKCS#1 or PKCS#8, as PEM or as the bare base64 body that
// Alipay's key tool prints.
func parsePrivateKey(s string) (*rsa.PrivateKey, error) {
	der, err := pemOrBase64(s)
	if err != nil {
		return nil, err
	}
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("parse private key: %w", err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, errors.New("parse private key: not an RSA key")
	}
	return rk, nil
}

// parsePublicKey accepts PKIX (what Alipay publishes) or PKCS#1, as PEM or bare base64.
func parsePublicKey(s string) (*rsa.PublicKey, error) {
	der, err := pemOrBase64(s)
	if err != nil {
		return nil, err
	}
	if k, err := x509.ParsePKIXPublicKey(der); err == nil {
		rk, ok := k.(*rsa.PublicKey)
		if !ok {
			return nil, errors.New("parse public key: not an RSA key")
		}
		return rk, nil
	}
	k, err := x509.ParsePKCS1PublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("parse public key: %w", err)
	}
	return k, nil
}

func pemOrBase64(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("empty key")
	}
	if strings.HasPrefix(s, "-----") {
		block, _ := pem.Decode([]byte(s))
		if block == nil {
			return nil, errors.New("invalid PEM key")
		}
		return block.Bytes, nil
	}
	der, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		return nil, fmt.Errorf("decode base64 key: %w", err)
	}
	return der, nil
}
