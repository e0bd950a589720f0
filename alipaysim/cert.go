package alipaysim

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/md5"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Certificate mode (公钥证书模式): instead of bare public keys, the app and Alipay exchange
// certificates issued under an Alipay root. Requests carry app_cert_sn and
// alipay_root_cert_sn; answers carry alipay_cert_sn, naming the certificate whose key
// signed them.

// File names written by CertSet.WriteDir and read by LoadCertDir.
const (
	AppCertFile        = "app_cert.pem"
	AlipayCertFile     = "alipay_cert.pem"
	AlipayRootCertFile = "alipay_root_cert.pem"
)

// CertSet is a development certificate set for a KeySet: the root bundle, the Alipay
// certificate (for the Alipay key) and the app certificate (for the app key), both
// issued by the bundle's RSA root. All PEM.
type CertSet struct {
	AppCertPEM        string `json:"app_cert_pem"`
	AlipayCertPEM     string `json:"alipay_cert_pem"`
	AlipayRootCertPEM string `json:"alipay_root_cert_pem"`
}

// devIssuer is the development root's DN, shaped like Alipay's own root and written in
// the same ASN.1 order (C, O, OU, CN).
var devIssuer = pkix.Name{
	Country:            []string{"CN"},
	Organization:       []string{"paykit alipaysim"},
	OrganizationalUnit: []string{"Development Certification Authority"},
	CommonName:         "alipaysim Development Root CA (NOT FOR PRODUCTION)",
}

// GenerateCerts issues a development root CA and, under it, certificates for the
// KeySet's Alipay and app public keys. Like Alipay's root bundle, the bundle also holds
// a second, non-RSA (ECDSA) root, which the root SN leaves out. The root private keys
// are thrown away. For tests and local development only.
func GenerateCerts(ks KeySet) (CertSet, error) {
	appPub, err := parsePublicKey(ks.AppPublicKeyPEM)
	if err != nil {
		return CertSet{}, fmt.Errorf("app public key: %w", err)
	}
	aliPub, err := parsePublicKey(ks.AlipayPublicKeyPEM)
	if err != nil {
		return CertSet{}, fmt.Errorf("alipay public key: %w", err)
	}
	rootKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return CertSet{}, err
	}
	now := time.Now()
	rootTmpl := &x509.Certificate{
		Subject: devIssuer, NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(10, 0, 0),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		SignatureAlgorithm: x509.SHA256WithRSA,
	}
	rootDER, root, err := issue(rootTmpl, nil, &rootKey.PublicKey, rootKey)
	if err != nil {
		return CertSet{}, fmt.Errorf("root: %w", err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return CertSet{}, err
	}
	ecName := devIssuer
	ecName.CommonName = "alipaysim Development ECC Root (NOT FOR PRODUCTION)"
	ecDER, _, err := issue(&x509.Certificate{
		Subject: ecName, NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(10, 0, 0),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}, nil, &ecKey.PublicKey, ecKey)
	if err != nil {
		return CertSet{}, fmt.Errorf("ecc root: %w", err)
	}
	leaf := func(cn string, pub *rsa.PublicKey) (string, error) {
		der, _, err := issue(&x509.Certificate{
			Subject:   pkix.Name{Country: []string{"CN"}, Organization: []string{"paykit alipaysim"}, CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(5, 0, 0),
			KeyUsage: x509.KeyUsageDigitalSignature, SignatureAlgorithm: x509.SHA256WithRSA,
		}, root, pub, rootKey)
		return pemCert(der), err
	}
	var cs CertSet
	if cs.AlipayCertPEM, err = leaf("alipaysim Alipay certificate", aliPub); err != nil {
		return CertSet{}, fmt.Errorf("alipay certificate: %w", err)
	}
	if cs.AppCertPEM, err = leaf("alipaysim app certificate", appPub); err != nil {
		return CertSet{}, fmt.Errorf("app certificate: %w", err)
	}
	cs.AlipayRootCertPEM = pemCert(ecDER) + pemCert(rootDER)
	return cs, nil
}

// issue signs tmpl (self-signed when parent is nil) with a random 64-bit serial.
func issue(tmpl, parent *x509.Certificate, pub, signer any) ([]byte, *x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 63))
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial.Add(serial, big.NewInt(1))
	if parent == nil {
		parent = tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, nil, err
	}
	c, err := x509.ParseCertificate(der)
	return der, c, err
}

