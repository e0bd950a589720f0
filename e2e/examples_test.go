package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/tenants"
	whsig "github.com/paykit/paykit/webhook"
)

// TestExamples runs each merchant backend of examples/ (Go and Node) against the stack
// as a merchant's developer runs it, with the tenant's secret in the whsec_ form: /buy
// creates the payment with an Idempotency-Key and sends the buyer to pay_url, the buyer
// pays, the example verifies the webhook with the Standard Webhooks library and fulfils
// the order once, a redelivery of the same event and a repeated /buy change nothing, and
// /refund refunds it, which the example learns from the refund's webhook. The Go example
// holds a secret of before (not in the whsec_ form, shown as whsec_ and its base64); the
// Node one a generated secret.
func TestExamples(t *testing.T) {
	st := shared(t)
	generated, err := tenants.NewWebhookSecret()
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range []struct {
		name, secret string
		start        func(t *testing.T, env []string, port string)
	}{
		{"go-merchant", "a-secret-set-before-standard-webhooks-" + randHex(8), startGoExample},
		{"node-merchant", generated, startNodeExample},
	} {
		t.Run(ex.name, func(t *testing.T) {
			port := freePort(t)
			base := "http://127.0.0.1:" + port
			tn := tenant{id: "tex" + randHex(3), apiKey: "sk_test_" + randHex(16), secret: ex.secret}
			if err := env.store.UpsertTenant(context.Background(), payment.Tenant{
				ID: tn.id, Name: t.Name(), APIKeyHash: api.HashAPIKey(tn.apiKey), NotifyURL: base + "/webhooks/paykit",
				WebhookSecret: tn.secret, AlipayAppID: appID, AlipaySeller: sellerID,
			}); err != nil {
				t.Fatal(err)
			}
			ex.start(t, []string{"PAYKIT_URL=" + st.apiURL, "PAYKIT_API_KEY=" + tn.apiKey,
				"PAYKIT_WEBHOOK_SECRET=" + whsig.StandardSecret(tn.secret)}, port)
			runExample(t, st, tn, base)
		})
	}
}

// exampleOrder is GET /orders/{id} of an example.
type exampleOrder struct {
	PaymentNo  string   `json:"payment_no"`
	Fulfilled  int      `json:"fulfilled"`
	Refunded   bool     `json:"refunded"`
	EventsSeen []string `json:"events_seen"`
}

func runExample(t *testing.T, st *stack, tn tenant, base string) {
	noRedirect := &http.Client{Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(path string) (int, string, string) {
		t.Helper()
		resp, err := noRedirect.Post(base+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Location"), string(b)
	}
	show := func(id string) exampleOrder {
		t.Helper()
		resp, err := noRedirect.Get(base + "/orders/" + id)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var o exampleOrder
		if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
			t.Fatalf("GET /orders/%s: HTTP %d: %v", id, resp.StatusCode, err)
		}
		return o
	}
	waitFor := func(what string, ok func(exampleOrder) bool, id string) exampleOrder {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			o := show(id)
			if ok(o) {
				return o
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: order %+v after 30 s", what, o)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	id := "ex" + randHex(4)
	status, payURL, body := post("/buy?order=" + id + "&amount_fen=1990")
	if status != http.StatusSeeOther || payURL == "" {
		t.Fatalf("/buy: HTTP %d %q %s", status, payURL, body)
	}
	o := show(id)
	openCashier(t, payURL)
	simPay(t, o.PaymentNo)
	paid := waitFor("fulfilled", func(o exampleOrder) bool { return o.Fulfilled > 0 }, id)

	// The same event again, and the same /buy again: nothing more is fulfilled or created.
	r := do(t, http.MethodPost, st.apiURL+"/v1/events/evt_"+o.PaymentNo+"_paid/redeliver", tn.auth(), nil)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"delivered":true`) {
		t.Fatalf("redeliver: HTTP %d %s", r.status, r.body)
	}
	if status, again, body := post("/buy?order=" + id + "&amount_fen=1990"); status != http.StatusSeeOther || again != payURL {
		t.Fatalf("/buy again: HTTP %d %q %s, want 303 to %q", status, again, body, payURL)
	}
	if got := show(id); got.Fulfilled != 1 || got.PaymentNo != paid.PaymentNo {
		t.Fatalf("after a redelivery and a repeated /buy: %+v, want fulfilled once", got)
	}

	if status, _, body := post("/refund?order=" + id); status != http.StatusOK || !strings.Contains(body, `"refund_no"`) {
		t.Fatalf("/refund: HTTP %d %s", status, body)
	}
	done := waitFor("refunded", func(o exampleOrder) bool { return o.Refunded }, id)
	if done.Fulfilled != 1 || len(done.EventsSeen) != 2 {
		t.Fatalf("final %+v: want fulfilled once, a payment and a refund event", done)
	}
	t.Logf("order %s: paid (%s), fulfilled once through a redelivery and a repeated /buy, refunded; events %v",
		id, o.PaymentNo, done.EventsSeen)
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

func startGoExample(t *testing.T, env []string, port string) {
	dir := filepath.Join(repoRoot(), "examples", "go-merchant")
	bin := filepath.Join(t.TempDir(), "go-merchant")
	if out, err := exec.Command("go", "-C", dir, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build examples/go-merchant: %v\n%s", err, out)
	}
	startExample(t, exec.Command(bin), append(env, "ADDR=127.0.0.1:"+port), port)
}

func startNodeExample(t *testing.T, env []string, port string) {
	dir := filepath.Join(repoRoot(), "examples", "node-merchant")
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in examples/node-merchant: %v\n%s", err, out)
		}
	}
	cmd := exec.Command("node", "server.mjs")
	cmd.Dir = dir
	startExample(t, cmd, append(env, "PORT="+port), port)
}

// startExample runs cmd with env until the test ends, once it answers on port.
func startExample(t *testing.T, cmd *exec.Cmd, env []string, port string) {
	t.Helper()
	var logs strings.Builder
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("example's output:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://127.0.0.1:" + port + "/orders/none")
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the example does not answer on %s: %v", port, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
