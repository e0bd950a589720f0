package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/paykit/paykit/internal/config"
)

// TestHelpIsNotAnError: `paykit tenant -h` and `paykit anomalies -h` print their usage
// and exit 0, without an ERROR log line.
func TestHelpIsNotAnError(t *testing.T) {
	for _, cmd := range []string{"tenant", "anomalies"} {
		t.Run(cmd, func(t *testing.T) {
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, nil))
			var err error
			switch cmd {
			case "tenant":
				err = runTenant(context.Background(), config.Config{}, []string{"-h"})
			case "anomalies":
				err = runAnomalies(context.Background(), config.Config{}, []string{"-h"}, &bytes.Buffer{})
			}
			if code := exitCode(logger, cmd, err); code != 0 {
				t.Fatalf("exit code %d, want 0", code)
			}
			if logs.Len() != 0 {
				t.Fatalf("logged %q", logs.String())
			}
		})
	}
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	if code := exitCode(logger, "tenant", fmt.Errorf("tenant: %w", errors.New("boom"))); code != 1 || !bytes.Contains(logs.Bytes(), []byte("level=ERROR")) {
		t.Fatalf("a real failure: code %d, logs %q", code, logs.String())
	}
	if code := exitCode(logger, "api", context.Canceled); code != 0 {
		t.Fatalf("cancelled: code %d", code)
	}
}
