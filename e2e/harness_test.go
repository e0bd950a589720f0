// Package e2e runs the whole system as real processes: the Temporal dev server, the
// Alipay and WeChat Pay simulators, paykit workers and API servers, against the real MariaDB and Redis,
// talking real HTTP. Every test here drives it from the outside, as a merchant, Alipay or
// an operator would.
package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/migrations"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
	whsig "github.com/paykit/paykit/webhook"
	"github.com/paykit/paykit/wechatpaysim"
	"github.com/paykit/paykit/workflows"
)

const (
	appID    = "2021000000000001"
	sellerID = "2088000000000001"
)

// env is the shared system under test, started once by TestMain.
var env *system

type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	args    []string
	envv    []string
	bin     string
	done    chan struct{} // closed when the current run has exited
}

type system struct {
	dir          string
	temporalAddr string
	temporal     *proc
	tc           client.Client
	dsn          string
	dbName       string
	db           *sql.DB
	store        *mysql.Store
	keys         alipaysim.KeySet
	simURL       string
	sim          *proc
	// wxKeys are the WeChat Pay merchant's keys (wechatpaysim keygen's), wxSimURL the
	// WeChat Pay simulator every stack's WECHATPAY_BASE_URL names.
	wxKeys    wechatpaysim.KeySet
	wxSimURL  string
	wxSim     *proc
	paykitBin string
	merchant  *merchant
	mu        sync.Mutex
	procs     []*proc
	atExit    []func() // after every process has stopped

	// temporalMetrics is the dev server's Prometheus endpoint (host:port).
	temporalMetrics string
	// temporalEnv is what every paykit process needs besides PAYKIT_TEMPORAL_ADDR to reach
	// Temporal (the PAYKIT_TEMPORAL_TLS_* settings with PAYKIT_E2E_TEMPORAL=postgres-mtls),
	// and temporalTLS the same for the test's own client; both empty without TLS.
	temporalEnv []string
	temporalTLS *tls.Config
	// temporalScriptEnv is the scripts/temporal-postgres.sh settings of the server on
	// PostgreSQL (nil on the dev server), from which a test starts another node.
	temporalScriptEnv []string
}

// stack is one API (and usually one worker) with its own settings.
type stack struct {
	name   string
	apiURL string
	// apiAdminURL serves the API's /readyz, /metrics and pprof (PAYKIT_API_ADMIN_ADDR),
	// workerAdminURL the worker's (PAYKIT_WORKER_ADMIN_ADDR).
	apiAdminURL    string
	workerAdminURL string
	taskQueue      string
	api            *proc
	worker         *proc
	env            []string
}

func TestMain(m *testing.M) {
	// Every test here drives the whole system (Temporal, MariaDB, Redis, the simulator and
	// paykit's processes), which the fast tier (go test -short) does not have.
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: skipped under -short (needs Temporal, MariaDB and Redis)")
		os.Exit(0)
	}
	code := 1
	func() {
		s, err := startSystem()
		if s != nil {
			defer s.shutdown()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: cannot start the system under test:", err)
			return
		}
		env = s
		code = m.Run()
		if reportDrift() && code == 0 {
			code = 1
		}
		if code != 0 {
			s.dumpLogs()
		}
	}()
	os.Exit(code)
}

func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Dir(wd)
}

// handedOut holds every address freeAddr has given in this run.
var handedOut sync.Map

