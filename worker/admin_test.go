package worker_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paykit/paykit/worker"
)

// TestAdminReadyzHidesErrorText: /readyz says whether the worker is ready, never what a
// driver said (addresses, error text); that is for the log.
func TestAdminReadyzHidesErrorText(t *testing.T) {
	ready := func(context.Context) error { return errors.New("dial tcp 10.0.0.7:3306: connect: connection refused") }
	var logs lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	srv := httptest.NewServer(worker.AdminHandler(prometheus.NewRegistry(), ready, logger))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	t.Logf("HTTP %d %s", resp.StatusCode, b)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), `"ready":false`) {
		t.Fatalf("HTTP %d %s", resp.StatusCode, b)
	}
	for _, leak := range []string{"dial", "10.0.0.7", "3306", "refused"} {
		if strings.Contains(string(b), leak) {
			t.Errorf("readyz shows %q", leak)
		}
	}
	if !strings.Contains(logs.String(), "10.0.0.7:3306: connect: connection refused") {
		t.Errorf("the log lacks the error:\n%s", logs.String())
	}
}

// lockedBuffer is a log destination the server's goroutines and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
