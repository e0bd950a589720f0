package activities

import (
	"net/netip"
	"testing"
)

func TestWebhookPolicyCheckURL(t *testing.T) {
	strict := WebhookPolicy{RequireHTTPS: true, RefusePrivate: true}
	for _, tc := range []struct {
		url string
		p   WebhookPolicy
		ok  bool
	}{
		{"https://shop.example/hooks", strict, true},
		{"https://203.0.114.7/hooks", strict, true},
		{"http://shop.example/hooks", strict, false},
		{"http://shop.example/hooks", WebhookPolicy{RefusePrivate: true}, true},
		{"https://127.0.0.1:6379/", strict, false},
		{"https://[::1]/", strict, false},
		{"https://10.0.0.5/", strict, false},
		{"https://169.254.169.254/latest/meta-data", strict, false},
		{"https://100.64.0.1/", strict, false},
		{"https://[::ffff:127.0.0.1]/", strict, false},
		{"https://[::7f00:1]/", strict, false},
		{"https://[2002:a00:1::1]/", strict, false},
		{"https://[fec0::1]/", strict, false},
		{"https://[64:ff9b:1::a00:1]/", strict, false},
		{"https://user:pw@shop.example/", strict, false},
		{"ftp://shop.example/", WebhookPolicy{}, false},
		{"/relative", WebhookPolicy{}, false},
		{"http://127.0.0.1:8081/webhooks", WebhookPolicy{}, true},
	} {
		err := tc.p.CheckURL(tc.url)
		if (err == nil) != tc.ok {
			t.Errorf("CheckURL(%q) with %+v = %v, want ok=%v", tc.url, tc.p, err, tc.ok)
		}
	}
	for _, ip := range []string{"8.8.8.8", "2606:4700::1111"} {
		if !publicUnicast(netip.MustParseAddr(ip)) {
			t.Errorf("%s is public", ip)
		}
	}
}