func pemCert(der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// WriteDir writes the three PEM files into dir, creating it if needed. Existing files
// are not overwritten.
func (c CertSet) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create cert dir: %w", err)
	}
	for _, f := range []struct{ name, content string }{
		{AppCertFile, c.AppCertPEM}, {AlipayCertFile, c.AlipayCertPEM}, {AlipayRootCertFile, c.AlipayRootCertPEM},
	} {
		fh, err := os.OpenFile(filepath.Join(dir, f.name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("write cert file: %w", err)
		}
		_, err = fh.WriteString(f.content)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write cert file %s: %w", f.name, err)
		}
	}
	return nil
}

// LoadCertDir reads the certificate files written by WriteDir. A directory without any
// of them loads as an empty CertSet (public-key mode); one with only some is an error.
func LoadCertDir(dir string) (CertSet, error) {
	var cs CertSet
	found := 0
	for _, t := range []struct {
		name string
		dst  *string
	}{{AppCertFile, &cs.AppCertPEM}, {AlipayCertFile, &cs.AlipayCertPEM}, {AlipayRootCertFile, &cs.AlipayRootCertPEM}} {
		b, err := os.ReadFile(filepath.Join(dir, t.name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return CertSet{}, fmt.Errorf("load cert dir: %w", err)
		}
		*t.dst = string(b)
		found++
	}
	if found != 0 && found != 3 {
		return CertSet{}, fmt.Errorf("load cert dir %s: want all of %s, %s and %s, or none", dir,
			AppCertFile, AlipayCertFile, AlipayRootCertFile)
	}
	return cs, nil
}

// CertSN is a certificate's SN as Alipay computes it: the lowercase hex MD5 of the
// issuer DN, written with the RDNs in reverse order of the ASN.1 sequence and joined
// with commas (CN=…,OU=…,O=…,C=…), followed by the serial number in decimal.
func CertSN(cert *x509.Certificate) (string, error) {
	var rdns pkix.RDNSequence
	rest, err := asn1.Unmarshal(cert.RawIssuer, &rdns)
	if err != nil {
		return "", fmt.Errorf("certificate issuer: %w", err)
	}
	if len(rest) > 0 {
		return "", errors.New("certificate issuer: trailing data")
	}
	sum := md5.Sum([]byte(issuerDN(rdns) + cert.SerialNumber.String()))
	return hex.EncodeToString(sum[:]), nil
}

// RootCertSN is the SN of a root bundle: the SNs of its RSA-signed certificates
// (sha1WithRSA or sha256WithRSA), in bundle order, joined with "_".
func RootCertSN(bundlePEM string) (string, error) {
	certs, err := parseCerts(bundlePEM)
	if err != nil {
		return "", err
	}
	var sns []string
	for _, c := range certs {
		if c.SignatureAlgorithm != x509.SHA256WithRSA && c.SignatureAlgorithm != x509.SHA1WithRSA {
			continue
		}
		sn, err := CertSN(c)
		if err != nil {
			return "", err
		}
		sns = append(sns, sn)
	}
	if len(sns) == 0 {
		return "", errors.New("root bundle has no RSA-signed certificate")
	}
	return strings.Join(sns, "_"), nil
}

// attributeNames are the short names of the DN attributes, as RFC 4514 writes them.
var attributeNames = map[string]string{
	"2.5.4.3": "CN", "2.5.4.5": "SERIALNUMBER", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST",
	"2.5.4.9": "STREET", "2.5.4.10": "O", "2.5.4.11": "OU", "2.5.4.17": "POSTALCODE",
}

// issuerDN writes the DN most specific first: the RDNs of the sequence in reverse order,
// comma-joined; the attributes of a multi-valued RDN joined with "+".
func issuerDN(rdns pkix.RDNSequence) string {
	parts := make([]string, 0, len(rdns))
	for i := len(rdns) - 1; i >= 0; i-- {
		atvs := make([]string, 0, len(rdns[i]))
		for _, atv := range rdns[i] {
			atvs = append(atvs, attributeString(atv))
		}
		parts = append(parts, strings.Join(atvs, "+"))
	}
	return strings.Join(parts, ",")
}

func attributeString(atv pkix.AttributeTypeAndValue) string {
	oid := atv.Type.String()
	name, known := attributeNames[oid]
	s, isString := atv.Value.(string)
	if !known || !isString {
		// An unknown attribute is written as its OID and the hex of its DER value.
		der, _ := asn1.Marshal(atv.Value)
		return oid + "=#" + hex.EncodeToString(der)
	}
	return name + "=" + escapeDNValue(s)
}

// escapeDNValue escapes a DN attribute value as RFC 4514 section 2.4 asks.
func escapeDNValue(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case strings.ContainsRune(`,+"\<>;`, r),
			i == 0 && (r == ' ' || r == '#'),
			i == len(s)-1 && r == ' ':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == 0:
			b.WriteString(`\00`)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// parseCerts reads every CERTIFICATE block of a PEM text.
func parseCerts(s string) ([]*x509.Certificate, error) {
	rest := []byte(strings.TrimSpace(s))
	var out []*x509.Certificate
	for len(rest) > 0 {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate: %w", err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate found")
	}
	return out, nil
}

// parseCert reads exactly one PEM certificate.
func parseCert(s string) (*x509.Certificate, error) {
	certs, err := parseCerts(s)
	if err != nil {
		return nil, err
	}
	if len(certs) != 1 {
		return nil, fmt.Errorf("want one certificate, found %d", len(certs))
	}
	return certs[0], nil
}

// certMode is the simulator's certificate setup: the SN of the Alipay certificate it
// answers with and the root SN that requests must name. Both empty: public-key mode only.
type certMode struct {
	alipayCertSN string
	rootSN       string
	roots        *x509.CertPool
}

// loadCertMode checks the Alipay certificate against the Alipay private key and
// computes the SNs.
func loadCertMode(c Config, key *rsa.PrivateKey) (certMode, error) {
	if c.AlipayCertPEM == "" && c.AlipayRootCertPEM == "" {
		return certMode{}, nil
	}
	if c.AlipayCertPEM == "" || c.AlipayRootCertPEM == "" {
		return certMode{}, errors.New("certificate mode needs both AlipayCertPEM and AlipayRootCertPEM")
	}
	cert, err := parseCert(c.AlipayCertPEM)
	if err != nil {
		return certMode{}, fmt.Errorf("alipay certificate: %w", err)
	}
	if pub, ok := cert.PublicKey.(*rsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) {
		return certMode{}, errors.New("alipay certificate is not for the Alipay private key")
	}
	m := certMode{roots: x509.NewCertPool()}
	if m.alipayCertSN, err = CertSN(cert); err != nil {
		return certMode{}, fmt.Errorf("alipay certificate: %w", err)
	}
	if m.rootSN, err = RootCertSN(c.AlipayRootCertPEM); err != nil {
		return certMode{}, fmt.Errorf("alipay root certificate: %w", err)
	}
	roots, _ := parseCerts(c.AlipayRootCertPEM)
	for _, r := range roots {
		m.roots.AddCert(r)
	}
	if err := m.verify(cert); err != nil {
		return certMode{}, fmt.Errorf("alipay certificate: %w", err)
	}
	return m, nil
}

func (m certMode) verify(cert *x509.Certificate) error {
	_, err := cert.Verify(x509.VerifyOptions{Roots: m.roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		return fmt.Errorf("not issued by the root bundle: %w", err)
	}
	return nil
}

// appCertKey reads an app certificate: its public key and its SN. A PublicKeyPEM given
// too must be the same key.
func (m certMode) appCertKey(certPEM, pubPEM string) (*rsa.PublicKey, string, error) {
	if m.rootSN == "" {
		return nil, "", errors.New("app certificate given, but no AlipayCertPEM and AlipayRootCertPEM")
	}
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil, "", err
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return nil, "", errors.New("app certificate: not an RSA key")
	}
	if pubPEM != "" {
		other, err := parsePublicKey(pubPEM)
		if err != nil || !other.Equal(pub) {
			return nil, "", errors.New("app certificate is not for the app public key")
		}
	}
	if err := m.verify(cert); err != nil {
		return nil, "", fmt.Errorf("app certificate: %w", err)
	}
	sn, err := CertSN(cert)
	return pub, sn, err
}

// checkCertSNs is the certificate-mode check of a request from an app with a
// certificate. The codes are Alipay's: a missing app_cert_sn leaves the app with no key
// to verify against, a wrong one names no certificate of the app, and the root SN must
// be the current bundle's.
func (s *Simulator) checkCertSNs(a *app, form url.Values) fields {
	if a.certSN == "" {
		return nil
	}
	switch sn := form.Get("app_cert_sn"); {
	case sn == "":
		return invalidArgs("isv.missing-signature-config", "验签出错, 未配置对应签名算法的公钥或者证书 (app_cert_sn is required in certificate mode)")
	case sn != a.certSN:
		return invalidArgs("isv.app-cert-not-exist", "应用公钥证书不存在 (app_cert_sn "+sn+")")
	}
	if form.Get("alipay_root_cert_sn") != s.certs.rootSN {
		return invalidArgs("isv.invalid-alipay-root-cert-sn", "无效支付宝根证书序列号")
	}
	return nil
}

// answerCertSN is the alipay_cert_sn an answer to the app carries: empty for an app in
// public-key mode.
func (s *Simulator) answerCertSN(a *app) string {
	if a == nil || a.certSN == "" {
		return ""
	}
	return s.certs.alipayCertSN
}
