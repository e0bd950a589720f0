package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDevRunsTheWholeSystem runs `paykit dev`, the README's one command, as a process
// of its own (its own Temporal dev server, database, simulators, demo tenant, worker and
// API, on ports of the test's choosing) and pays through it on both channels: an Alipay
// page payment paid at its cashier and a WeChat Pay Native payment paid at the WeChat
// Pay simulator, which dev starts beside Alipay's with a merchant whose keys it keeps in
// its directory. Each ends PAID.
func TestDevRunsTheWholeSystem(t *testing.T) {
	dir := t.TempDir()
	dbName := "paykit_dev_" + randHex(4)
	base := envOr("PAYKIT_TEST_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/")
	t.Cleanup(func() { _, _ = env.db.Exec("DROP DATABASE IF EXISTS " + dbName) })
	apiAddr, adminAddr, simAddr, wxSimAddr := freeAddr(), freeAddr(), freeAddr(), freeAddr()
	cli := envOr("PAYKIT_TEMPORAL_CLI", filepath.Join(repoRoot(), ".bin", "temporal"))
	p, err := env.start("paykit-dev", env.paykitBin, []string{"dev", "-dir", dir, "-temporal-cli", cli,
		"-sim-addr", simAddr, "-wechatpay-sim-addr", wxSimAddr, "-merchant-addr", freeAddr(), "-shop-addr", freeAddr(),
		"-ui-port", portOf(freeAddr()), "-traces", "off"}, []string{
		"PAYKIT_HTTP_ADDR=" + apiAddr, "PAYKIT_API_ADMIN_ADDR=" + adminAddr, "PAYKIT_WORKER_ADMIN_ADDR=" + freeAddr(),
		"PAYKIT_PUBLIC_URL=http://" + apiAddr, "PAYKIT_TEMPORAL_ADDR=" + freeAddr(),
		"PAYKIT_MYSQL_DSN=" + strings.TrimSuffix(base, "/") + "/" + dbName, "PAYKIT_REDIS_ADDR=" + singleRedisAddr(),
		"PAYKIT_REDIS_KEY_PREFIX=paykit-dev-" + randHex(4) + ":", "PAYKIT_TASK_QUEUE=dev-" + randHex(4),
		// The deployment's WeChat Pay merchant is dev's own, kept in its directory.
		"WECHATPAY_MCHID=",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	apiURL := "http://" + apiAddr
	if err := waitAPI(apiURL, "http://"+adminAddr); err != nil {
		b, _ := os.ReadFile(p.logPath)
		t.Fatalf("paykit dev: %v\n%s", err, tail(string(b), 4000))
	}
	if _, err := os.Stat(filepath.Join(dir, "keys", "wechatpay", "apiv3_key.txt")); err != nil {
		t.Fatalf("dev keeps no WeChat Pay merchant keys: %v", err)
	}
	const demoKey = "sk_test_demo_local_only_0001"
	checkout := func(body string) checkoutResult {
		t.Helper()
		r := do(t, http.MethodPost, apiURL+"/v1/payments", map[string]string{"Authorization": "Bearer " + demoKey,
			"Content-Type": "application/json", "Idempotency-Key": "dev-" + randHex(6)}, []byte(body))
		var res checkoutResult
		if r.status != http.StatusCreated && r.status != http.StatusOK || json.Unmarshal(r.body, &res) != nil {
			t.Fatalf("checkout %s: HTTP %d %s", body, r.status, r.body)
		}
		return res
	}
	paid := func(no string) {
		t.Helper()
		waitFor(t, 60*time.Second, func() bool {
			r := do(t, http.MethodGet, apiURL+"/v1/payments/"+no, map[string]string{"Authorization": "Bearer " + demoKey}, nil)
			return r.status == http.StatusOK && strings.Contains(string(r.body), `"status":"PAID"`)
		})
	}

	ali := checkout(`{"order_id":"dev-1001","amount_fen":990,"subject":"Coffee beans"}`)
	if r := do(t, http.MethodGet, ali.PayURL, nil, nil); r.status != http.StatusOK {
		t.Fatalf("Alipay cashier: HTTP %d", r.status)
	}
	if r := do(t, http.MethodPost, "http://"+simAddr+"/_sim/trades/"+ali.PaymentNo+"/pay", map[string]string{"Content-Type": "application/json"}, []byte(`{}`)); r.status != http.StatusOK {
		t.Fatalf("Alipay simulator pay: HTTP %d %s", r.status, r.body)
	}
	paid(ali.PaymentNo)

	wx := checkout(`{"order_id":"dev-1002","amount_fen":1290,"subject":"Tea","method":"wechat_native"}`)
	if !strings.HasPrefix(wx.QRCode, "weixin://wxpay/bizpayurl?pr=") {
		t.Fatalf("a wechat_native checkout through dev answered %+v", wx)
	}
	if r := do(t, http.MethodPost, "http://"+wxSimAddr+"/_sim/orders/"+wx.PaymentNo+"/pay", map[string]string{"Content-Type": "application/json"}, []byte(`{}`)); r.status/100 != 2 {
		t.Fatalf("WeChat Pay simulator pay: HTTP %d %s", r.status, r.body)
	}
	paid(wx.PaymentNo)
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