// freeAddr returns a free loopback address that it has never returned before in this run:
// an address is an API's (whose exchanges the contract check records, apiHosts) or an
// admin port's for the whole run, never first one and then, once its process stopped, the
// other (a later admin's GET /metrics was once recorded as the API's, contract drift).
func freeAddr() string {
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		if _, seen := handedOut.LoadOrStore(addr, true); !seen {
			return addr
		}
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// dialTemporal connects to the Temporal server at addr, trying again until within: a
// server that has just opened its port can still answer the client's health check with
// "Frontend is not healthy yet" for a moment.
func dialTemporal(addr string, tlsConfig *tls.Config, within time.Duration) (client.Client, error) {
	deadline := time.Now().Add(within)
	for {
		c, err := client.Dial(client.Options{HostPort: addr, Logger: quietLogger{},
			ConnectionOptions: client.ConnectionOptions{TLS: tlsConfig}})
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("temporal at %s not ready after %v: %w", addr, within, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func startSystem() (*system, error) {
	root := repoRoot()
	cli := envOr("PAYKIT_TEMPORAL_CLI", filepath.Join(root, ".bin", "temporal"))
	if _, err := os.Stat(cli); err != nil {
		return nil, fmt.Errorf("no Temporal CLI at %s: build it with `scripts/build-temporal.sh` (or run `scripts/test.sh`, which does)", cli)
	}
	dir, err := os.MkdirTemp("", "paykit-e2e-")
	if err != nil {
		return nil, err
	}
	s := &system{dir: dir}

	// Binaries of the project, built as users run them.
	s.paykitBin = filepath.Join(dir, "paykit")
	simBin := filepath.Join(dir, "alipaysim")
	wxSimBin := filepath.Join(dir, "wechatpaysim")
	for out, pkg := range map[string]string{s.paykitBin: "./cmd/paykit", simBin: "./cmd/alipaysim", wxSimBin: "./cmd/wechatpaysim"} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			return s, fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
		}
	}

	// Temporal: the dev server, or with PAYKIT_E2E_TEMPORAL=postgres the real server on
	// PostgreSQL (e2e/temporal_test.go).
	if err := s.startTemporal(cli); err != nil {
		return s, err
	}
	if s.tc, err = dialTemporal(s.temporalAddr, s.temporalTLS, 60*time.Second); err != nil {
		return s, err
	}

	// A database of its own, migrated.
	base := envOr("PAYKIT_TEST_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/")
	admin, err := sql.Open("mysql", base)
	if err != nil {
		return s, err
	}
	defer admin.Close()
	if err := admin.Ping(); err != nil {
		return s, fmt.Errorf("MariaDB at %s is not reachable; start it with `start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd`: %w", base, err)
	}
	s.dbName = "paykit_e2e_" + randHex(4)
	if _, err := admin.Exec("CREATE DATABASE " + s.dbName + " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		return s, err
	}
	s.dsn = strings.TrimSuffix(base, "/") + "/" + s.dbName
	ctx := context.Background()
	if s.db, err = mysql.Open(ctx, s.dsn); err != nil {
		return s, err
	}
	if err := migrations.Up(ctx, s.db); err != nil {
		return s, err
	}
	s.store = mysql.NewStore(s.db)
	if err := pingRedis(); err != nil {
		return s, err
	}

	// Keys, the merchant's webhook endpoint, and the simulator process.
	if s.keys, err = alipaysim.GenerateKeys(2048); err != nil {
		return s, err
	}
	s.merchant = newMerchant()
	simAddr := freeAddr()
	s.simURL = "http://" + simAddr
	s.sim, err = s.start("alipaysim", simBin, []string{"serve"}, []string{
		"ALIPAYSIM_ADDR=" + simAddr,
		"ALIPAYSIM_APP_ID=" + appID,
		"ALIPAYSIM_SELLER_ID=" + sellerID,
		"ALIPAYSIM_APP_PUBLIC_KEY=" + s.keys.AppPublicKeyPEM,
		"ALIPAYSIM_ALIPAY_PRIVATE_KEY=" + s.keys.AlipayPrivateKeyPEM,
		"ALIPAYSIM_TIME_SCALE=600",
		"ALIPAYSIM_PUBLIC_URL=" + s.simURL,
	})
	if err != nil {
		return s, err
	}
	if err := waitHTTP(s.simURL+"/_sim/trades", 30*time.Second); err != nil {
		return s, fmt.Errorf("alipay simulator: %w", err)
	}
	if err := s.startWechatPaySim(wxSimBin); err != nil {
		return s, err
	}
	return s, nil
}

// startWechatPaySim starts the WeChat Pay simulator process on a merchant whose keys
// `wechatpaysim keygen` writes: the simulator reads them from the key dir, and every
// stack gets the merchant's side of them (wechatpayEnv). Its notifications are signed
// with the WeChat Pay public key, which the stacks verify with.
func (s *system) startWechatPaySim(bin string) error {
	keyDir := filepath.Join(s.dir, "wechatpay-keys")
	if out, err := exec.Command(bin, "keygen", "-out", keyDir).CombinedOutput(); err != nil {
		return fmt.Errorf("wechatpaysim keygen: %v\n%s", err, out)
	}
	var err error
	if s.wxKeys, err = wechatpaysim.LoadKeyDir(keyDir); err != nil {
		return err
	}
	addr := freeAddr()
	s.wxSimURL = "http://" + addr
	if s.wxSim, err = s.start("wechatpaysim", bin, []string{"serve"}, []string{
		"WECHATPAYSIM_ADDR=" + addr,
		"WECHATPAYSIM_KEY_DIR=" + keyDir,
		"WECHATPAYSIM_NOTIFY_SIGNER=public_key",
		"WECHATPAYSIM_TIME_SCALE=600",
		"WECHATPAYSIM_PUBLIC_URL=" + s.wxSimURL,
	}); err != nil {
		return err
	}
	if err := waitHTTP(s.wxSimURL+"/_sim/healthz", 30*time.Second); err != nil {
		return fmt.Errorf("wechat pay simulator: %w", err)
	}
	return nil
}

// wechatpayEnv is the WECHATPAY_* of the simulator's merchant, which every paykit
// process gets.
func (s *system) wechatpayEnv() []string {
	return []string{
		"WECHATPAY_MCHID=" + s.wxKeys.MchID,
		"WECHATPAY_APPID=" + s.wxKeys.AppID,
		"WECHATPAY_MERCHANT_SERIAL=" + s.wxKeys.MerchantSerialNo,
		"WECHATPAY_PRIVATE_KEY=" + s.wxKeys.MerchantPrivateKeyPEM,
		"WECHATPAY_APIV3_KEY=" + s.wxKeys.APIv3Key,
		"WECHATPAY_PUBLIC_KEY=" + s.wxKeys.PublicKeyPEM,
		"WECHATPAY_PUBLIC_KEY_ID=" + s.wxKeys.PublicKeyID,
		"WECHATPAY_BASE_URL=" + s.wxSimURL,
		"WECHATPAY_CASHIER_BASE_URL=" + s.wxSimURL,
	}
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// redisAddr is the Redis of every stack that names none: PAYKIT_TEST_REDIS_ADDR, or with
// "cluster" the nodes of a three-master Redis Cluster of this test process's own.
var redisAddr string

// singleRedisAddr is the one Redis server of the tests that need a single server (the
// fault suite's proxy in front of it, the benchmark's command counts): redisAddr, or the
// default server when the tests run on a cluster.
func singleRedisAddr() string {
	if strings.Contains(redisAddr, ",") {
		return testenv.DefaultRedisAddr
	}
	return redisAddr
}

func pingRedis() error {
	addr, err := testenv.SharedRedisAddr()
	if err != nil {
		return err
	}
	for _, a := range strings.Split(addr, ",") {
		conn, err := net.DialTimeout("tcp", a, time.Second)
		if err != nil {
			return fmt.Errorf("redis at %s is not reachable; start it with `redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save \"\" --appendonly no`: %w", a, err)
		}
		_ = conn.Close()
	}
	redisAddr = addr
	return nil
}

func (s *system) start(name, bin string, args, envv []string) (*proc, error) {
	p := &proc{name: name, bin: bin, args: args, envv: envv, logPath: filepath.Join(s.dir, name+".log")}
	if err := p.run(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	return p, nil
}

func (p *proc) run() error {
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.envv...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.cmd = cmd
	done := make(chan struct{})
	p.done = done
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	return nil
}

// kill ends the process abruptly, as a crash would.
func (p *proc) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		p.waitExit(5 * time.Second)
	}
}

// stop asks the process to shut down gracefully.
func (p *proc) stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	if !p.waitExit(25 * time.Second) {
		p.kill()
	}
}

func (p *proc) waitExit(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

func (s *system) shutdown() {
	s.mu.Lock()
	procs := append([]*proc(nil), s.procs...)
	s.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop()
	}
	if s.tc != nil {
		s.tc.Close()
	}
	for _, fn := range s.atExit {
		fn()
	}
	if s.merchant != nil {
		s.merchant.srv.Close()
	}
	testenv.StopSharedRedis()
	if s.db != nil {
		// PAYKIT_E2E_KEEP keeps the run's database too, for reading after a failure.
		if os.Getenv("PAYKIT_E2E_KEEP") == "" {
			_, _ = s.db.Exec("DROP DATABASE IF EXISTS " + s.dbName)
		}
		s.db.Close()
	}
	if os.Getenv("PAYKIT_E2E_KEEP") == "" {
		_ = os.RemoveAll(s.dir)
	}
}

func (s *system) dumpLogs() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.procs {
		b, _ := os.ReadFile(p.logPath)
		if len(b) > 6000 {
			b = b[len(b)-6000:]
		}
		fmt.Fprintf(os.Stderr, "\n----- last lines of %s -----\n%s\n", p.name, b)
	}
}

