// Package devstack runs what `paykit dev` needs around paykit on one machine: Redis, a
// Temporal dev server, development Alipay certificates, a development secrets keyring,
// and the demo merchant that
// verifies webhooks and the cashier's return.
package devstack

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/redis"
	"github.com/paykit/paykit/secrets"
	"github.com/paykit/paykit/wechatpaysim"
	"github.com/paykit/paykit/workflows"
)

// EnsureRedis starts a local redis-server on the port of d if d is one server on this
// machine and nothing answers there (a cluster or Sentinels are left alone); if it
// cannot, paykit runs on MySQL alone.
func EnsureRedis(ctx context.Context, d redis.Deployment, logger *slog.Logger) {
	addr := d.Addr
	port, ok := localRedisPort(addr)
	if !ok || d.Kind() != "single" || reachable(addr) {
		return
	}
	path, err := exec.LookPath("redis-server")
	if err != nil {
		logger.Warn("redis is not reachable and redis-server is not installed; running on MySQL alone", "addr", addr)
		return
	}
	logger.Info("starting redis-server", "port", port)
	cmd := exec.CommandContext(ctx, path, "--daemonize", "yes", "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no")
	if out, err := cmd.CombinedOutput(); err != nil {
		logger.Warn("could not start redis-server; running on MySQL alone", "err", err, "output", string(out))
	}
}

// localRedisPort is the port of a single Redis server on this machine's IPv4 loopback
// that paykit dev may start (it binds 127.0.0.1); a URL, a cluster's or Sentinels' list of
// addresses, or another host is left to whoever runs it.
func localRedisPort(addr string) (string, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" || (host != "127.0.0.1" && host != "localhost" && host != "") {
		return "", false
	}
	return port, true
}

func reachable(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// Temporal is where `paykit dev` runs the Temporal dev server.
type Temporal struct {
	Addr, Namespace string
	UIPort          int
	Dir             string // holds its database and its log
	CLI             string // the temporal binary; empty: .bin/temporal, built from tools/go.mod if missing
}

// StartTemporal reuses a server already listening on t.Addr, or starts the pinned dev
// server with a persistent SQLite database in WAL mode and the search attributes
// registered. stop ends the server it started, if any; it is never nil.
func StartTemporal(ctx context.Context, t Temporal, logger *slog.Logger) (stop func(), err error) {
	cmd, err := startTemporal(ctx, t, logger)
	return func() {
		if cmd != nil {
			// The server may run under `go tool`; stop the whole process group.
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			_ = cmd.Wait()
		}
	}, err
}

func startTemporal(ctx context.Context, t Temporal, logger *slog.Logger) (*exec.Cmd, error) {
	if reachable(t.Addr) {
		logger.Info("using the Temporal server already running", "addr", t.Addr)
		return nil, nil
	}
	host, port, err := net.SplitHostPort(t.Addr)
	if err != nil {
		return nil, err
	}
	args := []string{"server", "start-dev", "--ip", host, "--port", port, "--ui-port", fmt.Sprint(t.UIPort),
		"--namespace", t.Namespace,
		"--db-filename", filepath.Join(t.Dir, "temporal.db"),
		"--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal",
		"--log-level", "warn"}
	for name, typ := range workflows.SearchAttributeTypes() {
		args = append(args, "--search-attribute", name+"="+typ)
	}
	cli := t.CLI
	if cli == "" {
		cli = filepath.Join(".bin", "temporal")
		if !fileExists(cli) {
			logger.Info("building the pinned Temporal CLI from tools/go.mod into .bin/temporal (the first build takes several minutes)")
			build := exec.CommandContext(ctx, "go", "-C", "tools", "build", "-o", "../.bin/temporal", "github.com/temporalio/cli/cmd/temporal")
			build.Stdout, build.Stderr = os.Stderr, os.Stderr
			if err := build.Run(); err != nil {
				return nil, fmt.Errorf("build the Temporal CLI (run from the repository root): %w", err)
			}
		}
	}
	cmd := exec.Command(cli, args...)
	logPath := filepath.Join(t.Dir, "temporal.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start temporal dev server: %w", err)
	}
	logger.Info("starting the Temporal dev server", "addr", t.Addr, "log", logPath)
	deadline := time.Now().Add(20 * time.Minute)
	for !reachable(t.Addr) {
		if time.Now().After(deadline) {
			return cmd, fmt.Errorf("temporal dev server did not come up; see %s", logPath)
		}
		select {
		case <-ctx.Done():
			return cmd, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return cmd, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// Keys loads the development Alipay keys from keyDir, generating them the first time.
func Keys(keyDir string, logger *slog.Logger) (alipaysim.KeySet, error) {
	keys, err := alipaysim.LoadKeyDir(keyDir)
	if err == nil {
		return keys, nil
	}
	logger.Info("generating development Alipay keys", "dir", keyDir)
	if keys, err = alipaysim.GenerateKeys(2048); err != nil {
		return keys, err
	}
	return keys, keys.WriteDir(keyDir)
}

// wechatpayKeyDir is where the development WeChat Pay merchant's credentials are kept,
// under the key directory.
const wechatpayKeyDir = "wechatpay"

// WechatKeys returns the development WeChat Pay merchant's credentials (and the
// simulator's keys) kept in keyDir/wechatpay, making them the first time, so that the
// merchant of one run is the next one's.
func WechatKeys(keyDir string, logger *slog.Logger) (wechatpaysim.KeySet, error) {
	dir := filepath.Join(keyDir, wechatpayKeyDir)
	keys, err := wechatpaysim.LoadKeyDir(dir)
	if err == nil {
		return keys, nil
	}
	logger.Info("generating development WeChat Pay keys", "dir", dir)
	if keys, err = wechatpaysim.GenerateKeys("", "", 2048); err != nil {
		return keys, err
	}
	return keys, keys.WriteDir(dir)
}

// secretsKeysFile holds the development keyring in the key directory.
const secretsKeysFile = "secrets_keys"

// SecretsKeys returns the development keyring (PAYKIT_SECRETS_KEYS) kept in keyDir,
// making it the first time, so that the secrets one run seals the next one opens.
func SecretsKeys(keyDir string, logger *slog.Logger) (string, error) {
	path := filepath.Join(keyDir, secretsKeysFile)
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	logger.Info("making a development secrets keyring (PAYKIT_SECRETS_KEYS)", "file", path)
	k, err := secrets.NewKey("dev")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(keyDir, 0o700); err != nil {
		return "", err
	}
	return k, os.WriteFile(path, []byte(k+"\n"), 0o600)
}

// Certs loads the development certificates from keyDir, issuing them for keys the
// first time.
func Certs(keyDir string, keys alipaysim.KeySet, logger *slog.Logger) (alipaysim.CertSet, error) {
	certs, err := alipaysim.LoadCertDir(keyDir)
	if err != nil || certs.AppCertPEM != "" {
		return certs, err
	}
	logger.Info("issuing development Alipay certificates (certificate mode)", "dir", keyDir)
	if certs, err = alipaysim.GenerateCerts(keys); err != nil {
		return certs, err
	}
	return certs, certs.WriteDir(keyDir)
}
