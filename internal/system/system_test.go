package system

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/paykit/paykit/internal/config"
)

func TestRedactDSN(t *testing.T) {
	tests := []struct {
		name, dsn, want string
	}{
		{name: "password", dsn: "paykit:s3cret@tcp(db:3306)/paykit?parseTime=true", want: "paykit:***@tcp(db:3306)/paykit?parseTime=true"},
		{name: "password with @ and :", dsn: "paykit:a:b@c@tcp(db:3306)/paykit", want: "paykit:***@tcp(db:3306)/paykit"},
		{name: "no password", dsn: "root@tcp(127.0.0.1:3306)/paykit", want: "root@tcp(127.0.0.1:3306)/paykit"},
		{name: "no user", dsn: "tcp(127.0.0.1:3306)/paykit", want: "tcp(127.0.0.1:3306)/paykit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := redactDSN(tc.dsn); got != tc.want {
				t.Fatalf("redactDSN(%q) = %q, want %q", tc.dsn, got, tc.want)
			}
		})
	}
}

// A process that cannot reach MySQL says where it looked, without the password, and how
// to start MariaDB; Open closes what it opened before and returns no system.
func TestOpen_MySQLUnreachable(t *testing.T) {
	cfg, err := config.Load(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg.MySQLDSN = "paykit:s3cret@tcp(127.0.0.1:1)/paykit"
	sys, err := Open(context.Background(), cfg, slog.New(slog.DiscardHandler), NewRegistry(), nil)
	if err == nil || sys != nil {
		t.Fatalf("Open: %v, %v; want an error and no system", sys, err)
	}
	if msg := err.Error(); strings.Contains(msg, "s3cret") || !strings.Contains(msg, "paykit:***@tcp(127.0.0.1:1)") || !strings.Contains(msg, "mariadbd") {
		t.Fatalf("error %q: want the DSN redacted and a hint to start MariaDB", msg)
	}
}
