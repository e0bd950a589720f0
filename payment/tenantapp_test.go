package payment_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/paykit/paykit/payment"
)

// TestAlipayCredentialsNeverPrint: however credentials reach a log line or JSON, the
// keys are not in it; only EncodeForSealing gives them out, and they come back whole.
func TestAlipayCredentialsNeverPrint(t *testing.T) {
	c := payment.AlipayCredentials{AppPrivateKeyPEM: "SECRET-PRIVATE", AlipayPublicKeyPEM: "PUB", AppCertPEM: "CERT"}
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	logger.Info("x", "creds", c, "ptr", &c)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("x", "creds", c)
	js, _ := json.Marshal(map[string]any{"c": c, "p": &c})
	outs := []string{fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c), fmt.Sprintf("%+v", &c), logs.String(), string(js)}
	for _, out := range outs {
		if strings.Contains(out, "SECRET") || strings.Contains(out, "PUB") || strings.Contains(out, "CERT") {
			t.Fatalf("credentials printed: %s", out)
		}
	}
	tn, _ := json.Marshal(payment.Tenant{ID: "t", AlipayCredentialsSealed: "pks1:k1:SEALED"})
	if strings.Contains(string(tn), "SEALED") {
		t.Fatalf("tenant JSON carries the sealed keys: %s", tn)
	}
	b, err := c.EncodeForSealing()
	if err != nil {
		t.Fatal(err)
	}
	back, err := payment.DecodeAlipayCredentials(b)
	if err != nil || back != c {
		t.Fatalf("round trip = %v, %v", back == c, err)
	}
}

func TestAlipayCredentialsValidate(t *testing.T) {
	for name, c := range map[string]struct {
		creds payment.AlipayCredentials
		ok    bool
	}{
		"public-key mode": {payment.AlipayCredentials{AppPrivateKeyPEM: "k", AlipayPublicKeyPEM: "p"}, true},
		"cert mode":       {payment.AlipayCredentials{AppPrivateKeyPEM: "k", AppCertPEM: "a", AlipayCertPEM: "b", RootCertPEM: "c"}, true},
		"no private key":  {payment.AlipayCredentials{AlipayPublicKeyPEM: "p"}, false},
		"no alipay key":   {payment.AlipayCredentials{AppPrivateKeyPEM: "k"}, false},
		"partial certs":   {payment.AlipayCredentials{AppPrivateKeyPEM: "k", AppCertPEM: "a"}, false},
	} {
		if err := c.creds.Validate(); (err == nil) != c.ok {
			t.Errorf("%s: %v", name, err)
		}
	}
}
