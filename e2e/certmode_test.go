package e2e

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/alipaysim"
)

// certModeStack starts a simulator process in certificate mode (公钥证书模式), with
// certificates issued for the system's keys, and returns stack options whose API and
// worker use it in certificate mode, with the simulator's URL. Later entries of a
// process's environment win, so extraEnv overrides the public-key settings.
func certModeStack(t *testing.T) (stackOptions, string) {
	t.Helper()
	certs, err := alipaysim.GenerateCerts(env.keys)
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr()
	simURL := "http://" + addr
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + "-alipaysim"
	sim, err := env.start(name, filepath.Join(env.dir, "alipaysim"), []string{"serve"}, []string{
		"ALIPAYSIM_ADDR=" + addr,
		"ALIPAYSIM_APP_ID=" + appID,
		"ALIPAYSIM_SELLER_ID=" + sellerID,
		"ALIPAYSIM_APP_CERT=" + certs.AppCertPEM,
		"ALIPAYSIM_ALIPAY_CERT=" + certs.AlipayCertPEM,
		"ALIPAYSIM_ALIPAY_ROOT_CERT=" + certs.AlipayRootCertPEM,
		"ALIPAYSIM_ALIPAY_PRIVATE_KEY=" + env.keys.AlipayPrivateKeyPEM,
		"ALIPAYSIM_TIME_SCALE=600",
		"ALIPAYSIM_PUBLIC_URL=" + simURL,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.stop)
	if err := waitHTTP(simURL+"/_sim/trades", 30*time.Second); err != nil {
		t.Fatalf("certificate-mode simulator: %v", err)
	}
	return stackOptions{extraEnv: []string{
		"ALIPAY_GATEWAY_URL=" + simURL + alipaysim.GatewayPath,
		"ALIPAY_PUBLIC_KEY=", // no public key: the Alipay certificate verifies
		"ALIPAY_APP_CERT=" + certs.AppCertPEM,
		"ALIPAY_PUBLIC_CERT=" + certs.AlipayCertPEM,
		"ALIPAY_ROOT_CERT=" + certs.AlipayRootCertPEM,
	}}, simURL
}

// simPayAt pays a trade on the simulator at simURL, as the buyer would.
func simPayAt(t *testing.T, simURL, paymentNo string) {
	t.Helper()
	r := do(t, http.MethodPost, simURL+"/_sim/trades/"+paymentNo+"/pay", map[string]string{"Content-Type": "application/json"}, []byte(`{}`))
	if r.status != http.StatusOK {
		t.Fatalf("sim pay %s: HTTP %d %s", paymentNo, r.status, r.body)
	}
}

// TestHappyPathCertMode runs the happy path with the API and the worker in certificate
// mode against a certificate-mode simulator, which refuses any request without the
// right app_cert_sn and alipay_root_cert_sn.
func TestHappyPathCertMode(t *testing.T) {
	o, simURL := certModeStack(t)
	st := newStack(t, o)
	happyPath(t, st, simURL)
	// Every gateway call of the run was answered in certificate mode: none was refused.
	var trades []alipaysim.Trade
	do(t, http.MethodGet, simURL+"/_sim/trades", nil, nil).json(t, &trades)
	if len(trades) != 1 || trades[0].TradeStatus != alipaysim.StatusSuccess {
		t.Fatalf("certificate-mode simulator trades: %+v", trades)
	}
}
