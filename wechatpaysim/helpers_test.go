package wechatpaysim_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paykit/paykit/wechatpaysim"
	"github.com/paykit/paykit/wechatpaysim/simtest"
)

const (
	mchID = simtest.MchID
	appID = simtest.AppID
)

// clock is a settable clock for the simulator and the test client alike.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// harness is a simulator behind httptest with a signing client for the test merchant.
type harness struct {
	sim   *wechatpaysim.Simulator
	srv   *httptest.Server
	keys  wechatpaysim.KeySet
	clock *clock
}

func newHarness(tb testing.TB, mod func(*wechatpaysim.Config)) *harness {
	tb.Helper()
	h := &harness{keys: simtest.Keys(tb), clock: newClock()}
	h.sim, h.srv = simtest.Start(tb, func(c *wechatpaysim.Config) {
		c.Now = h.clock.Now
		if mod != nil {
			mod(c)
		}
	})
	return h
}

// req is one API request; zero fields take the test merchant's values.
type req struct {
	method, target, body string
	mchid, serial, key   string
	ts                   time.Time
	nonce                string
	wechatpaySerial      string
	auth                 string // a raw Authorization header, instead of signing
	tamper               func(*http.Request)
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(tb testing.TB) map[string]any {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		tb.Fatalf("answer %d is not JSON: %v: %s", r.status, err, r.body)
	}
	return m
}

// code is the error envelope's code ("" for a success).
func (r resp) code() string {
	var e struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Code
}

func (h *harness) do(tb testing.TB, q req) resp {
	tb.Helper()
	if q.mchid == "" {
		q.mchid = mchID
	}
	if q.serial == "" {
		q.serial = h.keys.MerchantSerialNo
	}
	if q.key == "" {
		q.key = h.keys.MerchantPrivateKeyPEM
	}
	if q.ts.IsZero() {
		q.ts = h.clock.Now()
	}
	if q.nonce == "" {
		q.nonce = fmt.Sprintf("%032d", time.Now().UnixNano())
	}
	r, err := http.NewRequest(q.method, h.srv.URL+q.target, strings.NewReader(q.body))
	if err != nil {
		tb.Fatal(err)
	}
	auth := q.auth
	if auth == "" {
		if auth, err = wechatpaysim.SignRequest(q.key, q.mchid, q.serial, q.method, q.target, []byte(q.body), q.ts, q.nonce); err != nil {
			tb.Fatal(err)
		}
	}
	r.Header.Set("Authorization", auth)
	r.Header.Set("Accept", "application/json")
	r.Header.Set("User-Agent", "wechatpaysim-test")
	if q.body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if q.wechatpaySerial != "" {
		r.Header.Set("Wechatpay-Serial", q.wechatpaySerial)
	}
	if q.tamper != nil {
		q.tamper(r)
	}
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		tb.Fatal(err)
	}
	if res.Header.Get("Request-ID") == "" {
		tb.Errorf("%s %s: answer %d without Request-ID", q.method, q.target, res.StatusCode)
	}
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

// verify checks an answer's signature with the key its Wechatpay-Serial names.
func (h *harness) verify(tb testing.TB, r resp) string {
	tb.Helper()
	serial := r.header.Get("Wechatpay-Serial")
	pem := h.keys.PlatformCertPEM
	if serial == h.keys.PublicKeyID {
		pem = h.keys.PublicKeyPEM
	} else if serial != h.keys.PlatformSerialNo {
		tb.Fatalf("answer %d signed by unknown serial %q", r.status, serial)
	}
	if t := r.header.Get("Wechatpay-Signature-Type"); t != wechatpaysim.AuthScheme {
		tb.Fatalf("Wechatpay-Signature-Type %q", t)
	}
	if err := wechatpaysim.VerifyResponse(pem, r.header.Get("Wechatpay-Timestamp"), r.header.Get("Wechatpay-Nonce"),
		r.header.Get("Wechatpay-Signature"), r.body); err != nil {
		tb.Fatalf("answer %d: signature does not verify: %v", r.status, err)
	}
	return serial
}