func waitTCP(addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not reachable after %s", addr, d)
}

// waitListening waits until p listens on addr, failing at once, with the end of its log,
// if p exits first, and with the same after d.
func waitListening(p *proc, addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before listening on %s; its log ends:\n%s", p.name, addr, logTail(p.logPath, 2000))
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not listening on %s after %s; its log ends:\n%s", p.name, addr, d, logTail(p.logPath, 2000))
}

// logTail is the last n bytes of the file at path.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// forget drops p from the processes shutdown stops.
func (s *system) forget(p *proc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.procs = slices.DeleteFunc(s.procs, func(q *proc) bool { return q == p })
}

func waitHTTP(url string, d time.Duration) error {
	deadline := time.Now().Add(d)
	var last string
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, b)
		} else {
			last = err.Error()
		}
		time.Sleep(150 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %s: %s", url, d, last)
}

// stackOptions configures one API + worker pair.
type stackOptions struct {
	paymentTTL time.Duration
	redisAddr  string
	noWorker   bool
	taskQueue  string
	extraEnv   []string
	// bin is the paykit binary the stack runs: this build's unless set (an earlier
	// release's, buildRelease).
	bin string
}

// newStack starts an API server and a worker with the given settings; they are stopped
// when the test ends.
func newStack(t *testing.T, o stackOptions) *stack {
	t.Helper()
	return startTestStack(t, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()), o)
}

