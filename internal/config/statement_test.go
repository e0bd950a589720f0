package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/internal/config"
)

func TestStatementConfig(t *testing.T) {
	cfg, err := config.Load(func(k string) (string, bool) {
		v, ok := map[string]string{"PAYKIT_STATEMENT_AT": "06:45"}[k]
		return v, ok
	})
	if err != nil || cfg.Statement.At != 6*time.Hour+45*time.Minute {
		t.Fatalf("at %s, %v", cfg.Statement.At, err)
	}
	if _, err := config.Load(func(k string) (string, bool) {
		v, ok := map[string]string{"PAYKIT_STATEMENT_AT": "9h30"}[k]
		return v, ok
	}); err == nil || !strings.Contains(err.Error(), "PAYKIT_STATEMENT_AT") {
		t.Fatalf("a malformed PAYKIT_STATEMENT_AT: %v", err)
	}
}
