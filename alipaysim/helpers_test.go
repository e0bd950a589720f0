package alipaysim_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/alipaysim/simtest"
	"github.com/smartwalle/alipay/v3"
)

const (
	appID    = simtest.AppID
	sellerID = simtest.SellerID
)

func testKeys(tb testing.TB) alipaysim.KeySet { return simtest.Keys(tb) }

// delivery is one notification POST as the merchant saw it.
type delivery struct {
	body string
	form url.Values
	at   time.Time
}

// sink is a merchant notify_url; reply picks the body for the n-th delivery (0-based).
type sink struct {
	srv   *httptest.Server
	mu    sync.Mutex
	got   []delivery
	reply func(n int) string
	ch    chan delivery
}

func newSink(tb testing.TB, reply func(n int) string) *sink {
	tb.Helper()
	if reply == nil {
		reply = func(int) string { return "success" }
	}
	s := &sink{reply: reply, ch: make(chan delivery, 1024)}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(b))
		d := delivery{body: string(b), form: form, at: time.Now()}
		s.mu.Lock()
		n := len(s.got)
		s.got = append(s.got, d)
		s.mu.Unlock()
		s.ch <- d
		_, _ = io.WriteString(w, s.reply(n))
	}))
	tb.Cleanup(s.srv.Close)
	return s
}

func (s *sink) url() string { return s.srv.URL + "/notify" }

func (s *sink) next(tb testing.TB, timeout time.Duration) delivery {
	tb.Helper()
	select {
	case d := <-s.ch:
		return d
	case <-time.After(timeout):
		tb.Fatalf("no notification within %s", timeout)
		return delivery{}
	}
}

// none asserts that nothing arrives for d.
func (s *sink) none(tb testing.TB, d time.Duration) {
	tb.Helper()
	select {
	case got := <-s.ch:
		tb.Fatalf("unexpected notification %v", got.form)
	case <-time.After(d):
	}
}

type harness struct {
	keys   alipaysim.KeySet
	sim    *alipaysim.Simulator
	srv    *httptest.Server
	client *alipay.Client
	sink   *sink
}

func newHarness(tb testing.TB, mod func(*alipaysim.Config), reply func(int) string) *harness {
	tb.Helper()
	keys := testKeys(tb)
	sim, srv := simtest.Start(tb, func(cfg *alipaysim.Config) {
		cfg.TimeScale = 36000
		if mod != nil {
			mod(cfg)
		}
	})
	return &harness{keys: keys, sim: sim, srv: srv, client: newClient(tb, srv.URL, keys.AppPrivateKeyPEM, keys.AlipayPublicKeyPEM), sink: newSink(tb, reply)}
}

func newClient(tb testing.TB, base, appPriv, aliPub string) *alipay.Client {
	tb.Helper()
	c, err := alipay.New(appID, appPriv, false,
		alipay.WithSandboxGateway(base+alipaysim.GatewayPath),
		alipay.WithTimeLocation(time.FixedZone("CST", 8*3600)),
		alipay.WithHTTPClient(&http.Client{Timeout: 5 * time.Second}))
	if err != nil {
		tb.Fatal(err)
	}
	if err := c.LoadAliPayPublicKey(aliPub); err != nil {
		tb.Fatal(err)
	}
	return c
}

func (h *harness) precreate(tb testing.TB, no, amount string) {
	tb.Helper()
	h.precreateExpiring(tb, no, amount, time.Now().Add(time.Hour))
}

func (h *harness) precreateExpiring(tb testing.TB, no, amount string, expire time.Time) {
	tb.Helper()
	rsp, err := h.client.TradePreCreate(context.Background(), alipay.TradePreCreate{Trade: alipay.Trade{
		NotifyURL: h.sink.url(), Subject: "subject " + no, OutTradeNo: no, TotalAmount: amount,
		ProductCode: "FACE_TO_FACE_PAYMENT",
		TimeExpire:  expire.In(time.FixedZone("CST", 8*3600)).Format("2006-01-02 15:04:05"),
	}})
	if err != nil || !rsp.IsSuccess() {
		tb.Fatalf("precreate %s: %+v, %v", no, rsp, err)
	}
}

