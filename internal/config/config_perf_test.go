package config_test

import (
	"github.com/paykit/paykit/internal/config"
	"strings"
	"testing"
	"time"
)

func TestLoadConfig_Inbox(t *testing.T) {
	tests := []struct {
		name                    string
		env                     map[string]string
		bound, sweep, retention time.Duration
	}{
		{"defaults: 30s, 5s, 30 days", nil, 30 * time.Second, 5 * time.Second, 30 * 24 * time.Hour},
		{"overridden", map[string]string{"PAYKIT_INBOX_SETTLE_BOUND": "1m", "PAYKIT_INBOX_SWEEP_INTERVAL": "2s",
			"PAYKIT_NOTIFICATION_RETENTION": "72h"},
			time.Minute, 2 * time.Second, 72 * time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Load(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if err != nil || c.InboxSettleBound != tc.bound || c.InboxSweepInterval != tc.sweep || c.NotificationRetention != tc.retention {
				t.Fatalf("bound %v sweep %v retention %v (%v); want %v %v %v", c.InboxSettleBound, c.InboxSweepInterval,
					c.NotificationRetention, err, tc.bound, tc.sweep, tc.retention)
			}
		})
	}
	for k, v := range map[string]string{
		"PAYKIT_INBOX_SETTLE_BOUND":     "soon",
		"PAYKIT_NOTIFICATION_RETENTION": "24h", // shorter than Alipay's 25 h of redeliveries
	} {
		_, err := config.Load(func(key string) (string, bool) { return v, key == k })
		if err == nil || !strings.Contains(err.Error(), k) {
			t.Fatalf("%s=%s: %v; want an error naming it", k, v, err)
		}
	}
}

// Delivered events are kept 90 days unless told otherwise, and never less than a week:
// the audit and the events feed read them.
func TestLoadConfig_EventRetention(t *testing.T) {
	c, err := config.Load(func(string) (string, bool) { return "", false })
	if err != nil || c.EventRetention != 90*24*time.Hour {
		t.Fatalf("default event retention %v, %v; want 90 days", c.EventRetention, err)
	}
	env := func(v string) func(string) (string, bool) {
		return func(k string) (string, bool) { return v, k == "PAYKIT_EVENT_RETENTION" }
	}
	if c, err := config.Load(env("4000h")); err != nil || c.EventRetention != 4000*time.Hour {
		t.Fatalf("PAYKIT_EVENT_RETENTION=4000h: %v, %v", c.EventRetention, err)
	}
	if _, err := config.Load(env("72h")); err == nil || !strings.Contains(err.Error(), "PAYKIT_EVENT_RETENTION") {
		t.Fatalf("PAYKIT_EVENT_RETENTION=72h: %v; want an error naming it", err)
	}
}

// Resolved anomalies are kept 400 days after their resolution unless told otherwise, and
// never less than 30.
func TestLoadConfig_AnomalyRetention(t *testing.T) {
	c, err := config.Load(func(string) (string, bool) { return "", false })
	if err != nil || c.AnomalyRetention != 400*24*time.Hour {
		t.Fatalf("default anomaly retention %v, %v; want 400 days", c.AnomalyRetention, err)
	}
	_, err = config.Load(func(k string) (string, bool) { return "240h", k == "PAYKIT_ANOMALY_RETENTION" })
	if err == nil || !strings.Contains(err.Error(), "PAYKIT_ANOMALY_RETENTION") {
		t.Fatalf("PAYKIT_ANOMALY_RETENTION=240h: %v; want an error naming it", err)
	}
}

// The API's operational endpoints listen on a loopback address of their own by default,
// never on the public listener's.
func TestLoadConfig_APIAdminAddr(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    string
		wantErr bool
	}{
		{"default", nil, "127.0.0.1:8084", false},
		{"set", map[string]string{"PAYKIT_API_ADMIN_ADDR": "10.0.0.5:9100"}, "10.0.0.5:9100", false},
		{"the public address", map[string]string{"PAYKIT_HTTP_ADDR": "0.0.0.0:8080", "PAYKIT_API_ADMIN_ADDR": "0.0.0.0:8080"}, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Load(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "PAYKIT_API_ADMIN_ADDR") {
					t.Fatalf("%v; want an error naming PAYKIT_API_ADMIN_ADDR", err)
				}
				return
			}
			if err != nil || c.APIAdminAddr != tc.want || c.APIAdminAddr == c.HTTPAddr {
				t.Fatalf("admin %q http %q (%v); want admin %q", c.APIAdminAddr, c.HTTPAddr, err, tc.want)
			}
		})
	}
}

// Sticky execution is off unless PAYKIT_WORKFLOW_CACHE_SIZE says how many executions to
// keep; a negative size is refused.
func TestLoadConfig_WorkflowCacheSize(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want int
		ok   bool
	}{{"", 0, true}, {"0", 0, true}, {"5000", 5000, true}, {"-1", 0, false}, {"lots", 0, false}} {
		c, err := config.Load(func(k string) (string, bool) { return tc.v, k == "PAYKIT_WORKFLOW_CACHE_SIZE" })
		if (err == nil) != tc.ok || (tc.ok && c.WorkflowCacheSize != tc.want) {
			t.Fatalf("PAYKIT_WORKFLOW_CACHE_SIZE=%q: %d, %v; want %d, ok=%v", tc.v, c.WorkflowCacheSize, err, tc.want, tc.ok)
		}
	}
}

// New payment runs record one version marker unless PAYKIT_PAYMENT_VERSION_MARKERS=each
// asks for each change's own (a rollout beside workers built before payment-changes-1);
// any other value is refused.
func TestLoadConfig_PaymentVersionMarkers(t *testing.T) {
	for _, tc := range []struct {
		v        string
		each, ok bool
	}{{"", false, true}, {"one", false, true}, {"each", true, true}, {"Each", false, false}, {"all", false, false}} {
		c, err := config.Load(func(k string) (string, bool) { return tc.v, k == "PAYKIT_PAYMENT_VERSION_MARKERS" })
		if (err == nil) != tc.ok || (tc.ok && c.EachPaymentChange != tc.each) {
			t.Fatalf("PAYKIT_PAYMENT_VERSION_MARKERS=%q: each=%v, %v; want each=%v, ok=%v", tc.v, c.EachPaymentChange, err, tc.each, tc.ok)
		}
	}
}

// The limit on Alipay calls per app is on by default (100 a second, bursts of 50, a 1 s
// hold) and 0 turns it off.
func TestLoadConfig_AlipayCallLimit(t *testing.T) {
	c, err := config.Load(func(string) (string, bool) { return "", false })
	if err != nil || c.AlipayCallRate != 100 || c.AlipayCallBurst != 50 || c.AlipayCallHold != time.Second {
		t.Fatalf("defaults %v/%v/%v, %v", c.AlipayCallRate, c.AlipayCallBurst, c.AlipayCallHold, err)
	}
	c, err = config.Load(func(k string) (string, bool) { return "0", k == "PAYKIT_ALIPAY_CALL_RATE" })
	if err != nil || c.AlipayCallRate != 0 {
		t.Fatalf("PAYKIT_ALIPAY_CALL_RATE=0: %v, %v", c.AlipayCallRate, err)
	}
	if _, err := config.Load(func(k string) (string, bool) { return "fast", k == "PAYKIT_ALIPAY_CALL_RATE" }); err == nil {
		t.Fatal("PAYKIT_ALIPAY_CALL_RATE=fast accepted")
	}
}
