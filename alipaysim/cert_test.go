package alipaysim_test

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/alipaysim/simtest"
	"github.com/smartwalle/alipay/v3"
)

// certWithIssuer builds a certificate whose issuer is exactly the given RDN sequence,
// in that ASN.1 order, with the given serial.
func certWithIssuer(t *testing.T, issuer pkix.RDNSequence, serial int64) *x509.Certificate {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := asn1.Marshal(issuer)
	if err != nil {
		t.Fatal(err)
	}
	parent := &x509.Certificate{RawSubject: raw, SerialNumber: big.NewInt(1)}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "leaf"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func atv(oid []int, v string) []pkix.AttributeTypeAndValue {
	return []pkix.AttributeTypeAndValue{{Type: asn1.ObjectIdentifier(oid), Value: v}}
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestCertSNFromProtocol checks the SN against an MD5 computed here over the DN written
// by hand: RDNs in reverse ASN.1 order, comma-joined, then the decimal serial.
func TestCertSNFromProtocol(t *testing.T) {
	t.Parallel()
	c, o, ou, cn := []int{2, 5, 4, 6}, []int{2, 5, 4, 10}, []int{2, 5, 4, 11}, []int{2, 5, 4, 3}
	tests := []struct {
		name   string
		issuer pkix.RDNSequence
		serial int64
		dn     string
	}{
		{"Alipay's order", pkix.RDNSequence{atv(c, "CN"), atv(o, "Ant Financial"), atv(ou, "Certification Authority"),
			atv(cn, "Ant Financial Certification Authority Class 2 R1")}, 4100000000000012345,
			"CN=Ant Financial Certification Authority Class 2 R1,OU=Certification Authority,O=Ant Financial,C=CN"},
		{"the sequence's order, not a canonical one", pkix.RDNSequence{atv(cn, "Root"), atv(c, "CN")}, 7,
			"C=CN,CN=Root"},
		{"special characters are escaped", pkix.RDNSequence{atv(c, "CN"), atv(o, "A, B+C")}, 42,
			`O=A\, B\+C,C=CN`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cert := certWithIssuer(t, tc.issuer, tc.serial)
			got, err := alipaysim.CertSN(cert)
			if err != nil {
				t.Fatal(err)
			}
			want := md5Hex(tc.dn + big.NewInt(tc.serial).String())
			if got != want {
				t.Fatalf("CertSN = %s; want md5(%q + serial) = %s", got, tc.dn, want)
			}
		})
	}
}

func devCerts(t *testing.T) alipaysim.CertSet {
	t.Helper()
	cs, err := alipaysim.GenerateCerts(testKeys(t))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func pemCerts(t *testing.T, s string) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	rest := []byte(s)
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return out
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
}

func TestRootCertSNJoinsTheRSASignedRoots(t *testing.T) {
	t.Parallel()
	one, two := devCerts(t), devCerts(t)
	sn := func(c *x509.Certificate) string {
		s, err := alipaysim.CertSN(c)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var rsaRoots []string
	for _, c := range pemCerts(t, one.AlipayRootCertPEM+two.AlipayRootCertPEM) {
		if c.SignatureAlgorithm == x509.SHA256WithRSA {
			rsaRoots = append(rsaRoots, sn(c))
		}
	}
	if len(rsaRoots) != 2 || len(pemCerts(t, one.AlipayRootCertPEM)) != 2 {
		t.Fatalf("want an RSA and an ECDSA root in each bundle")
	}
	got, err := alipaysim.RootCertSN(one.AlipayRootCertPEM + two.AlipayRootCertPEM)
	if err != nil {
		t.Fatal(err)
	}
	if want := rsaRoots[0] + "_" + rsaRoots[1]; got != want {
		t.Fatalf("RootCertSN = %s; want %s (the ECDSA roots left out)", got, want)
	}
	var ecdsaOnly string
	for _, b := range strings.SplitAfter(one.AlipayRootCertPEM, "-----END CERTIFICATE-----\n") {
		if cs := pemCerts(t, b); len(cs) == 1 && cs[0].SignatureAlgorithm == x509.ECDSAWithSHA256 {
			ecdsaOnly = b
		}
	}
	if _, err := alipaysim.RootCertSN(ecdsaOnly); ecdsaOnly == "" || err == nil {
		t.Fatal("a bundle without RSA-signed certificates must be refused")
	}
}

// certClient is smartwalle's client in certificate mode, loaded with its own loaders.
func certClient(t *testing.T, base string, cs alipaysim.CertSet) *alipay.Client {
	t.Helper()
	c := newClientNoKey(t, base)
	if err := c.LoadAppCertPublicKey(cs.AppCertPEM); err != nil {
		t.Fatal(err)
	}
	if err := c.LoadAliPayRootCert(cs.AlipayRootCertPEM); err != nil {
		t.Fatal(err)
	}
	if err := c.LoadAlipayCertPublicKey(cs.AlipayCertPEM); err != nil {
		t.Fatal(err)
	}
	return c
}

func newClientNoKey(t *testing.T, base string) *alipay.Client {
	t.Helper()
	c, err := alipay.New(appID, testKeys(t).AppPrivateKeyPEM, false,
		alipay.WithSandboxGateway(base+alipaysim.GatewayPath),
		alipay.WithTimeLocation(time.FixedZone("CST", 8*3600)),
		alipay.WithHTTPClient(&http.Client{Timeout: 5 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCertSNsMatchSmartwalle: the client library computes the same SNs from the same files.
func TestCertSNsMatchSmartwalle(t *testing.T) {
	t.Parallel()
	cs := devCerts(t)
	c := certClient(t, "http://127.0.0.1:1", cs)
	v, err := c.URLValues(alipay.TradeQuery{OutTradeNo: "X"})
	if err != nil {
		t.Fatal(err)
	}
	appSN, err := alipaysim.CertSN(pemCerts(t, cs.AppCertPEM)[0])
	if err != nil {
		t.Fatal(err)
	}
	rootSN, err := alipaysim.RootCertSN(cs.AlipayRootCertPEM)
	if err != nil {
		t.Fatal(err)
	}
	if v.Get("app_cert_sn") != appSN || v.Get("alipay_root_cert_sn") != rootSN {
		t.Fatalf("smartwalle sends app_cert_sn %s, alipay_root_cert_sn %s; the simulator computes %s, %s",
			v.Get("app_cert_sn"), v.Get("alipay_root_cert_sn"), appSN, rootSN)
	}
}

func startCertSim(t *testing.T, cs alipaysim.CertSet) (*alipaysim.Simulator, string) {
	t.Helper()
	sim, srv := simtest.Start(t, func(cfg *alipaysim.Config) {
		cfg.TimeScale = 36000
		cfg.AppPublicKeyPEM = ""
		cfg.AppCertPEM, cfg.AlipayCertPEM, cfg.AlipayRootCertPEM = cs.AppCertPEM, cs.AlipayCertPEM, cs.AlipayRootCertPEM
	})
	return sim, srv.URL
}

// TestCertModeWithSmartwalle runs a precreate, payment, notification and query in
// certificate mode, with smartwalle verifying each answer and the notification.
func TestCertModeWithSmartwalle(t *testing.T) {
	t.Parallel()
	cs := devCerts(t)
	sim, base := startCertSim(t, cs)
	c := certClient(t, base, cs)
	snk := newSink(t, nil)
	ctx := context.Background()
	pre, err := c.TradePreCreate(ctx, alipay.TradePreCreate{Trade: alipay.Trade{
		NotifyURL: snk.url(), Subject: "cert", OutTradeNo: "S_cert", TotalAmount: "8.88"}})
	if err != nil || !pre.IsSuccess() {
		t.Fatalf("precreate: %+v, %v", pre, err)
	}
	if _, err := sim.Pay("", "S_cert", ""); err != nil {
		t.Fatal(err)
	}
	d := snk.next(t, 5*time.Second)
	if err := c.VerifySign(ctx, d.form); err != nil {
		t.Fatalf("notification does not verify with the Alipay certificate: %v", err)
	}
	q, err := c.TradeQuery(ctx, alipay.TradeQuery{OutTradeNo: "S_cert"})
	if err != nil || q.TradeStatus != alipay.TradeStatusSuccess {
		t.Fatalf("query: %+v, %v", q, err)
	}
	// A public-key-mode client of the same app is refused: the app has a certificate.
	pk := newClient(t, base, testKeys(t).AppPrivateKeyPEM, testKeys(t).AlipayPublicKeyPEM)
	q, err = pk.TradeQuery(ctx, alipay.TradeQuery{OutTradeNo: "S_cert"})
	if err != nil || q.SubCode != "isv.missing-signature-config" {
		t.Fatalf("public-key-mode request to a certificate-mode app: %+v, %v", q, err)
	}
}

// certAnswer posts a form and splits the answer, which must carry alipay_cert_sn between
// the object and sign and be signed over the object's bytes.
func certAnswer(t *testing.T, base string, form url.Values) (fields map[string]string, certSN string) {
	t.Helper()
	resp, err := http.PostForm(base+alipaysim.GatewayPath, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	var sig string
	_ = json.Unmarshal(top["sign"], &sig)
	_ = json.Unmarshal(top["alipay_cert_sn"], &certSN)
	for k, v := range top {
		if k != "sign" && k != "alipay_cert_sn" {
			if err := verify(parsePub(t, testKeys(t).AlipayPublicKeyPEM), v, sig); err != nil {
				t.Fatalf("answer signature: %v\n%s", err, body)
			}
			_ = json.Unmarshal(v, &fields)
		}
	}
	if certSN != "" && !strings.Contains(string(body), `},"alipay_cert_sn":"`+certSN+`","sign":`) {
		t.Fatalf("alipay_cert_sn must sit between the object and sign: %s", body)
	}
	return fields, certSN
}

func TestCertModeChecksTheSNs(t *testing.T) {
	t.Parallel()
	cs := devCerts(t)
	_, base := startCertSim(t, cs)
	appSN, _ := alipaysim.CertSN(pemCerts(t, cs.AppCertPEM)[0])
	rootSN, _ := alipaysim.RootCertSN(cs.AlipayRootCertPEM)
	aliSN, _ := alipaysim.CertSN(pemCerts(t, cs.AlipayCertPEM)[0])
	other := devCerts(t) // the same keys under another root: other SNs
	otherAppSN, _ := alipaysim.CertSN(pemCerts(t, other.AppCertPEM)[0])
	otherRootSN, _ := alipaysim.RootCertSN(other.AlipayRootCertPEM)
	key := parsePriv(t, testKeys(t).AppPrivateKeyPEM)
	tests := []struct {
		name, appSN, rootSN, sub string
	}{
		{"both right", appSN, rootSN, ""},
		{"app_cert_sn missing", "", rootSN, "isv.missing-signature-config"},
		{"app_cert_sn of another certificate", otherAppSN, rootSN, "isv.app-cert-not-exist"},
		{"alipay_root_cert_sn missing", appSN, "", "isv.invalid-alipay-root-cert-sn"},
		{"alipay_root_cert_sn of another root", appSN, otherRootSN, "isv.invalid-alipay-root-cert-sn"},
		{"alipay_root_cert_sn with an extra part", appSN, rootSN + "_" + otherRootSN, "isv.invalid-alipay-root-cert-sn"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := signedForm(t, key, "alipay.trade.query", map[string]string{"out_trade_no": "S_none"})
			if tc.appSN != "" {
				f.Set("app_cert_sn", tc.appSN)
			}
			if tc.rootSN != "" {
				f.Set("alipay_root_cert_sn", tc.rootSN)
			}
			f.Del("sign")
			f.Set("sign", sign(t, key, canonical(f, "sign")))
			got, sn := certAnswer(t, base, f)
			if tc.sub == "" {
				if got["sub_code"] != "ACQ.TRADE_NOT_EXIST" || sn != aliSN {
					t.Fatalf("answer %v, alipay_cert_sn %q; want ACQ.TRADE_NOT_EXIST with %s", got, sn, aliSN)
				}
				return
			}
			if got["code"] != "40002" || got["sub_code"] != tc.sub {
				t.Fatalf("answer %v; want 40002 %s", got, tc.sub)
			}
		})
	}
}

func TestCertModeConfigErrors(t *testing.T) {
	t.Parallel()
	keys := testKeys(t)
	cs := devCerts(t)
	other, err := alipaysim.GenerateKeys(1024)
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := alipaysim.GenerateCerts(other)
	if err != nil {
		t.Fatal(err)
	}
	base := alipaysim.Config{AppCertPEM: cs.AppCertPEM, AlipayCertPEM: cs.AlipayCertPEM,
		AlipayRootCertPEM: cs.AlipayRootCertPEM, AlipayPrivateKeyPEM: keys.AlipayPrivateKeyPEM}
	tests := []struct {
		name string
		mod  func(*alipaysim.Config)
	}{
		{"no root", func(c *alipaysim.Config) { c.AlipayRootCertPEM = "" }},
		{"no Alipay certificate", func(c *alipaysim.Config) { c.AlipayCertPEM = "" }},
		{"Alipay certificate for another key", func(c *alipaysim.Config) { c.AlipayCertPEM = wrong.AlipayCertPEM }},
		{"app certificate from another root", func(c *alipaysim.Config) { c.AppCertPEM = wrong.AppCertPEM }},
		{"app certificate and public key disagree", func(c *alipaysim.Config) { c.AppPublicKeyPEM = other.AppPublicKeyPEM }},
	}
	for _, tc := range tests {
		cfg := base
		tc.mod(&cfg)
		if s, err := alipaysim.New(cfg); err == nil {
			s.Close()
			t.Errorf("%s: New accepted it", tc.name)
		}
	}
	s, err := alipaysim.New(base)
	if err != nil {
		t.Fatalf("valid certificate config: %v", err)
	}
	s.Close()
}
