package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/paykit/paykit/workflows"
)

// temporalMode is the Temporal the suite runs on: "dev" (the CLI's dev server, in memory;
// the default), "postgres" (the real server built from tools/go.mod, on the local
// PostgreSQL with SQL visibility, set up by scripts/temporal-postgres.sh) or
// "postgres-mtls" (the same server with mutual TLS on its frontend and internode traffic,
// on certificates made for the run by scripts/temporal-certs.sh; every paykit process and
// the test's own client present the run's client certificate).
func temporalMode() string { return envOr("PAYKIT_E2E_TEMPORAL", "dev") }

// temporalServerName is the name in the postgres-mtls server's certificate, which its
// clients check (they dial 127.0.0.1).
const temporalServerName = "temporal.paykit.test"

func (s *system) startTemporal(cli string) error {
	switch m := temporalMode(); m {
	case "dev":
		return s.startDevServer(cli)
	case "postgres":
		return s.startPostgresServer(filepath.Dir(cli), false)
	case "postgres-mtls":
		return s.startPostgresServer(filepath.Dir(cli), true)
	default:
		return fmt.Errorf("PAYKIT_E2E_TEMPORAL=%q: want dev, postgres or postgres-mtls", m)
	}
}

// makeTemporalCerts runs scripts/temporal-certs.sh into dir: a CA of its own, a server
// certificate for temporalServerName and a client certificate.
func makeTemporalCerts(dir string) error {
	cmd := exec.Command(filepath.Join(repoRoot(), "scripts", "temporal-certs.sh"), dir, temporalServerName)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("scripts/temporal-certs.sh %s: %v\n%s", dir, err, b)
	}
	return nil
}

