package redis_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/paykit/paykit/redis"
)

func TestMain(m *testing.M) {
	// The Redis-down tests make go-redis log every failed dial; keep test output readable.
	goredis.SetLogger(redis.SlogLogger{Logger: slog.New(slog.DiscardHandler)})
	os.Exit(m.Run())
}

func TestSlogLogger(t *testing.T) {
	var buf bytes.Buffer
	l := redis.SlogLogger{Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	l.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts: %s", 1, "connection refused")
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("not one JSON record: %q (%v)", buf.String(), err)
	}
	if rec["level"] != "DEBUG" || rec["component"] != "go-redis" ||
		rec["msg"] != "redis: connection pool: failed to dial after 1 attempts: connection refused" {
		t.Fatalf("record %v", rec)
	}
}