// orderBody is a valid order request for tradeType (native, jsapi, h5, app), with extra
// fields merged in.
func orderBody(kind, outTradeNo string, total int64, notifyURL string, extra map[string]any) string {
	b := map[string]any{
		"appid": appID, "mchid": mchID, "description": "Image形象店-深圳腾大-QQ公仔",
		"out_trade_no": outTradeNo, "notify_url": notifyURL,
		"amount": map[string]any{"total": total, "currency": "CNY"},
	}
	switch kind {
	case "jsapi":
		b["payer"] = map[string]any{"openid": "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"}
	case "h5":
		b["scene_info"] = map[string]any{"payer_client_ip": "127.0.0.1", "h5_info": map[string]any{"type": "Wap"}}
	}
	for k, v := range extra {
		if v == nil {
			delete(b, k)
			continue
		}
		b[k] = v
	}
	out, _ := json.Marshal(b)
	return string(out)
}

func (h *harness) place(tb testing.TB, kind, outTradeNo string, total int64, notifyURL string) resp {
	tb.Helper()
	r := h.do(tb, req{method: "POST", target: "/v3/pay/transactions/" + kind, body: orderBody(kind, outTradeNo, total, notifyURL, nil)})
	if r.status != http.StatusOK {
		tb.Fatalf("place %s %s: %d %s", kind, outTradeNo, r.status, r.body)
	}
	return r
}

func (h *harness) query(tb testing.TB, outTradeNo string) resp {
	tb.Helper()
	return h.do(tb, req{method: "GET", target: "/v3/pay/transactions/out-trade-no/" + outTradeNo + "?mchid=" + mchID})
}

// control calls the control API and decodes its JSON answer into out (if not nil).
func (h *harness) control(tb testing.TB, method, path, body string, out any) int {
	tb.Helper()
	r, err := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if out != nil && res.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			tb.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return res.StatusCode
}

// delivery is one notification POST as the merchant saw it.
type delivery struct {
	header http.Header
	body   []byte
	at     time.Time
}

// sink is a merchant's notify_url; reply picks the status for the n-th delivery (0-based).
type sink struct {
	srv   *httptest.Server
	mu    sync.Mutex
	got   []delivery
	reply func(n int, d delivery) int
	ch    chan delivery
}

func newSink(tb testing.TB, reply func(n int, d delivery) int) *sink {
	tb.Helper()
	if reply == nil {
		reply = func(int, delivery) int { return http.StatusOK }
	}
	s := &sink{reply: reply, ch: make(chan delivery, 1024)}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		d := delivery{header: r.Header.Clone(), body: b, at: time.Now()}
		s.mu.Lock()
		n := len(s.got)
		s.got = append(s.got, d)
		s.mu.Unlock()
		status := s.reply(n, d)
		s.ch <- d
		if status == http.StatusNoContent {
			w.WriteHeader(status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if status == http.StatusOK {
			_, _ = io.WriteString(w, `{"code":"SUCCESS","message":"成功"}`)
			return
		}
		_, _ = io.WriteString(w, `{"code":"FAIL","message":"失败"}`)
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

func (s *sink) deliveries() []delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]delivery(nil), s.got...)
}

// decryptNotification verifies a delivery's signature and decrypts its resource.
func (h *harness) decryptNotification(tb testing.TB, d delivery) (map[string]any, map[string]any) {
	tb.Helper()
	h.verify(tb, resp{status: 200, header: d.header, body: d.body})
	var env struct {
		Resource struct {
			Ciphertext     string `json:"ciphertext"`
			Nonce          string `json:"nonce"`
			AssociatedData string `json:"associated_data"`
		} `json:"resource"`
	}
	var envelope map[string]any
	if err := json.Unmarshal(d.body, &envelope); err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(d.body, &env); err != nil {
		tb.Fatal(err)
	}
	plain, err := wechatpaysim.DecryptAEAD([]byte(h.keys.APIv3Key), env.Resource.Nonce, env.Resource.AssociatedData, env.Resource.Ciphertext)
	if err != nil {
		tb.Fatalf("decrypt resource: %v", err)
	}
	var tx map[string]any
	if err := json.Unmarshal(plain, &tx); err != nil {
		tb.Fatal(err)
	}
	return envelope, tx
}

// eventually polls cond every few milliseconds until it holds or timeout passes.
func eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func unix(tb testing.TB, s string) int64 {
	tb.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		tb.Fatalf("timestamp %q: %v", s, err)
	}
	return n
}

func newServer(tb testing.TB, h http.Handler) *httptest.Server {
	tb.Helper()
	srv := httptest.NewServer(h)
	tb.Cleanup(srv.Close)
	return srv
}