// startTestStack starts a stack named name (its log files are named after it) and stops
// its processes when the test ends.
func startTestStack(t *testing.T, name string, o stackOptions) *stack {
	t.Helper()
	ownsQueue := o.taskQueue == ""
	st, err := startStack(name, o)
	if st != nil {
		t.Cleanup(func() {
			if st.api != nil {
				st.api.stop()
			}
			if st.worker != nil {
				st.worker.stop()
			}
			if ownsQueue {
				deleteSchedules(st.taskQueue)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// startStack starts an API server and a worker; the system stops them at the end.
func startStack(name string, o stackOptions) (*stack, error) {
	if o.paymentTTL == 0 {
		o.paymentTTL = time.Minute
	}
	if o.redisAddr == "" {
		o.redisAddr = redisAddr
	}
	if o.taskQueue == "" {
		o.taskQueue = "e2e-" + randHex(4)
	}
	apiAddr, apiAdminAddr, workerAdminAddr := freeAddr(), freeAddr(), freeAddr()
	st := &stack{name: name, apiURL: "http://" + apiAddr, apiAdminURL: "http://" + apiAdminAddr,
		workerAdminURL: "http://" + workerAdminAddr, taskQueue: o.taskQueue}
	apiHosts.Store(apiAddr, true)
	st.env = append(append([]string{
		"PAYKIT_MYSQL_DSN=" + env.dsn,
		"PAYKIT_REDIS_ADDR=" + o.redisAddr,
		"PAYKIT_TEMPORAL_ADDR=" + env.temporalAddr,
		"PAYKIT_TASK_QUEUE=" + o.taskQueue,
		"PAYKIT_HTTP_ADDR=" + apiAddr,
		"PAYKIT_API_ADMIN_ADDR=" + apiAdminAddr,
		"PAYKIT_WORKER_ADMIN_ADDR=" + workerAdminAddr,
		"PAYKIT_PUBLIC_URL=" + st.apiURL,
		"ALIPAY_APP_ID=" + appID,
		"ALIPAY_SELLER_ID=" + sellerID,
		"ALIPAY_GATEWAY_URL=" + env.simURL + "/gateway.do",
		"ALIPAY_APP_PRIVATE_KEY=" + env.keys.AppPrivateKeyPEM,
		"ALIPAY_PUBLIC_KEY=" + env.keys.AlipayPublicKeyPEM,
		"PAYKIT_PAYMENT_TTL=" + o.paymentTTL.String(),
		"PAYKIT_RECONCILE_INTERVAL=1s",
		"PAYKIT_WEBHOOK_INITIAL_INTERVAL=200ms",
		"PAYKIT_WEBHOOK_MAX_INTERVAL=1s",
		"PAYKIT_WEBHOOK_MAX_ATTEMPTS=5",
		"PAYKIT_SWEEP_EVERY=2s",
		"PAYKIT_SWEEP_STALE_AFTER=1s",
		// The inbox hands an unsettled notification over again after 3 s, swept every 500 ms.
		"PAYKIT_INBOX_SETTLE_BOUND=3s",
		"PAYKIT_INBOX_SWEEP_INTERVAL=500ms",
		"PAYKIT_LOG_LEVEL=info",
		// The test merchant listens on plain http on loopback.
		"PAYKIT_WEBHOOK_ALLOW_HTTP=true",
		"PAYKIT_WEBHOOK_ALLOW_PRIVATE=true",
	}, append(env.wechatpayEnv(), env.temporalEnv...)...), o.extraEnv...)
	bin := o.bin
	if bin == "" {
		bin = env.paykitBin
	}
	var err error
	if !o.noWorker {
		if st.worker, err = env.start(name+"-worker", bin, []string{"worker"}, st.env); err != nil {
			return st, err
		}
	}
	if st.api, err = env.start(name+"-api", bin, []string{"api"}, st.env); err != nil {
		return st, err
	}
	if err := waitAPI(st.apiURL, st.apiAdminURL); err != nil {
		return st, fmt.Errorf("api %s: %w", name, err)
	}
	if !o.noWorker {
		if err := waitHTTP(st.workerAdminURL+"/readyz", 60*time.Second); err != nil {
			return st, fmt.Errorf("worker %s: %w", name, err)
		}
	}
	return st, nil
}

// deleteSchedules removes the schedules a stack's worker created for its task queue
// (sweeper, purge, audit, statements), so that a stopped stack's schedules do not keep
// starting workflows on the shared Temporal server for the rest of the run.
func deleteSchedules(taskQueue string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sc := env.tc.ScheduleClient()
	it, err := sc.List(ctx, client.ScheduleListOptions{PageSize: 1000})
	if err != nil {
		return
	}
	var ids []string
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			break
		}
		if strings.HasSuffix(e.ID, "-"+taskQueue) || strings.Contains(e.ID, "-"+taskQueue+"-") {
			ids = append(ids, e.ID)
		}
	}
	for _, id := range ids {
		_ = sc.GetHandle(ctx, id).Delete(ctx)
	}
}

// waitAPI waits until an API is ready (its admin listener's /readyz) and its public
// listener answers (/healthz).
func waitAPI(apiURL, adminURL string) error {
	if err := waitHTTP(adminURL+"/readyz", 60*time.Second); err != nil {
		return err
	}
	return waitHTTP(apiURL+"/healthz", 10*time.Second)
}

// hostOf is the host:port of an http:// URL.
func hostOf(u string) string { return strings.TrimPrefix(u, "http://") }

// restartWorker starts the stack's worker again after kill or stop.
func (st *stack) restartWorker(t *testing.T) {
	t.Helper()
	if err := st.worker.run(); err != nil {
		t.Fatal(err)
	}
}

// tenant creates a tenant whose webhooks go to the test merchant.
type tenant struct {
	id     string
	apiKey string
	secret string
}

func newTenant(t *testing.T) tenant {
	t.Helper()
	tn := tenant{id: "t" + randHex(4), apiKey: "sk_test_" + randHex(16), secret: "whsec_" + randHex(16)}
	err := env.store.UpsertTenant(context.Background(), payment.Tenant{
		ID: tn.id, Name: t.Name(), APIKeyHash: api.HashAPIKey(tn.apiKey), NotifyURL: env.merchant.url + "/webhooks/" + tn.id,
		WebhookSecret: tn.secret, AlipayAppID: appID, AlipaySeller: sellerID,
	})
	if err != nil {
		t.Fatal(err)
	}
	env.merchant.setSecret(tn.id, tn.secret)
	return tn
}

// response is an HTTP answer with its body.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// httpClient's exchanges with the APIs are checked against the OpenAPI contract.
var httpClient = &http.Client{Timeout: 60 * time.Second,
	Transport: contractChecked(&http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256})}

func do(t testing.TB, method, url string, headers map[string]string, body []byte) response {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, url, err)
		return response{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func (st *stack) checkout(t testing.TB, tn tenant, idemKey string, body map[string]any) response {
	t.Helper()
	b, _ := json.Marshal(body)
	h := map[string]string{"Authorization": "Bearer " + tn.apiKey, "Content-Type": "application/json"}
	if idemKey != "" {
		h["Idempotency-Key"] = idemKey
	}
	return do(t, http.MethodPost, st.apiURL+"/v1/payments", h, b)
}

// checkoutResult is the answer of POST /v1/payments.
type checkoutResult = workflows.CheckoutResult

func order(id string, fen int64) map[string]any {
	return map[string]any{"order_id": id, "amount_fen": fen, "subject": "Test order " + id}
}

// simPay pays a trade at the simulator as the buyer.
func simPay(t *testing.T, paymentNo string) {
	t.Helper()
	r := do(t, http.MethodPost, env.simURL+"/_sim/trades/"+paymentNo+"/pay", map[string]string{"Content-Type": "application/json"}, []byte(`{}`))
	if r.status != http.StatusOK {
		t.Fatalf("sim pay %s: HTTP %d %s", paymentNo, r.status, r.body)
	}
}

// simFault posts a fault injection to the simulator's control API (kind: "/gateway" or
// "/notifications").
func simFault(t *testing.T, kind string, body map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	r := do(t, http.MethodPost, env.simURL+"/_sim/faults"+kind, map[string]string{"Content-Type": "application/json"}, b)
	if r.status/100 != 2 {
		t.Fatalf("sim fault %s: HTTP %d %s", b, r.status, r.body)
	}
}

// waitStatus polls MySQL until the payment reaches want.
func waitStatus(t *testing.T, paymentNo string, want payment.Status, d time.Duration) payment.Payment {
	t.Helper()
	deadline := time.Now().Add(d)
	var p payment.Payment
	var err error
	for time.Now().Before(deadline) {
		p, err = env.store.GetPayment(context.Background(), paymentNo)
		if err == nil && p.Status == want {
			return p
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("payment %s: status %s (err %v), want %s after %s", paymentNo, p.Status, err, want, d)
	return p
}

// waitWorkflowClosed waits until the payment's workflow run has completed and returns
// its final state.
func waitWorkflowClosed(t *testing.T, workflowID string, d time.Duration) workflows.PaymentState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var st workflows.PaymentState
	if err := env.tc.GetWorkflow(ctx, workflowID, "").Get(ctx, &st); err != nil {
		t.Fatalf("workflow %s: %v", workflowID, err)
	}
	return st
}

// waitRedrivenState waits until a workflow has a running run that has set up its payment
// (after the sweeper or a notification re-drove it) and returns that run's state.
func waitRedrivenState(t *testing.T, workflowID string, d time.Duration) workflows.PaymentState {
	t.Helper()
	deadline := time.Now().Add(d)
	var (
		st  workflows.PaymentState
		err error
	)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var desc *client.WorkflowExecutionDescription
		desc, err = env.tc.DescribeWorkflow(ctx, workflowID, "")
		if err == nil && desc.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			var v converter.EncodedValue
			if v, err = env.tc.QueryWorkflow(ctx, workflowID, "", workflows.StateQuery); err == nil {
				err = v.Get(&st)
			}
			if err == nil && st.Initialized {
				cancel()
				return st
			}
		}
		cancel()
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("workflow %s: no running, initialized run after %s (last error %v)", workflowID, d, err)
	return st
}

func count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := env.db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// merchant is the test merchant's webhook endpoint. It verifies every signature.
type merchant struct {
	srv     *http.Server
	url     string
	mu      sync.Mutex
	secrets map[string]string
	events  map[string][]webhook // by tenant
	delays  map[string]time.Duration
}

type webhook struct {
	eventID  string
	typ      string
	body     []byte
	verified bool
}

func newMerchant() *merchant {
	m := &merchant{secrets: map[string]string{}, events: map[string][]webhook{}, delays: map[string]time.Duration{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	m.url = "http://" + l.Addr().String()
	m.srv = &http.Server{Handler: http.HandlerFunc(m.handle), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = m.srv.Serve(l) }()
	return m
}

func (m *merchant) setSecret(tenantID, secret string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.secrets[tenantID] = secret
}

// setDelay makes the merchant answer the tenant's webhooks only after d (0: at once),
// as a slow merchant does; each is recorded as received when it arrives.
func (m *merchant) setDelay(tenantID string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.delays[tenantID] = d
}

func (m *merchant) handle(w http.ResponseWriter, r *http.Request) {
	tenantID := strings.TrimPrefix(r.URL.Path, "/webhooks/")
	body, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	secret := m.secrets[tenantID]
	// As docs/integrate/webhooks.md tells merchants: the event id is the signed body's.
	// Both schemes must verify: Paykit-Signature with package webhook, the Standard
	// Webhooks headers with the official library, given the secret's whsec_ form.
	id, err := whsig.VerifyEvent(r.Header.Get(activities.SignatureHeader), r.Header.Get(activities.EventIDHeader), body, secret, whsig.DefaultTolerance)
	ok := err == nil && standardVerifies(secret, id, body, r.Header)
	if !ok {
		id = r.Header.Get(activities.EventIDHeader)
	}
	m.events[tenantID] = append(m.events[tenantID], webhook{
		eventID: id, typ: r.Header.Get(activities.EventTypeHeader), body: body, verified: ok,
	})
	delay := m.delays[tenantID]
	m.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
		}
	}
	if !ok {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// standardVerifies reports whether the Standard Webhooks headers verify with the
// official Go library under the whsec_ form of secret, and name the signed event id.
func standardVerifies(secret, eventID string, body []byte, h http.Header) bool {
	wh, err := standardwebhooks.NewWebhook(whsig.StandardSecret(secret))
	return err == nil && wh.Verify(body, h) == nil && h.Get(whsig.StandardIDHeader) == eventID
}

func (m *merchant) received(tenantID string) []webhook {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]webhook(nil), m.events[tenantID]...)
}

type quietLogger struct{}

func (quietLogger) Debug(string, ...interface{}) {}
func (quietLogger) Info(string, ...interface{})  {}
func (quietLogger) Warn(string, ...interface{})  {}
func (quietLogger) Error(string, ...interface{}) {}

// waitFor polls cond every 20 ms until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
