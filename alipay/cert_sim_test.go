package alipay_test

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paykit/paykit/alipay"
	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/payment"
)

func testCerts(t *testing.T, keys alipaysim.KeySet) alipaysim.CertSet {
	t.Helper()
	cs, err := alipaysim.GenerateCerts(keys)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// withCerts puts both the simulator and the adapter in certificate mode.
func withCerts(cs alipaysim.CertSet) envOption {
	return func(sim *alipaysim.Config, gw *alipay.Config) {
		sim.AppPublicKeyPEM = ""
		sim.AppCertPEM, sim.AlipayCertPEM, sim.AlipayRootCertPEM = cs.AppCertPEM, cs.AlipayCertPEM, cs.AlipayRootCertPEM
		gw.AlipayPublicKeyPEM = ""
		gw.AppCertPEM, gw.AlipayCertPEM, gw.AlipayRootCertPEM = cs.AppCertPEM, cs.AlipayCertPEM, cs.AlipayRootCertPEM
	}
}

func TestCertModeOverHTTP(t *testing.T) {
	t.Parallel()
	cs := testCerts(t, testKeys(t))
	e := newEnv(t, withCerts(cs))
	ctx := context.Background()
	req := tradeReq("P_cert_1", 1234)
	if _, err := e.gw.Precreate(ctx, req); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sim.Pay("", req.PaymentNo, ""); err != nil {
		t.Fatal(err)
	}
	tr, err := e.gw.Query(ctx, req.PaymentNo)
	if err != nil || tr.State != payment.TradePaid || tr.Amount != 1234 {
		t.Fatalf("query = %+v, %v", tr, err)
	}
	note, err := e.gw.DecodeForm(ctx, e.sink.next(t, 5*time.Second).form)
	if err != nil || note.State != payment.TradePaid || note.PaymentNo != req.PaymentNo {
		t.Fatalf("notification = %+v, %v", note, err)
	}
	res, err := e.gw.Refund(ctx, payment.RefundRequest{PaymentNo: req.PaymentNo, OutRequestNo: "R1", Amount: 234})
	if err != nil || !res.FundChange || res.RefundedTotal != 234 {
		t.Fatalf("refund = %+v, %v", res, err)
	}
	other := tradeReq("P_cert_2", 100)
	if _, err := e.gw.Precreate(ctx, other); err != nil {
		t.Fatal(err)
	}
	if out, err := e.gw.Close(ctx, other.PaymentNo); err != nil || out != payment.CloseDone {
		t.Fatalf("close = %v, %v", out, err)
	}
}

var certSNField = regexp.MustCompile(`"alipay_cert_sn":"[0-9a-f]+"`)

// TestCertModeForgedCertSN: an answer or notification that names another Alipay
// certificate is a signature error, and the adapter never asks the gateway for that
// certificate (production=false): each call is exactly one request.
func TestCertModeForgedCertSN(t *testing.T) {
	t.Parallel()
	keys := testKeys(t)
	cs := testCerts(t, keys)
	e := newEnv(t, withCerts(cs))
	ctx := context.Background()
	no := "P_cert_forged"
	if _, err := e.gw.Precreate(ctx, tradeReq(no, 990)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sim.Pay("", no, ""); err != nil {
		t.Fatal(err)
	}
	otherCerts := testCerts(t, keys) // same keys, another root: other SNs
	tests := []struct {
		name    string
		rewrite func([]byte) []byte
		aliCert string
	}{
		{"alipay_cert_sn replaced", func(b []byte) []byte {
			return certSNField.ReplaceAll(b, []byte(`"alipay_cert_sn":"00112233445566778899aabbccddeeff"`))
		}, cs.AlipayCertPEM},
		{"untampered answer, another Alipay certificate loaded", func(b []byte) []byte { return b }, otherCerts.AlipayCertPEM},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			gw, err := alipay.New(alipay.Config{
				AppID: testAppID, SellerID: testSellerID, AppPrivateKeyPEM: keys.AppPrivateKeyPEM,
				AppCertPEM: cs.AppCertPEM, AlipayCertPEM: tc.aliCert, AlipayRootCertPEM: cs.AlipayRootCertPEM,
				GatewayURL: tamperProxy(t, e.srv.URL, func(b []byte) []byte {
					calls.Add(1)
					return tc.rewrite(b)
				}), NotifyURL: e.sink.URL(),
			})
			if err != nil {
				t.Fatal(err)
			}
			tr, err := gw.Query(ctx, no)
			if payment.ErrorCode(err) != payment.EBADSIGNATURE || tr.State == payment.TradePaid {
				t.Fatalf("query = %+v, %v (code %s); want bad_signature", tr, err, payment.ErrorCode(err))
			}
			if n := calls.Load(); n != 1 {
				t.Fatalf("%d requests reached the gateway; want 1 (no certificate download)", n)
			}
		})
	}
	// A notification naming an unknown certificate is refused too.
	form := e.sink.next(t, 5*time.Second).form
	if _, err := e.gw.DecodeForm(ctx, form); err != nil {
		t.Fatalf("the genuine notification: %v", err)
	}
	form.Set("alipay_cert_sn", "00112233445566778899aabbccddeeff")
	if _, err := e.gw.DecodeForm(ctx, form); payment.ErrorCode(err) != payment.EBADSIGNATURE {
		t.Fatalf("notification with a forged alipay_cert_sn: %v", err)
	}
}

func TestCertModeConfig(t *testing.T) {
	t.Parallel()
	keys := testKeys(t)
	cs := testCerts(t, keys)
	ecdsaOnly := strings.SplitAfter(cs.AlipayRootCertPEM, "-----END CERTIFICATE-----\n")[0]
	base := alipay.Config{AppID: testAppID, SellerID: testSellerID, AppPrivateKeyPEM: keys.AppPrivateKeyPEM,
		GatewayURL: "http://127.0.0.1:1/gateway.do", NotifyURL: "http://127.0.0.1:2/notify",
		AppCertPEM: cs.AppCertPEM, AlipayCertPEM: cs.AlipayCertPEM, AlipayRootCertPEM: cs.AlipayRootCertPEM}
	if _, err := alipay.New(base); err != nil {
		t.Fatalf("valid certificate config: %v", err)
	}
	tests := []struct {
		name, want string
		mod        func(*alipay.Config)
	}{
		{"app certificate missing", "all three", func(c *alipay.Config) { c.AppCertPEM = "" }},
		{"root missing", "all three", func(c *alipay.Config) { c.AlipayRootCertPEM = "" }},
		{"public key and certificates", "not both", func(c *alipay.Config) { c.AlipayPublicKeyPEM = keys.AlipayPublicKeyPEM }},
		{"root bundle without an RSA-signed root", "RSA-signed", func(c *alipay.Config) { c.AlipayRootCertPEM = ecdsaOnly }},
		{"garbage certificate", "app certificate", func(c *alipay.Config) {
			c.AppCertPEM = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
		}},
		{"two certificates for the Alipay one", "want one", func(c *alipay.Config) { c.AlipayCertPEM = cs.AlipayCertPEM + cs.AppCertPEM }},
		{"a key where a certificate belongs", "CERTIFICATE", func(c *alipay.Config) { c.AlipayCertPEM = keys.AlipayPublicKeyPEM }},
	}
	for _, tc := range tests {
		cfg := base
		tc.mod(&cfg)
		_, err := alipay.New(cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v; want one mentioning %q", tc.name, err, tc.want)
		}
	}
	if !bytes.Contains([]byte(ecdsaOnly), []byte("BEGIN CERTIFICATE")) {
		t.Fatal("test setup: no ECDSA root")
	}
}