// temporalClientTLS is what a client of the postgres-mtls server presents: the CA of caDir
// to verify the server, and the client certificate of certDir (none if certDir is empty).
func temporalClientTLS(caDir, certDir string) (*tls.Config, error) {
	ca, err := os.ReadFile(filepath.Join(caDir, "ca.pem"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s/ca.pem: no certificate", caDir)
	}
	c := &tls.Config{RootCAs: pool, ServerName: temporalServerName, MinVersion: tls.VersionTLS12}
	if certDir != "" {
		pair, err := tls.LoadX509KeyPair(filepath.Join(certDir, "client.pem"), filepath.Join(certDir, "client-key.pem"))
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// temporalTLSEnv is the PAYKIT_TEMPORAL_TLS_* settings of a paykit process that verifies
// the server with caDir's CA and presents certDir's client certificate (none if empty).
func temporalTLSEnv(caDir, certDir string) []string {
	e := []string{
		"PAYKIT_TEMPORAL_TLS_CA_FILE=" + filepath.Join(caDir, "ca.pem"),
		"PAYKIT_TEMPORAL_TLS_SERVER_NAME=" + temporalServerName,
	}
	if certDir != "" {
		e = append(e, "PAYKIT_TEMPORAL_TLS_CERT_FILE="+filepath.Join(certDir, "client.pem"),
			"PAYKIT_TEMPORAL_TLS_KEY_FILE="+filepath.Join(certDir, "client-key.pem"))
	}
	return e
}

// startDevServer runs the Temporal dev server, in memory, with the search attributes
// registered. Its ports are picked free, then bound by the server: another process can
// take one in between, and the server then exits at once. It is started again on new
// ports (up to three times), and a server that exits or never listens is reported with
// the end of its log.
func (s *system) startDevServer(cli string) error {
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		if err = s.startDevServerOnce(cli); err == nil {
			return nil
		}
		fmt.Fprintf(os.Stderr, "e2e: Temporal dev server, attempt %d: %v\n", attempt, err)
	}
	return err
}

func (s *system) startDevServerOnce(cli string) error {
	s.temporalAddr, s.temporalMetrics = freeAddr(), freeAddr()
	host, port, _ := net.SplitHostPort(s.temporalAddr)
	args := []string{"server", "start-dev", "--headless", "--ip", host, "--port", port,
		"--http-port", portOf(freeAddr()), "--metrics-port", portOf(s.temporalMetrics), "--log-level", "error"}
	for name, typ := range workflows.SearchAttributeTypes() {
		args = append(args, "--search-attribute", name+"="+typ)
	}
	p, err := s.start("temporal", cli, args, nil)
	if err != nil {
		return err
	}
	if err := waitListening(p, s.temporalAddr, 60*time.Second); err != nil {
		p.kill()
		s.forget(p)
		return fmt.Errorf("temporal dev server: %w", err)
	}
	s.temporal = p
	return nil
}

// startPostgresServer sets up two PostgreSQL databases of this run's own, starts the real
// Temporal server on them (all four services in one process) and prepares the namespace
// the way an operator would: scripts/temporal-postgres.sh schema and config, then
// `paykit temporal-setup`. The databases are dropped at the end. With mtls the server
// requires a client certificate of the run's CA on its frontend and internode traffic.
func (s *system) startPostgresServer(binDir string, mtls bool) error {
	started := time.Now()
	for _, b := range []string{"temporal-server", "temporal-sql-tool"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return fmt.Errorf("PAYKIT_E2E_TEMPORAL=%s needs %s in %s: build it with scripts/build-temporal.sh", temporalMode(), b, binDir)
		}
	}
	port, err := freePortBlock()
	if err != nil {
		return err
	}
	prefix := "paykit_e2e_" + randHex(4)
	script := filepath.Join(repoRoot(), "scripts", "temporal-postgres.sh")
	envv := []string{
		"TEMPORAL_BIN_DIR=" + binDir,
		"TEMPORAL_PG_DB=" + prefix + "_temporal",
		"TEMPORAL_PG_VISIBILITY_DB=" + prefix + "_visibility",
		"TEMPORAL_PG_DIR=" + filepath.Join(s.dir, "temporal-postgres"),
		"TEMPORAL_PORT=" + strconv.Itoa(port),
		"TEMPORAL_METRICS_ADDR=" + freeAddr(),
		"TEMPORAL_LOG_LEVEL=error",
		"PAYKIT_BIN=" + s.paykitBin,
	}
	if mtls {
		certs := filepath.Join(s.dir, "temporal-tls")
		if err := makeTemporalCerts(certs); err != nil {
			return err
		}
		envv = append(envv, "TEMPORAL_TLS_DIR="+certs, "TEMPORAL_TLS_SERVER_NAME="+temporalServerName)
		s.temporalEnv = temporalTLSEnv(certs, certs)
		if s.temporalTLS, err = temporalClientTLS(certs, certs); err != nil {
			return err
		}
	}
	runScript := func(args ...string) error {
		cmd := exec.Command(script, args...)
		cmd.Env = append(os.Environ(), envv...)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %v: %v\n%s", script, args, err, b)
		}
		return nil
	}
	s.temporalScriptEnv = envv
	s.atExit = append(s.atExit, func() { _ = runScript("drop") })
	if err := runScript("schema"); err != nil {
		return err
	}
	if err := runScript("config"); err != nil {
		return err
	}
	s.temporalAddr = "127.0.0.1:" + strconv.Itoa(port)
	if s.temporal, err = s.start("temporal", script, []string{"start"}, envv); err != nil {
		return err
	}
	if err := runScript("setup", "-timeout", "2m"); err != nil {
		return err
	}
	tlsNote := ""
	if mtls {
		tlsNote = ", mutual TLS as " + temporalServerName
	}
	fmt.Fprintf(os.Stderr, "e2e: Temporal server on PostgreSQL (%s, %s%s) ready at %s in %s\n",
		prefix+"_temporal", prefix+"_visibility", tlsNote, s.temporalAddr, time.Since(started).Round(100*time.Millisecond))
	return nil
}

// freePortBlock finds a frontend port P for scripts/temporal-postgres.sh such that every
// port the server binds (P+0, +1, +2, +6, +10 and P-300 +0, +1, +2, +6) is free now.
func freePortBlock() (int, error) {
	offsets := []int{0, 1, 2, 6, 10, -300, -299, -298, -294}
	for range 200 {
		p := 20000 + rand.IntN(10000) // below the ephemeral range freeAddr draws from
		free := true
		for _, o := range offsets {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+o))
			if err != nil {
				free = false
				break
			}
			l.Close()
		}
		if free {
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free block of ports for the Temporal server")
}
