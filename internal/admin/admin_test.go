package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paykit/paykit/internal/admin"
)

// newAdmin serves admin.Handler on a probe that counts its calls and takes a while, as
// pinging MySQL, Temporal and Redis does.
func newAdmin(tb testing.TB, ready bool, readyFor time.Duration) (*httptest.Server, *atomic.Int64) {
	tb.Helper()
	var probes atomic.Int64
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "paykit_test_total", Help: "A test counter."}))
	srv := httptest.NewServer(admin.Handler(admin.Options{
		Metrics: reg,
		Probe: func(context.Context) admin.Readiness {
			probes.Add(1)
			time.Sleep(50 * time.Millisecond)
			return admin.Readiness{Ready: ready, Checks: map[string]string{"mysql": "ok"}}
		},
		ReadyFor: readyFor,
	}))
	tb.Cleanup(srv.Close)
	return srv, &probes
}

func get(tb testing.TB, url string) (int, string) {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestReadyzBurstProbesOnce: however many ask at once, and again within ReadyFor, the
// dependencies are pinged once; after ReadyFor, once more.
func TestReadyzBurstProbesOnce(t *testing.T) {
	srv, probes := newAdmin(t, true, time.Minute)
	const n = 50
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(srv.URL + "/readyz")
			if err != nil {
				t.Error(err)
				return
			}
			codes[i] = resp.StatusCode
			resp.Body.Close()
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("request %d: HTTP %d", i, c)
		}
	}
	if code, _ := get(t, srv.URL+"/readyz"); code != http.StatusOK {
		t.Errorf("after the burst: HTTP %d", code)
	}
	if p := probes.Load(); p != 1 {
		t.Fatalf("%d concurrent /readyz and one more made %d probes, want 1", n, p)
	}

	srv, probes = newAdmin(t, true, 100*time.Millisecond)
	get(t, srv.URL+"/readyz")
	time.Sleep(150 * time.Millisecond)
	get(t, srv.URL+"/readyz")
	if p := probes.Load(); p != 2 {
		t.Errorf("a /readyz after ReadyFor: %d probes in all, want 2", p)
	}
}

// TestAdminEndpoints: what each endpoint answers, ready or not.
func TestAdminEndpoints(t *testing.T) {
	tests := []struct {
		name     string
		ready    bool
		path     string
		wantCode int
		check    func(t *testing.T, body string)
	}{
		{name: "healthz", ready: false, path: "/healthz", wantCode: http.StatusOK},
		{name: "ready", ready: true, path: "/readyz", wantCode: http.StatusOK, check: func(t *testing.T, body string) {
			var r admin.Readiness
			if err := json.Unmarshal([]byte(body), &r); err != nil || !r.Ready || r.Checks["mysql"] != "ok" {
				t.Errorf("body %s (%v)", body, err)
			}
		}},
		{name: "not ready", ready: false, path: "/readyz", wantCode: http.StatusServiceUnavailable},
		{name: "metrics", ready: true, path: "/metrics", wantCode: http.StatusOK, check: func(t *testing.T, body string) {
			if !strings.Contains(body, "paykit_test_total 0") {
				t.Errorf("metrics lack the registry's counter:\n%s", body)
			}
		}},
		{name: "pprof", ready: true, path: "/debug/pprof/goroutine?debug=1", wantCode: http.StatusOK, check: func(t *testing.T, body string) {
			if !strings.Contains(body, "goroutine profile:") {
				t.Errorf("not a goroutine profile:\n%.200s", body)
			}
		}},
		{name: "unknown", ready: true, path: "/v1/payments", wantCode: http.StatusNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := newAdmin(t, tc.ready, 0)
			code, body := get(t, srv.URL+tc.path)
			if code != tc.wantCode {
				t.Fatalf("GET %s: HTTP %d %s, want %d", tc.path, code, body, tc.wantCode)
			}
			if tc.check != nil {
				tc.check(t, body)
			}
		})
	}
}
