package api_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paykit/paykit/api"
)

// getBody GETs url and returns the status and the body.
func getBody(tb testing.TB, url string) (int, string) {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestOperationsAreOnTheAdminListener: the public listener, which faces Alipay and
// merchants, answers liveness only; readiness (which pings MySQL, Temporal and Redis),
// metrics and profiles are on the admin listener.
func TestOperationsAreOnTheAdminListener(t *testing.T) {
	public, admin, _, _ := newServers(t, serverOptions{cache: newFakeCache()})
	tests := []struct {
		path       string
		publicCode int
		adminCode  int
		adminHas   string
	}{
		{"/healthz", http.StatusOK, http.StatusOK, `"status":"ok"`},
		{"/readyz", http.StatusNotFound, http.StatusOK, `"ready":true`},
		{"/metrics", http.StatusNotFound, http.StatusOK, "paykit_checkouts_total"},
		{"/debug/pprof/goroutine?debug=1", http.StatusNotFound, http.StatusOK, "goroutine profile:"},
		{"/debug/pprof/cmdline", http.StatusNotFound, http.StatusOK, ""},
	}
	for _, tc := range tests {
		t.Run(strings.TrimPrefix(tc.path, "/"), func(t *testing.T) {
			if code, body := getBody(t, public.URL+tc.path); code != tc.publicCode {
				t.Errorf("public GET %s: HTTP %d %.200s, want %d", tc.path, code, body, tc.publicCode)
			}
			code, body := getBody(t, admin.URL+tc.path)
			if code != tc.adminCode || !strings.Contains(body, tc.adminHas) {
				t.Errorf("admin GET %s: HTTP %d %.200s, want %d with %q", tc.path, code, body, tc.adminCode, tc.adminHas)
			}
		})
	}
}

// TestReadyzBurstPingsEachDependencyOnce: a burst of /readyz costs one ping of MySQL, of
// Temporal and of Redis, not one per request.
func TestReadyzBurstPingsEachDependencyOnce(t *testing.T) {
	cache := newFakeCache()
	// Reused for a minute here, so that a slow machine's burst is one burst.
	_, admin, st, orch := newServers(t, serverOptions{cfg: api.Config{ReadyFor: time.Minute}, cache: cache})
	const n = 40
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(admin.URL + "/readyz")
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("HTTP %d", resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	st.Mu.Lock()
	orch.mu.Lock()
	cache.mu.Lock()
	defer st.Mu.Unlock()
	defer orch.mu.Unlock()
	defer cache.mu.Unlock()
	t.Logf("%d concurrent /readyz: %d MySQL, %d Temporal, %d Redis pings", n, st.pings, orch.pings, cache.pings)
	if st.pings != 1 || orch.pings != 1 || cache.pings != 1 {
		t.Errorf("pings: MySQL %d, Temporal %d, Redis %d; want 1 each", st.pings, orch.pings, cache.pings)
	}
}

// TestReadyzReportsDependencies: MySQL and Temporal are required, Redis (down or
// disabled) only degrades.
func TestReadyzReportsDependencies(t *testing.T) {
	tests := []struct {
		name       string
		noRedis    bool
		mysqlDown  bool
		redisDown  bool
		wantCode   int
		wantChecks map[string]string
	}{
		{"all up", false, false, false, http.StatusOK, map[string]string{"mysql": "ok", "temporal": "ok", "redis": "ok"}},
		{"redis down", false, false, true, http.StatusOK, map[string]string{"mysql": "ok", "temporal": "ok", "redis": "degraded"}},
		{"redis disabled", true, false, false, http.StatusOK, map[string]string{"mysql": "ok", "temporal": "ok", "redis": "degraded"}},
		{"mysql down", false, true, false, http.StatusServiceUnavailable, map[string]string{"mysql": "down", "temporal": "ok", "redis": "ok"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := serverOptions{}
			if !tc.noRedis {
				cache := newFakeCache()
				if tc.redisDown {
					cache.pingErr = errors.New("connection refused")
				}
				o.cache = cache
			}
			_, admin, st, _ := newServers(t, o)
			st.Down = tc.mysqlDown
			code, body := getBody(t, admin.URL+"/readyz")
			var got struct {
				Ready  bool              `json:"ready"`
				Checks map[string]string `json:"checks"`
			}
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode || got.Ready != (tc.wantCode == http.StatusOK) || len(got.Checks) != len(tc.wantChecks) {
				t.Fatalf("HTTP %d %s", code, body)
			}
			for k, v := range tc.wantChecks {
				if got.Checks[k] != v {
					t.Errorf("%s = %q, want %q", k, got.Checks[k], v)
				}
			}
		})
	}
}

// TestReadyzHidesErrorText: /readyz names the components and their state only; what
// the drivers said goes to the log.
func TestReadyzHidesErrorText(t *testing.T) {
	var logs logBuffer
	cache := newFakeCache()
	_, admin, st, orch := newServers(t, serverOptions{cache: cache, logger: logs.logger()})
	st.Down = true // "dial tcp 127.0.0.1:3306: connection refused"
	orch.pingErr = errors.New("rpc error: code = Unavailable desc = connection error: dial tcp 10.0.0.7:7233: i/o timeout")
	cache.pingErr = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

	code, b := getBody(t, admin.URL+"/readyz")
	t.Logf("HTTP %d %s", code, b)
	var got struct {
		Ready  bool              `json:"ready"`
		Checks map[string]string `json:"checks"`
	}
	if err := json.Unmarshal([]byte(b), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"mysql": "down", "temporal": "down", "redis": "degraded"}
	if code != http.StatusServiceUnavailable || got.Ready || len(got.Checks) != len(want) {
		t.Fatalf("HTTP %d %s", code, b)
	}
	for k, v := range want {
		if got.Checks[k] != v {
			t.Errorf("%s = %q, want %q", k, got.Checks[k], v)
		}
	}
	for _, leak := range []string{"dial", "tcp", "3306", "7233", "6379", "10.0.0.7", "refused", "rpc error"} {
		if strings.Contains(b, leak) {
			t.Errorf("readyz shows %q", leak)
		}
	}
	for _, logged := range []string{"127.0.0.1:3306: connection refused", "10.0.0.7:7233: i/o timeout", "127.0.0.1:6379"} {
		if !strings.Contains(logs.String(), logged) {
			t.Errorf("the log lacks %q:\n%s", logged, logs.String())
		}
	}
}
