package alipay

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"github.com/smartwalle/alipay/v3"
)

// certMode reports whether cfg asks for certificate mode (公钥证书模式), and refuses a
// partial or mixed configuration: all three certificates or none, and then no bare
// Alipay public key beside them.
func (cfg Config) certMode() (bool, error) {
	set := 0
	for _, c := range []string{cfg.AppCertPEM, cfg.AlipayCertPEM, cfg.AlipayRootCertPEM} {
		if strings.TrimSpace(c) != "" {
			set++
		}
	}
	switch {
	case set == 0:
		return false, nil
	case set != 3:
		return false, errors.New("alipay: certificate mode needs AppCertPEM, AlipayCertPEM and AlipayRootCertPEM, all three")
	case strings.TrimSpace(cfg.AlipayPublicKeyPEM) != "":
		return false, errors.New("alipay: set either AlipayPublicKeyPEM (public-key mode) or the three certificates (certificate mode), not both")
	}
	return true, nil
}

// loadVerifier gives the client what it verifies answers and notifications with, and in
// certificate mode the SNs it sends. It uses smartwalle's own loaders.
//
// In certificate mode the client keeps one verifier, keyed by the SN of the loaded
// Alipay certificate. An answer or notification naming another alipay_cert_sn finds no
// verifier and fails with ErrAliPublicKeyNotFound (a signature error): the client was
// built with production=false, which is what stops it from downloading the certificate
// such a field names (alipay.open.app.alipaycert.download), so a forged SN can never
// make it trust a key it did not load. An answer without alipay_cert_sn is verified
// with the loaded certificate's key. Rotating Alipay's certificate therefore means
// loading the new one (and restarting), not trusting a download.
func loadVerifier(client *alipay.Client, cfg Config) error {
	cert, err := cfg.certMode()
	if err != nil {
		return err
	}
	if !cert {
		if err := client.LoadAliPayPublicKey(strings.TrimSpace(cfg.AlipayPublicKeyPEM)); err != nil {
			return fmt.Errorf("alipay: alipay public key: %w", err)
		}
		return nil
	}
	// smartwalle's loaders skip what they cannot use without an error (a bundle with no
	// RSA-signed root gives an empty root SN, a non-RSA Alipay certificate loads no
	// verifier), so the inputs are checked here first and the result after.
	if _, err := parseCerts(cfg.AppCertPEM, false); err != nil {
		return fmt.Errorf("alipay: app certificate: %w", err)
	}
	if err := client.LoadAppCertPublicKey(strings.TrimSpace(cfg.AppCertPEM)); err != nil {
		return fmt.Errorf("alipay: app certificate: %w", err)
	}
	if _, err := parseCerts(cfg.AlipayRootCertPEM, true); err != nil {
		return fmt.Errorf("alipay: alipay root certificate: %w", err)
	}
	if err := client.LoadAliPayRootCert(strings.TrimSpace(cfg.AlipayRootCertPEM)); err != nil {
		return fmt.Errorf("alipay: alipay root certificate: %w", err)
	}
	aliCerts, err := parseCerts(cfg.AlipayCertPEM, false)
	if err != nil {
		return fmt.Errorf("alipay: alipay certificate: %w", err)
	}
	if _, ok := aliCerts[0].PublicKey.(*rsa.PublicKey); !ok {
		return errors.New("alipay: alipay certificate: not an RSA key")
	}
	if err := client.LoadAlipayCertPublicKey(strings.TrimSpace(cfg.AlipayCertPEM)); err != nil {
		return fmt.Errorf("alipay: alipay certificate: %w", err)
	}
	v, err := client.URLValues(alipay.TradeQuery{})
	if err != nil || v.Get("app_cert_sn") == "" || v.Get("alipay_root_cert_sn") == "" {
		return fmt.Errorf("alipay: certificate SNs could not be computed (%v)", err)
	}
	return nil
}

// parseCerts reads the PEM certificates of s: exactly one, or for a root bundle one or
// more of which at least one is RSA-signed (the only kind the root SN counts).
func parseCerts(s string, bundle bool) ([]*x509.Certificate, error) {
	rest := []byte(strings.TrimSpace(s))
	var certs []*x509.Certificate
	rsaSigned := false
	for {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %q is not a CERTIFICATE", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
		rsaSigned = rsaSigned || c.SignatureAlgorithm == x509.SHA256WithRSA || c.SignatureAlgorithm == x509.SHA1WithRSA
	}
	switch {
	case len(certs) == 0:
		return nil, errors.New("no PEM certificate found")
	case !bundle && len(certs) != 1:
		return nil, fmt.Errorf("want one certificate, found %d", len(certs))
	case bundle && !rsaSigned:
		return nil, errors.New("the bundle has no RSA-signed root")
	}
	return certs, nil
}
