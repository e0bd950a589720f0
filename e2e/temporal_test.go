package e2e

import (
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
// the default) or "postgres" (the real server built from tools/go.mod, on the local
// PostgreSQL with SQL visibility, set up by scripts/temporal-postgres.sh).
func temporalMode() string { return envOr("PAYKIT_E2E_TEMPORAL", "dev") }

func (s *system) startTemporal(cli string) error {
	switch m := temporalMode(); m {
	case "dev":
		return s.startDevServer(cli)
	case "postgres":
		return s.startPostgresServer(filepath.Dir(cli))
	default:
		return fmt.Errorf("PAYKIT_E2E_TEMPORAL=%q: want dev or postgres", m)
	}
}

// startDevServer runs the Temporal dev server, in memory, with the search attributes
// registered.
func (s *system) startDevServer(cli string) error {
	s.temporalAddr, s.temporalMetrics = freeAddr(), freeAddr()
	host, port, _ := net.SplitHostPort(s.temporalAddr)
	args := []string{"server", "start-dev", "--headless", "--ip", host, "--port", port,
		"--http-port", portOf(freeAddr()), "--metrics-port", portOf(s.temporalMetrics), "--log-level", "error"}
	for name, typ := range workflows.SearchAttributeTypes() {
		args = append(args, "--search-attribute", name+"="+typ)
	}
	var err error
	if s.temporal, err = s.start("temporal", cli, args, nil); err != nil {
		return err
	}
	if err := waitTCP(s.temporalAddr, 60*time.Second); err != nil {
		return fmt.Errorf("temporal dev server: %w", err)
	}
	return nil
}

// startPostgresServer sets up two PostgreSQL databases of this run's own, starts the real
// Temporal server on them (all four services in one process) and prepares the namespace
// the way an operator would: scripts/temporal-postgres.sh schema and config, then
// `paykit temporal-setup`. The databases are dropped at the end.
func (s *system) startPostgresServer(binDir string) error {
	started := time.Now()
	for _, b := range []string{"temporal-server", "temporal-sql-tool"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return fmt.Errorf("PAYKIT_E2E_TEMPORAL=postgres needs %s in %s: build it with scripts/build-temporal.sh", b, binDir)
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
	runScript := func(args ...string) error {
		cmd := exec.Command(script, args...)
		cmd.Env = append(os.Environ(), envv...)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %v: %v\n%s", script, args, err, b)
		}
		return nil
	}
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
	fmt.Fprintf(os.Stderr, "e2e: Temporal server on PostgreSQL (%s, %s) ready at %s in %s\n",
		prefix+"_temporal", prefix+"_visibility", s.temporalAddr, time.Since(started).Round(100*time.Millisecond))
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
