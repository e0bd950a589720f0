package system

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/internal/config"
)

func TestAuditSchedule_Config(t *testing.T) {
	load := func(vars map[string]string) (config.Config, error) {
		return config.Load(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	}
	cfg, err := load(nil)
	if err != nil || cfg.AuditEvery != 24*time.Hour {
		t.Fatalf("default PAYKIT_AUDIT_EVERY: %s, %v; want 24h", cfg.AuditEvery, err)
	}
	// The window ends the payment TTL (15 min) plus the webhook SLA (1 h) back: a payment
	// created at its end and paid just before it expires is past its webhook SLA.
	if wc := WorkerConfig(cfg, nil); wc.AuditEvery != 24*time.Hour || wc.AuditLag != time.Hour+15*time.Minute {
		t.Fatalf("worker config: every %s, lag %s; want 24h and 1h15m", wc.AuditEvery, wc.AuditLag)
	}
	cfg, err = load(map[string]string{"PAYKIT_AUDIT_EVERY": "12h", "PAYKIT_PAYMENT_TTL": "2h"})
	if err != nil || cfg.AuditEvery != 12*time.Hour {
		t.Fatalf("PAYKIT_AUDIT_EVERY=12h: %s, %v", cfg.AuditEvery, err)
	}
	if wc := WorkerConfig(cfg, nil); wc.AuditLag != 3*time.Hour {
		t.Fatalf("lag with a 2h payment TTL: %s, want 3h (expiry plus the webhook SLA)", wc.AuditLag)
	}
	if _, err := load(map[string]string{"PAYKIT_AUDIT_EVERY": "daily"}); err == nil || !strings.Contains(err.Error(), "PAYKIT_AUDIT_EVERY") {
		t.Fatalf("PAYKIT_AUDIT_EVERY=daily: %v, want a configuration error naming it", err)
	}
}

// The worker schedules a daily reconciliation for each app it is given, at
// PAYKIT_STATEMENT_AT, with the statement's retry settings.
func TestWorkerConfig_Statements(t *testing.T) {
	cfg, err := config.Load(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	wc := WorkerConfig(cfg, []string{"2021default", "2021tenant"})
	if st := wc.Statements; !slices.Equal(st.Apps, []string{"2021default", "2021tenant"}) || st.At != cfg.Statement.At ||
		st.RetryEvery != cfg.Statement.RetryEvery || st.GiveUpAfter != cfg.Statement.GiveUpAfter {
		t.Fatalf("statements %+v, want both apps on the configured schedule %+v", st, cfg.Statement)
	}
	if wc.TaskQueue != cfg.TaskQueue || wc.TaskQueue == "" {
		t.Fatalf("task queue %q, want %q", wc.TaskQueue, cfg.TaskQueue)
	}
}

// PAYKIT_PAYMENT_VERSION_MARKERS reaches the worker: off by default, on with each.
func TestWorkerConfig_PaymentVersionMarkers(t *testing.T) {
	for v, want := range map[string]bool{"": false, "one": false, "each": true} {
		cfg, err := config.Load(func(k string) (string, bool) { return v, k == "PAYKIT_PAYMENT_VERSION_MARKERS" })
		if err != nil {
			t.Fatal(err)
		}
		if got := WorkerConfig(cfg, nil).EachPaymentChange; got != want {
			t.Fatalf("PAYKIT_PAYMENT_VERSION_MARKERS=%q: worker's EachPaymentChange %v, want %v", v, got, want)
		}
	}
}

// The API gives the payments it creates a first query by the scheduled reconciler, on the
// configured interval, unless workers record each change's own marker (then no run is on
// the version that leaves its queries to the reconciler, and its own timer queries); the
// worker's reconciler follows the same interval.
func TestQueryIntervalFollowsThePaymentVersion(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 45 * time.Second, "one": 45 * time.Second, "each": 0} {
		env := map[string]string{"PAYKIT_PAYMENT_VERSION_MARKERS": v, "PAYKIT_RECONCILE_INTERVAL": "45s"}
		cfg, err := config.Load(func(k string) (string, bool) { s, ok := env[k]; return s, ok && s != "" })
		if err != nil {
			t.Fatal(err)
		}
		if got := apiConfig(cfg).QueryInterval; got != want {
			t.Fatalf("PAYKIT_PAYMENT_VERSION_MARKERS=%q: the API's query interval %v, want %v", v, got, want)
		}
		if wc := WorkerConfig(cfg, nil); wc.ReconcileInterval != 45*time.Second || wc.ReconcilerEvery != 11250*time.Millisecond {
			t.Fatalf("worker's reconciler: interval %v every %v, want 45s and a quarter of it", wc.ReconcileInterval, wc.ReconcilerEvery)
		}
	}
}