// controlJSON calls the control API and decodes the JSON answer into out (if not nil).
func (h *harness) controlJSON(tb testing.TB, method, path, body string, out any) int {
	tb.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			tb.Fatalf("%s %s: %v\n%s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

// --- an independent implementation of Alipay's signing rules, for raw-HTTP tests ---

func parsePriv(tb testing.TB, s string) *rsa.PrivateKey {
	tb.Helper()
	b, _ := pem.Decode([]byte(s))
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		tb.Fatal(err)
	}
	return k.(*rsa.PrivateKey)
}

func parsePub(tb testing.TB, s string) *rsa.PublicKey {
	tb.Helper()
	b, _ := pem.Decode([]byte(s))
	k, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		tb.Fatal(err)
	}
	return k.(*rsa.PublicKey)
}

// canonical sorts by key and joins k=v with &, leaving out the excluded keys.
func canonical(v url.Values, exclude ...string) string {
	keys := make([]string, 0, len(v))
outer:
	for k := range v {
		for _, e := range exclude {
			if k == e {
				continue outer
			}
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		for _, val := range v[k] {
			parts = append(parts, k+"="+val)
		}
	}
	return strings.Join(parts, "&")
}

func sign(tb testing.TB, key *rsa.PrivateKey, data string) string {
	tb.Helper()
	sum := sha256.Sum256([]byte(data))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		tb.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(sig)
}

func verify(pub *rsa.PublicKey, data []byte, sigB64 string) error {
	sig, err := base64.StdEncoding.DecodeString(sigB64)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	return rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig)
}

// signedForm builds a request form signed with the app key (every field but sign).
func signedForm(tb testing.TB, key *rsa.PrivateKey, method string, biz map[string]string) url.Values {
	tb.Helper()
	b, _ := json.Marshal(biz)
	v := url.Values{
		"app_id": {appID}, "method": {method}, "format": {"JSON"}, "charset": {"utf-8"},
		"sign_type": {"RSA2"}, "version": {"1.0"}, "biz_content": {string(b)},
		"timestamp": {time.Now().In(time.FixedZone("CST", 8*3600)).Format("2006-01-02 15:04:05")},
	}
	v.Set("sign", sign(tb, key, canonical(v, "sign")))
	return v
}

// rawAnswer is a gateway answer split as a client must split it.
type rawAnswer struct {
	name   string          // the *_response key
	object json.RawMessage // its exact bytes
	sign   string
	fields map[string]any
}

// postRaw posts a form and checks the answer is signed over the exact bytes of its
// response object and that every value is a JSON string.
func (h *harness) postRaw(tb testing.TB, query, form url.Values) rawAnswer {
	tb.Helper()
	u := h.srv.URL + alipaysim.GatewayPath
	if query != nil {
		u += "?" + query.Encode()
	}
	resp, err := http.Post(u, "application/x-www-form-urlencoded;charset=utf-8", strings.NewReader(form.Encode()))
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		tb.Fatalf("answer is not JSON: %v\n%s", err, body)
	}
	var a rawAnswer
	for k, v := range top {
		if k == "sign" {
			if err := json.Unmarshal(v, &a.sign); err != nil {
				tb.Fatal(err)
			}
			continue
		}
		a.name, a.object = k, v
	}
	if len(top) != 2 || a.sign == "" {
		tb.Fatalf("answer must be {<name>_response, sign}: %s", body)
	}
	if !strings.Contains(string(body), string(a.object)) {
		tb.Fatal("raw object not found in body")
	}
	if err := verify(parsePub(tb, h.keys.AlipayPublicKeyPEM), a.object, a.sign); err != nil {
		tb.Fatalf("answer signature does not verify over the object bytes: %v\n%s", err, body)
	}
	if err := json.Unmarshal(a.object, &a.fields); err != nil {
		tb.Fatal(err)
	}
	for k, v := range a.fields {
		if _, ok := v.(string); !ok {
			tb.Fatalf("field %s is %T, not a JSON string: %s", k, v, body)
		}
	}
	return a
}

func (a rawAnswer) get(k string) string {
	s, _ := a.fields[k].(string)
	return s
}
