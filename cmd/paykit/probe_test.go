package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestProbe(t *testing.T) {
	ready := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" || !ready {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	if err := runProbe(ctx, srv.URL+"/readyz", time.Second); err != nil {
		t.Fatalf("ready: %v", err)
	}
	ready = false
	if err := runProbe(ctx, srv.URL+"/readyz", time.Second); err == nil {
		t.Fatal("a 503 passed")
	}
	srv.Close()
	if err := runProbe(ctx, srv.URL+"/readyz", time.Second); err == nil {
		t.Fatal("a closed port passed")
	}
}
