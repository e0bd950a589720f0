// Command wechatpay-gopay-check drives the WeChat Pay simulator (cmd/wechatpaysim) with
// an independent WeChat Pay v3 client, github.com/go-pay/gopay's wechat/v3, unchanged:
// only SetProxyHost points it at the simulator. It builds the simulator, generates
// throw-away credentials (wechatpaysim keygen), starts it, and checks platform
// certificates (AutoVerifySign), Native/JSAPI/H5/App orders, a repeat, OUT_TRADE_NO_USED,
// query, payment, a verified notification, close, refunds (V3Refund, V3RefundQuery, a
// refund notification decrypted with DecryptRefundCipherText), the trade bill
// (V3BillTradeBill, V3BillDownLoadBill, plain and GZIP, its hash), the public-key mode,
// and the refusals: a request tampered in transit, a forged answer, a notification
// probe, a replayed notification and a tampered one, an over-refund, a second refund
// within a minute, an unknown refund. It exits non-zero on the first failure.
//
//	go run . [-root ../..]
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rsa"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-pay/crypto/xpem"
	"github.com/go-pay/gopay"
	"github.com/go-pay/gopay/wechat/v3"
)

func main() {
	root := flag.String("root", "../..", "the paykit repository root")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("wechatpay-gopay-check: ")
	work, err := os.MkdirTemp("", "wechatpay-gopay-check-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(work)
	bin := filepath.Join(work, "wechatpaysim")
	build := exec.Command("go", "build", "-o", bin, "./cmd/wechatpaysim")
	build.Dir, build.Stdout, build.Stderr = *root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		log.Fatalf("build the simulator: %v", err)
	}
	failed := false
	for _, c := range []struct {
		name string
		run  func(*sim) error
		env  []string
	}{
		{"platform certificate and public key (key mode both)", checkBoth, nil},
		{"public-key-only merchant", checkPublicKeyOnly, []string{"WECHATPAYSIM_KEY_MODE=public_key"}},
	} {
		s, err := startSim(bin, filepath.Join(work, strconv.Itoa(len(c.name))), c.env)
		if err != nil {
			log.Fatalf("%s: %v", c.name, err)
		}
		err = c.run(s)
		s.stop()
		if err != nil {
			log.Printf("FAIL %s: %v\n--- simulator log ---\n%s", c.name, err, s.logText())
			failed = true
			continue
		}
		log.Printf("ok %s", c.name)
	}
	if failed {
		os.Exit(1)
	}
}

// creds are the merchant's credentials as keygen wrote them.
type creds struct {
	mchid, appid, serial, apiV3Key, privateKey string
	platformCert, platformSerial               string
	pubKey, pubKeyID                           string
}

// sim is a running simulator process.
type sim struct {
	base string
	cmd  *exec.Cmd
	log  string
	c    creds
}

func startSim(bin, dir string, env []string) (*sim, error) {
	keys := filepath.Join(dir, "keys")
	if out, err := exec.Command(bin, "keygen", "-out", keys).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("keygen: %v\n%s", err, out)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(keys, name))
		if err != nil {
			log.Fatal(err)
		}
		return string(b)
	}
	c := creds{
		mchid: read("mchid.txt"), appid: read("appid.txt"), serial: read("merchant_serial_no.txt"),
		apiV3Key: read("apiv3_key.txt"), privateKey: read("apiclient_key.pem"),
		platformCert: read("platform_cert.pem"), platformSerial: read("platform_serial_no.txt"),
		pubKey: read("pub_key.pem"), pubKeyID: read("pub_key_id.txt"),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	logPath := filepath.Join(dir, "sim.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(append(os.Environ(), "WECHATPAYSIM_KEY_DIR="+keys, "WECHATPAYSIM_ADDR="+addr,
		"WECHATPAYSIM_LOG_LEVEL=warn", "WECHATPAYSIM_TIME_SCALE=600"), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	logf.Close()
	s := &sim{base: "http://" + addr, cmd: cmd, log: logPath, c: c}
	for range 100 {
		if resp, err := http.Get(s.base + "/_sim/healthz"); err == nil {
			resp.Body.Close()
			return s, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.stop()
	return nil, errors.New("the simulator did not become healthy")
}

func (s *sim) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

func (s *sim) logText() string {
	b, _ := os.ReadFile(s.log)
	return string(b)
}

// control calls the simulator's control API and decodes its answer into out.
func (s *sim) control(method, path string, body any, out any) error {
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.base+path, r)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func (s *sim) client() (*wechat.ClientV3, error) {
	c, err := wechat.NewClientV3(s.c.mchid, s.c.serial, s.c.apiV3Key, s.c.privateKey)
	if err != nil {
		return nil, err
	}
	c.SetProxyHost(s.base)
	return c, nil
}

func orderBM(c creds, no string, total int, notifyURL string) gopay.BodyMap {
	bm := make(gopay.BodyMap)
	bm.Set("appid", c.appid).Set("description", "Image形象店-深圳腾大-QQ公仔 <gift> & co").Set("out_trade_no", no).
		Set("notify_url", notifyURL).Set("time_expire", time.Now().Add(30*time.Minute).Format(time.RFC3339)).
		SetBodyMap("amount", func(b gopay.BodyMap) { b.Set("total", total).Set("currency", "CNY") })
	return bm
}

// merchant is the merchant's notify_url: it parses each notification with gopay, checks
// the timestamp window itself (gopay does not), verifies and decrypts.
type merchant struct {
	srv      *httptest.Server
	keys     func() map[string]*rsa.PublicKey
	apiV3Key string
	mu       sync.Mutex
	results  []notified
	ch       chan notified
}

type notified struct {
	raw      []byte
	header   http.Header
	serial   string
	event    string
	result   *wechat.V3DecryptPayResult
	refund   *wechat.V3DecryptRefundResult
	refusal  string
	verified bool // the library's signature check passed
}

func newMerchant(apiV3Key string, keys func() map[string]*rsa.PublicKey) *merchant {
	m := &merchant{keys: keys, apiV3Key: apiV3Key, ch: make(chan notified, 64)}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	return m
}

func (m *merchant) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(raw))
	n := notified{raw: raw, header: r.Header.Clone()}
	n.refusal = m.check(r, &n)
	m.ch <- n
	if n.refusal != "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"code":"FAIL","message":"`+strings.ReplaceAll(n.refusal, `"`, `'`)+`"}`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&wechat.V3NotifyRsp{Code: gopay.SUCCESS, Message: "成功"})
}

func (m *merchant) check(r *http.Request, n *notified) string {
	req, err := wechat.V3ParseNotify(r)
	if err != nil {
		return "parse: " + err.Error()
	}
	n.serial = req.SignInfo.HeaderSerial
	if err := req.VerifySignByPKMap(m.keys()); err != nil {
		return "signature: " + err.Error()
	}
	n.verified = true
	ts, err := strconv.ParseInt(req.SignInfo.HeaderTimestamp, 10, 64)
	if age := time.Since(time.Unix(ts, 0)); err != nil || age > 5*time.Minute || age < -5*time.Minute {
		return fmt.Sprintf("timestamp %s is outside ±5 minutes", req.SignInfo.HeaderTimestamp)
	}
	n.event = req.EventType
	if strings.HasPrefix(req.EventType, "REFUND.") {
		res, err := req.DecryptRefundCipherText(m.apiV3Key)
		if err != nil {
			return "decrypt: " + err.Error()
		}
		n.refund = res
		return ""
	}
	res, err := req.DecryptPayCipherText(m.apiV3Key)
	if err != nil {
		return "decrypt: " + err.Error()
	}
	n.result = res
	return ""
}

func (m *merchant) next() (notified, error) {
	select {
	case n := <-m.ch:
		return n, nil
	case <-time.After(10 * time.Second):
		return notified{}, errors.New("no notification within 10 s")
	}
}

var ctx = context.Background()

// step runs one named check and wraps its error with the name.
func step(name string, f func() error) error {
	if err := f(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	log.Printf("  ok %s", name)
	return nil
}

// checkBoth runs everything against a merchant with a platform certificate and the
// public key switched on.
func checkBoth(s *sim) error {
	c, err := s.client()
	if err != nil {
		return err
	}
	m := newMerchant(s.c.apiV3Key, c.WxPublicKeyMap)
	defer m.srv.Close()
	run := func(name string, f func() error) {
		if err == nil {
			err = step(name, f)
		}
	}
	run("AutoVerifySign via GET /v3/certificates", func() error {
		if err := c.AutoVerifySign(false); err != nil {
			return err
		}
		if c.WxSerialNo != s.c.platformSerial || len(c.WxPublicKeyMap()) != 1 {
			return fmt.Errorf("platform serial %q, want %q", c.WxSerialNo, s.c.platformSerial)
		}
		return nil
	})
	run("orders of every kind, a repeat, OUT_TRADE_NO_USED", func() error { return checkOrders(s, c, m) })
	run("query NOTPAY, JSAPI and App payment calls signed by gopay", func() error { return checkCashier(s, c) })
	run("payment, notification verified and decrypted, query SUCCESS", func() error { return checkPayment(s, c, m) })
	run("close 204 verified, close a paid order refused", func() error { return checkClose(s, c) })
	run("refusals: tampered request, forged answer, SYSTEM_ERROR then repeat, throttle", func() error { return checkRefusals(s, c) })
	run("notification refusals: probe, replay older than 5 minutes, tampered body", func() error { return checkNotificationRefusals(s, m) })
	run("refunds: PROCESSING, a repeat, over-refund, too soon, REFUND.SUCCESS decrypted, query, unknown refund", func() error { return checkRefunds(s, c, m) })
	run("trade bill: not ready, no trades, V3BillTradeBill and V3BillDownLoadBill, plain and GZIP", func() error { return checkBill(s, c) })
	run("public-key mode (AutoVerifySignByPublicKey), notifications signed with the public key", func() error { return checkPublicKey(s, m) })
	return err
}

func checkOrders(s *sim, c *wechat.ClientV3, m *merchant) error {
	native, err := c.V3TransactionNative(ctx, orderBM(s.c, "GOPAY-NATIVE-1", 1, m.srv.URL+"/notify"))
	if err != nil || native.Code != 0 || !strings.HasPrefix(native.Response.CodeUrl, "weixin://wxpay/bizpayurl?pr=") {
		return fmt.Errorf("native: %v %+v", err, native)
	}
	jsapi := orderBM(s.c, "GOPAY-JSAPI-1", 2, m.srv.URL+"/notify")
	jsapi.SetBodyMap("payer", func(b gopay.BodyMap) { b.Set("openid", "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o") })
	js, err := c.V3TransactionJsapi(ctx, jsapi)
	if err != nil || js.Code != 0 || !regexp.MustCompile(`^wx\d{14}`).MatchString(js.Response.PrepayId) {
		return fmt.Errorf("jsapi: %v %+v", err, js)
	}
	h5bm := orderBM(s.c, "GOPAY-H5-1", 3, m.srv.URL+"/notify")
	h5bm.SetBodyMap("scene_info", func(b gopay.BodyMap) {
		b.Set("payer_client_ip", "127.0.0.1").SetBodyMap("h5_info", func(h gopay.BodyMap) { h.Set("type", "Wap") })
	})
	h5, err := c.V3TransactionH5(ctx, h5bm)
	if err != nil || h5.Code != 0 || !strings.HasPrefix(h5.Response.H5Url, "https://wx.tenpay.com/cgi-bin/mmpayweb-bin/checkmweb?prepay_id=") {
		return fmt.Errorf("h5: %v %+v", err, h5)
	}
	app, err := c.V3TransactionApp(ctx, orderBM(s.c, "GOPAY-APP-1", 4, m.srv.URL+"/notify"))
	if err != nil || app.Code != 0 || app.Response.PrepayId == "" {
		return fmt.Errorf("app: %v %+v", err, app)
	}
	log.Printf("    native %s, jsapi %s, h5 %s, app %s", native.Response.CodeUrl, js.Response.PrepayId, h5.Response.H5Url, app.Response.PrepayId)
	// The same parameters again: a repeat. gopay sets time_expire once per BodyMap.
	bm := orderBM(s.c, "GOPAY-REPEAT-1", 5, m.srv.URL+"/notify")
	first, err1 := c.V3TransactionNative(ctx, bm)
	again, err2 := c.V3TransactionNative(ctx, bm)
	if err1 != nil || err2 != nil || first.Code != 0 || again.Code != 0 || first.Response.CodeUrl != again.Response.CodeUrl {
		return fmt.Errorf("repeat: %v %v %+v %+v", err1, err2, first, again)
	}
	bm.SetBodyMap("amount", func(b gopay.BodyMap) { b.Set("total", 6).Set("currency", "CNY") })
	used, err := c.V3TransactionNative(ctx, bm)
	if err != nil || used.Code != http.StatusForbidden || used.ErrResponse.Code != "OUT_TRADE_NO_USED" {
		return fmt.Errorf("other parameters: %v %+v", err, used)
	}
	other, err := c.V3TransactionH5(ctx, h5WithNo(h5bm, "GOPAY-REPEAT-1"))
	if err != nil || other.Code != http.StatusForbidden || other.ErrResponse.Code != "OUT_TRADE_NO_USED" {
		return fmt.Errorf("another trade type: %v %+v", err, other)
	}
	log.Printf("    repeat answered the same code_url; other parameters and another trade type: %d %s", used.Code, used.ErrResponse.Code)
	return nil
}

func h5WithNo(bm gopay.BodyMap, no string) gopay.BodyMap {
	out := make(gopay.BodyMap)
	for k, v := range bm {
		out[k] = v
	}
	out.Set("out_trade_no", no)
	return out
}

func checkCashier(s *sim, c *wechat.ClientV3) error {
	q, err := c.V3TransactionQueryOrder(ctx, wechat.OutTradeNo, "GOPAY-JSAPI-1")
	if err != nil || q.Code != 0 || q.Response.TradeState != "NOTPAY" || q.Response.TransactionId != "" || q.Response.Payer != nil {
		return fmt.Errorf("query NOTPAY: %v %+v", err, q)
	}
	var order struct {
		PrepayID string `json:"prepay_id"`
	}
	if err := s.control("GET", "/_sim/orders/GOPAY-JSAPI-1", nil, &order); err != nil {
		return err
	}
	jsapi, err := c.PaySignOfJSAPI(s.c.appid, order.PrepayID)
	if err != nil {
		return err
	}
	var jsAns map[string]any
	if err := s.control("POST", "/_sim/cashier/jsapi", jsapi, &jsAns); err != nil || jsAns["err_msg"] != "get_brand_wcpay_request:ok" {
		return fmt.Errorf("JSAPI paySign: %v %v", err, jsAns)
	}
	if err := s.control("GET", "/_sim/orders/GOPAY-APP-1", nil, &order); err != nil {
		return err
	}
	app, err := c.PaySignOfApp(s.c.appid, order.PrepayID)
	if err != nil {
		return err
	}
	var appAns map[string]any
	if err := s.control("POST", "/_sim/cashier/app", app, &appAns); err != nil || appAns["errCode"] != 0.0 {
		return fmt.Errorf("App sign: %v %v", err, appAns)
	}
	log.Printf("    JSAPI paySign and App sign from gopay accepted by the cashier; both orders paid")
	return nil
}

func checkPayment(s *sim, c *wechat.ClientV3, m *merchant) error {
	// The JSAPI and App payments above each sent a notification.
	for range 2 {
		n, err := m.next()
		if err != nil || n.refusal != "" {
			return fmt.Errorf("notification of the cashier payments: %v %s", err, n.refusal)
		}
	}
	var paid map[string]any
	if err := s.control("POST", "/_sim/orders/GOPAY-NATIVE-1/pay", map[string]any{"openid": "o-gopay-buyer"}, &paid); err != nil {
		return err
	}
	n, err := m.next()
	if err != nil {
		return err
	}
	if n.refusal != "" || n.result == nil || n.result.OutTradeNo != "GOPAY-NATIVE-1" || n.result.TradeState != "SUCCESS" ||
		n.result.Payer.Openid != "o-gopay-buyer" || n.serial != s.c.platformSerial {
		return fmt.Errorf("notification: %s %+v", n.refusal, n.result)
	}
	q, err := c.V3TransactionQueryOrder(ctx, wechat.OutTradeNo, "GOPAY-NATIVE-1")
	if err != nil || q.Code != 0 || q.Response.TradeState != "SUCCESS" || q.Response.TransactionId != n.result.TransactionId ||
		!regexp.MustCompile(`^42000\d{23}$`).MatchString(q.Response.TransactionId) || q.Response.Amount.PayerTotal != 1 {
		return fmt.Errorf("query SUCCESS: %v %+v", err, q)
	}
	byID, err := c.V3TransactionQueryOrder(ctx, wechat.TransactionId, q.Response.TransactionId)
	if err != nil || byID.Code != 0 || byID.Response.OutTradeNo != "GOPAY-NATIVE-1" {
		return fmt.Errorf("query by transaction_id: %v %+v", err, byID)
	}
	log.Printf("    notification %s verified (serial %s) and decrypted; query SUCCESS %s verified", n.result.TransactionId, n.serial, q.Response.SuccessTime)
	return nil
}

func checkClose(s *sim, c *wechat.ClientV3) error {
	closed, err := c.V3TransactionCloseOrder(ctx, "GOPAY-H5-1")
	if err != nil || closed.Code != 0 || closed.SignInfo.HeaderSignature == "" {
		return fmt.Errorf("close: %v %+v", err, closed)
	}
	q, err := c.V3TransactionQueryOrder(ctx, wechat.OutTradeNo, "GOPAY-H5-1")
	if err != nil || q.Response.TradeState != "CLOSED" {
		return fmt.Errorf("after close: %v %+v", err, q)
	}
	again, err := c.V3TransactionCloseOrder(ctx, "GOPAY-H5-1")
	if err != nil || again.Code != 0 {
		return fmt.Errorf("close again: %v %+v", err, again)
	}
	paid, err := c.V3TransactionCloseOrder(ctx, "GOPAY-NATIVE-1")
	if err != nil || paid.Code != http.StatusBadRequest || paid.ErrResponse.Code != "ORDERPAID" {
		return fmt.Errorf("close a paid order: %v %+v", err, paid)
	}
	log.Printf("    close: 204 with a verified signature (twice); a paid order: %d %s", paid.Code, paid.ErrResponse.Code)
	return nil
}

// tamper rewrites the amount of an order in transit, after gopay signed it.
type tamper struct{ next http.RoundTripper }

func (t tamper) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Method == http.MethodPost {
		b, _ := io.ReadAll(r.Body)
		b = bytes.Replace(b, []byte(`"total":100`), []byte(`"total":1`), 1)
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	}
	return t.next.RoundTrip(r)
}

func checkRefusals(s *sim, c *wechat.ClientV3) error {
	tampered, err := s.client()
	if err != nil {
		return err
	}
	tampered.GetHttpClient().SetTransport(tamper{next: http.DefaultTransport})
	r, err := tampered.V3TransactionNative(ctx, orderBM(s.c, "GOPAY-TAMPER-1", 100, "https://example.com/n"))
	if err != nil || r.Code != http.StatusUnauthorized || r.ErrResponse.Code != "SIGN_ERROR" {
		return fmt.Errorf("tampered request: %v %+v", err, r)
	}
	log.Printf("    tampered request: %d %s %q (err == nil, as gopay reports non-2xx)", r.Code, r.ErrResponse.Code, r.ErrResponse.Message)

	if err := s.control("POST", "/_sim/faults/api", map[string]any{"mode": "bad_signature", "path": "/v3/pay/transactions/out-trade-no/"}, nil); err != nil {
		return err
	}
	forged, err := c.V3TransactionQueryOrder(ctx, wechat.OutTradeNo, "GOPAY-NATIVE-1")
	if err == nil || forged.Code != 0 || !errors.Is(err, gopay.VerifySignatureErr) {
		return fmt.Errorf("a forged answer was trusted: %v", err)
	}
	log.Printf("    forged answer signature: rsp.Code 0 with err %v", err)

	if err := s.control("POST", "/_sim/faults/api", map[string]any{"mode": "system_error", "path": "/v3/pay/transactions/native", "after_processing": true}, nil); err != nil {
		return err
	}
	bm := orderBM(s.c, "GOPAY-SYSERR-1", 7, "https://example.com/n")
	lost, err := c.V3TransactionNative(ctx, bm)
	if err != nil || lost.Code != http.StatusInternalServerError || lost.ErrResponse.Code != "SYSTEM_ERROR" {
		return fmt.Errorf("system error: %v %+v", err, lost)
	}
	retry, err := c.V3TransactionNative(ctx, bm)
	if err != nil || retry.Code != 0 || retry.Response.CodeUrl == "" {
		return fmt.Errorf("retry after SYSTEM_ERROR: %v %+v", err, retry)
	}
	log.Printf("    SYSTEM_ERROR after the order was taken, then the retry answered 200 %s", retry.Response.CodeUrl)

	if err := s.control("POST", "/_sim/faults/throttle", map[string]any{"rate": 0.5, "burst": 1}, nil); err != nil {
		return err
	}
	a, _ := c.V3TransactionQueryOrder(ctx, wechat.OutTradeNo, "GOPAY-NATIVE-1")
	b, _ := c.V3TransactionQueryOrder(ctx, wechat.OutTradeNo, "GOPAY-NATIVE-1")
	if err := s.control("DELETE", "/_sim/faults", nil, nil); err != nil {
		return err
	}
	if a.Code != 0 || b.Code != http.StatusTooManyRequests || b.ErrResponse.Code != "FREQUENCY_LIMITED" {
		return fmt.Errorf("throttle: %+v then %+v", a, b)
	}
	log.Printf("    throttled: %d %s", b.Code, b.ErrResponse.Code)
	return nil
}

type attempt struct {
	ID           string `json:"id"`
	Kind         string `json:"kind"`
	OutTradeNo   string `json:"out_trade_no"`
	StatusCode   int    `json:"status_code"`
	Acknowledged bool   `json:"acknowledged"`
}

func checkNotificationRefusals(s *sim, m *merchant) error {
	var attempts []attempt
	if err := s.control("GET", "/_sim/notifications?out_trade_no=GOPAY-NATIVE-1", nil, &attempts); err != nil || len(attempts) == 0 {
		return fmt.Errorf("attempts: %v %v", err, attempts)
	}
	id := attempts[0].ID
	var probe, replay attempt
	if err := s.control("POST", "/_sim/notifications/"+id+"/probe", nil, &probe); err != nil {
		return err
	}
	n, err := m.next()
	if err != nil || n.verified || probe.Acknowledged || probe.StatusCode != http.StatusUnauthorized {
		return fmt.Errorf("probe accepted: %v %+v %s", err, probe, n.refusal)
	}
	log.Printf("    signature probe %s refused: %s", n.header.Get("Wechatpay-Signature")[:19]+"…", n.refusal)
	if err := s.control("POST", "/_sim/notifications/"+id+"/replay", map[string]any{"age_seconds": 360}, &replay); err != nil {
		return err
	}
	n, err = m.next()
	if err != nil || !n.verified || n.result != nil || replay.Acknowledged || replay.StatusCode != http.StatusUnauthorized {
		return fmt.Errorf("replay: %v verified=%v %+v", err, n.verified, replay)
	}
	log.Printf("    replay 6 minutes old: gopay's VerifySignByPKMap passes (it checks no timestamp), the window check refuses: %s", n.refusal)
	// A tampered body, with the replayed delivery's headers: gopay's verification fails.
	body := bytes.Replace(n.raw, []byte(`"summary":"支付成功"`), []byte(`"summary":"支付成功 "`), 1)
	req := httptest.NewRequest(http.MethodPost, "/notify", bytes.NewReader(body))
	req.Header = n.header
	parsed, err := wechat.V3ParseNotify(req)
	if err != nil {
		return err
	}
	if err := parsed.VerifySignByPKMap(m.keys()); err == nil {
		return errors.New("a tampered notification verified")
	} else {
		log.Printf("    tampered notification body: %v", err)
	}
	return nil
}

func checkPublicKey(s *sim, platform *merchant) error {
	c, err := s.client()
	if err != nil {
		return err
	}
	if err := c.AutoVerifySignByPublicKey([]byte(s.c.pubKey), s.c.pubKeyID); err != nil {
		return err
	}
	pub, err := xpem.DecodePublicKey([]byte(s.c.pubKey))
	if err != nil {
		return err
	}
	both := func() map[string]*rsa.PublicKey {
		keys := platform.keys()
		keys[s.c.pubKeyID] = pub
		return keys
	}
	m := newMerchant(s.c.apiV3Key, both)
	defer m.srv.Close()
	r, err := c.V3TransactionNative(ctx, orderBM(s.c, "GOPAY-PUBKEY-1", 9, m.srv.URL+"/notify"))
	if err != nil || r.Code != 0 || r.SignInfo.HeaderSerial != s.c.pubKeyID {
		return fmt.Errorf("native in public-key mode: %v %+v", err, r)
	}
	if err := s.control("POST", "/_sim/merchants/"+s.c.mchid+"/notify_signer", map[string]string{"signer": "public_key"}, nil); err != nil {
		return err
	}
	if err := s.control("POST", "/_sim/orders/GOPAY-PUBKEY-1/pay", map[string]any{}, nil); err != nil {
		return err
	}
	n, err := m.next()
	if err != nil || n.refusal != "" || n.serial != s.c.pubKeyID {
		return fmt.Errorf("notification signed with the public key: %v %q serial %s", err, n.refusal, n.serial)
	}
	req := httptest.NewRequest(http.MethodPost, "/notify", bytes.NewReader(n.raw))
	req.Header = n.header
	parsed, _ := wechat.V3ParseNotify(req)
	if err := parsed.VerifySignByPK(pub); err != nil {
		return fmt.Errorf("VerifySignByPK: %w", err)
	}
	q, err := c.V3TransactionQueryOrder(ctx, wechat.OutTradeNo, "GOPAY-PUBKEY-1")
	if err != nil || q.Code != 0 || q.Response.TradeState != "SUCCESS" || q.SignInfo.HeaderSerial != s.c.pubKeyID {
		return fmt.Errorf("query in public-key mode: %v %+v", err, q)
	}
	closed, err := c.V3TransactionCloseOrder(ctx, "GOPAY-REPEAT-1")
	if err != nil || closed.Code != 0 || closed.SignInfo.HeaderSerial != s.c.pubKeyID {
		return fmt.Errorf("close in public-key mode: %v %+v", err, closed)
	}
	log.Printf("    answers (204 too) and the notification signed by %s, verified with VerifySignByPKMap and VerifySignByPK", s.c.pubKeyID)
	return nil
}

// checkPublicKeyOnly: a merchant without a platform certificate gets 404 for
// /v3/certificates, so AutoVerifySign fails, and works with the public key.
func checkPublicKeyOnly(s *sim) error {
	c, err := s.client()
	if err != nil {
		return err
	}
	wechat.SetProxyHost(s.base) // the package-level proxy, which GetPlatformCerts uses
	certs, err := wechat.GetPlatformCerts(ctx, s.c.mchid, s.c.apiV3Key, s.c.serial, s.c.privateKey)
	if err != nil || certs.Code != http.StatusNotFound || certs.ErrResponse.Code != "RESOURCE_NOT_EXISTS" {
		return fmt.Errorf("GET /v3/certificates: %v %+v", err, certs)
	}
	if err := c.AutoVerifySign(false); err == nil {
		return errors.New("AutoVerifySign succeeded without a platform certificate")
	}
	log.Printf("  ok GET /v3/certificates: %d %s %q", certs.Code, certs.ErrResponse.Code, certs.ErrResponse.Message)
	if err := c.AutoVerifySignByPublicKey([]byte(s.c.pubKey), s.c.pubKeyID); err != nil {
		return err
	}
	r, err := c.V3TransactionNative(ctx, orderBM(s.c, "GOPAY-PKONLY-1", 1, "https://example.com/n"))
	if err != nil || r.Code != 0 {
		return fmt.Errorf("native: %v %+v", err, r)
	}
	closed, err := c.V3TransactionCloseOrder(ctx, "GOPAY-PKONLY-1")
	if err != nil || closed.Code != 0 || closed.SignInfo.HeaderSerial != s.c.pubKeyID {
		return fmt.Errorf("close: %v %+v", err, closed)
	}
	log.Printf("  ok AutoVerifySignByPublicKey: order and close verified with %s", s.c.pubKeyID)
	return nil
}

// expectation is one thing a check expects of an answer.
type expectation struct {
	name string
	ok   bool
}

func is(name string, ok bool) expectation { return expectation{name: name, ok: ok} }

// expect returns an error naming the first expectation about v that does not hold.
func expect(what string, v any, es ...expectation) error {
	for _, e := range es {
		if !e.ok {
			return fmt.Errorf("%s: not %s: %+v", what, e.name, v)
		}
	}
	return nil
}

// refused expects a refusal with status and code, which gopay reports with err == nil;
// got reads the answer's status and code once err is known to be nil.
func refused(what string, err error, status int, code string, got func() (int, string)) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	gotStatus, gotCode := got()
	return expect(what, fmt.Sprintf("%d %s", gotStatus, gotCode), is(fmt.Sprintf("%d %s", status, code), gotStatus == status && gotCode == code))
}

// checkRefunds pays an order and refunds part of it with gopay, then another order in
// full by transaction_id.
func checkRefunds(s *sim, c *wechat.ClientV3, m *merchant) error {
	if _, err := c.V3TransactionNative(ctx, orderBM(s.c, "GOPAY-REFUND-1", 100, m.srv.URL+"/notify")); err != nil {
		return err
	}
	if err := s.control("POST", "/_sim/orders/GOPAY-REFUND-1/pay", map[string]any{}, nil); err != nil {
		return err
	}
	if n, err := m.next(); err != nil || n.refusal != "" || n.result == nil {
		return fmt.Errorf("payment notification: %v %+v", err, n)
	}
	bm := refundBM("GOPAY-REFUND-1", "GOPAY-R-1", 30, 100, m.srv.URL+"/refund-notify")
	refundID, err := checkRefundTaken(c, bm)
	if err != nil {
		return err
	}
	if err := checkRefundRefusals(c); err != nil {
		return err
	}
	if err := checkRefundSucceeded(c, m, bm, refundID); err != nil {
		return err
	}
	return checkRefundByTransactionID(c, m)
}

// checkRefundTaken: the first answer is PROCESSING, verified, without success_time.
func checkRefundTaken(c *wechat.ClientV3, bm gopay.BodyMap) (string, error) {
	r, err := c.V3Refund(ctx, bm)
	if err != nil {
		return "", fmt.Errorf("refund: %w", err)
	}
	if err := expect("refund", r, is("200", r.Code == 0)); err != nil {
		return "", err
	}
	res := r.Response
	if err := expect("refund", res,
		is("PROCESSING", res.Status == "PROCESSING"),
		is("without success_time", res.SuccessTime == ""),
		is("a 29-digit refund_id from 503", regexp.MustCompile(`^503\d{26}$`).MatchString(res.RefundId)),
		is("30 of 100", res.Amount != nil && res.Amount.Refund == 30 && res.Amount.Total == 100),
	); err != nil {
		return "", err
	}
	log.Printf("    refund %s %s (answer verified), create_time %s", res.RefundId, res.Status, res.CreateTime)
	return res.RefundId, nil
}

// checkRefundRefusals: an over-refund, and a second refund within a minute.
func checkRefundRefusals(c *wechat.ClientV3) error {
	over, err := c.V3Refund(ctx, refundBM("GOPAY-REFUND-1", "GOPAY-R-2", 80, 100, ""))
	if err := refused("over-refund", err, http.StatusBadRequest, "INVALID_REQUEST", func() (int, string) { return over.Code, over.ErrResponse.Code }); err != nil {
		return err
	}
	soon, err := c.V3Refund(ctx, refundBM("GOPAY-REFUND-1", "GOPAY-R-3", 10, 100, ""))
	if err := refused("a second refund within a minute", err, http.StatusTooManyRequests, "FREQUENCY_LIMITED", func() (int, string) { return soon.Code, soon.ErrResponse.Code }); err != nil {
		return err
	}
	log.Printf("    over-refund: %d %s %q; a second refund within a minute: %d %s", over.Code, over.ErrResponse.Code, over.ErrResponse.Message, soon.Code, soon.ErrResponse.Code)
	return nil
}

// checkRefundSucceeded: the REFUND.SUCCESS notification, the same request again, the
// refund query, and an unknown refund.
func checkRefundSucceeded(c *wechat.ClientV3, m *merchant, bm gopay.BodyMap, refundID string) error {
	n, err := m.next()
	if err != nil {
		return err
	}
	res := n.refund
	if err := expect("refund notification", n, is("accepted", n.refusal == ""), is("REFUND.SUCCESS", n.event == "REFUND.SUCCESS"), is("decrypted", res != nil)); err != nil {
		return err
	}
	if err := expect("refund notification", res,
		is("GOPAY-R-1", res.OutRefundNo == "GOPAY-R-1"), is("SUCCESS", res.RefundStatus == "SUCCESS"),
		is("the refund's id", res.RefundId == refundID), is("with success_time", res.SuccessTime != ""),
		is("30 to the payer", res.Amount != nil && res.Amount.Refund == 30 && res.Amount.PayerRefund == 30),
	); err != nil {
		return err
	}
	again, err := c.V3Refund(ctx, bm)
	if err != nil {
		return err
	}
	if err := expect("the same refund again", again, is("200", again.Code == 0), is("the same refund", again.Response.RefundId == refundID), is("SUCCESS", again.Response.Status == "SUCCESS")); err != nil {
		return err
	}
	q, err := c.V3RefundQuery(ctx, "GOPAY-R-1", nil)
	if err != nil {
		return err
	}
	if err := expect("refund query", q, is("200", q.Code == 0), is("SUCCESS", q.Response.Status == "SUCCESS"), is("the notification's success_time", q.Response.SuccessTime == res.SuccessTime)); err != nil {
		return err
	}
	log.Printf("    REFUND.SUCCESS verified and decrypted (DecryptRefundCipherText); the same request again and V3RefundQuery answer SUCCESS %s", q.Response.SuccessTime)
	unknown, err := c.V3RefundQuery(ctx, "GOPAY-NO-SUCH-REFUND", nil)
	if err := refused("unknown refund", err, http.StatusNotFound, "RESOURCE_NOT_EXISTS", func() (int, string) { return unknown.Code, unknown.ErrResponse.Code }); err != nil {
		return err
	}
	log.Printf("    unknown refund: %d %s %q", unknown.Code, unknown.ErrResponse.Code, unknown.ErrResponse.Message)
	return nil
}

// checkRefundByTransactionID refunds a paid order in full by its transaction_id; the
// order then queries REFUND.
func checkRefundByTransactionID(c *wechat.ClientV3, m *merchant) error {
	order, err := c.V3TransactionQueryOrder(ctx, wechat.OutTradeNo, "GOPAY-JSAPI-1")
	if err != nil || order.Code != 0 {
		return fmt.Errorf("query: %v %+v", err, order)
	}
	byID := refundBM("", "GOPAY-R-4", 2, 2, m.srv.URL+"/refund-notify")
	byID.Set("transaction_id", order.Response.TransactionId)
	full, err := c.V3Refund(ctx, byID)
	if err != nil || full.Code != 0 || full.Response.OutTradeNo != "GOPAY-JSAPI-1" {
		return fmt.Errorf("refund by transaction_id: %v %+v", err, full)
	}
	if n, err := m.next(); err != nil || n.refund == nil || n.refund.OutRefundNo != "GOPAY-R-4" {
		return fmt.Errorf("its notification: %v %+v", err, n)
	}
	after, err := c.V3TransactionQueryOrder(ctx, wechat.OutTradeNo, "GOPAY-JSAPI-1")
	if err != nil || after.Response.TradeState != "REFUND" {
		return fmt.Errorf("a refunded order: %v %+v", err, after)
	}
	log.Printf("    refund by transaction_id, then the order queries %s", after.Response.TradeState)
	return nil
}

func refundBM(outTradeNo, outRefundNo string, amount, total int, notifyURL string) gopay.BodyMap {
	bm := make(gopay.BodyMap)
	if outTradeNo != "" {
		bm.Set("out_trade_no", outTradeNo)
	}
	bm.Set("out_refund_no", outRefundNo).Set("reason", "商品已售完").
		SetBodyMap("amount", func(b gopay.BodyMap) { b.Set("refund", amount).Set("total", total).Set("currency", "CNY") })
	if notifyURL != "" {
		bm.Set("notify_url", notifyURL)
	}
	return bm
}

// tradeBill asks for a day's trade bill (tar "" or "GZIP").
func tradeBill(c *wechat.ClientV3, day, tar string) (*wechat.BillRsp, error) {
	bm := make(gopay.BodyMap)
	bm.Set("bill_date", day).Set("bill_type", "ALL")
	if tar != "" {
		bm.Set("tar_type", tar)
	}
	return c.V3BillTradeBill(ctx, bm)
}

// checkBill fetches today's trade bill, released early through the control API, with
// gopay, plain and GZIP, and checks its format and its hash.
func checkBill(s *sim, c *wechat.ClientV3) error {
	beijing := time.Now().In(time.FixedZone("CST", 8*3600))
	today, yesterday := beijing.Format("2006-01-02"), beijing.AddDate(0, 0, -1).Format("2006-01-02")
	creating, err := tradeBill(c, today, "")
	if err := refused("today's bill before it is ready", err, http.StatusBadRequest, "STATEMENT_CREATING", func() (int, string) { return creating.Code, creating.ErrResponse.Code }); err != nil {
		return err
	}
	for _, day := range []string{today, yesterday} {
		if err := s.control("POST", "/_sim/bills/"+day+"/release", nil, nil); err != nil {
			return err
		}
	}
	none, err := tradeBill(c, yesterday, "")
	if err := refused("a day without trades", err, http.StatusBadRequest, "NO_STATEMENT_EXIST", func() (int, string) { return none.Code, none.ErrResponse.Code }); err != nil {
		return err
	}
	log.Printf("    today's bill before it is ready: %s; a day without trades: %s", creating.ErrResponse.Code, none.ErrResponse.Code)
	file, err := downloadBill(c, today, "")
	if err != nil {
		return err
	}
	rows, err := checkBillFormat(file)
	if err != nil {
		return err
	}
	log.Printf("    plain bill: %d bytes, %d rows, BOM, CRLF, backticks, summary; its SHA1 matches hash_value", len(file), rows)
	unpacked, err := downloadBill(c, today, "GZIP")
	if err != nil {
		return err
	}
	if !bytes.Equal(unpacked, file) {
		return errors.New("the GZIP bill unpacks to another bill than the plain one")
	}
	log.Printf("    GZIP bill unpacked equal to the plain bill, hash_value over the plain bill")
	return nil
}

// downloadBill asks for a day's bill, downloads it with V3BillDownLoadBill, unpacks a
// GZIP one, and checks hash_value against the plain bill's SHA1.
func downloadBill(c *wechat.ClientV3, day, tar string) ([]byte, error) {
	bill, err := tradeBill(c, day, tar)
	if err != nil {
		return nil, fmt.Errorf("V3BillTradeBill %s: %w", tar, err)
	}
	if err := expect("V3BillTradeBill "+tar, bill, is("200", bill.Code == 0), is("SHA1", bill.Response.HashType == "SHA1"),
		is("a download_url on the production host", strings.HasPrefix(bill.Response.DownloadUrl, "https://api.mch.weixin.qq.com/v3/billdownload/file?token="))); err != nil {
		return nil, err
	}
	file, err := c.V3BillDownLoadBill(ctx, bill.Response.DownloadUrl)
	if err != nil {
		return nil, fmt.Errorf("V3BillDownLoadBill %s: %w", tar, err)
	}
	if tar == "GZIP" {
		zr, err := gzip.NewReader(bytes.NewReader(file))
		if err != nil {
			return nil, fmt.Errorf("gunzip: %w", err)
		}
		if file, err = io.ReadAll(zr); err != nil {
			return nil, fmt.Errorf("gunzip: %w", err)
		}
	}
	if got := sha1Hex(file); got != bill.Response.HashValue {
		return nil, fmt.Errorf("%s bill: hash_value %s, the bill's SHA1 %s", tar, bill.Response.HashValue, got)
	}
	return file, nil
}

func sha1Hex(b []byte) string {
	sum := sha1.Sum(b)
	return hex.EncodeToString(sum[:])
}

// checkBillFormat checks the bill's bytes as WeChat Pay writes them and returns its
// number of rows.
func checkBillFormat(file []byte) (int, error) {
	text := string(file)
	if err := expect("the bill", "", is("with its BOM", strings.HasPrefix(text, "\ufeff")), is("ended by CRLF", strings.HasSuffix(text, "\r\n")),
		is("with CRLF line ends only", strings.Count(text, "\n") == strings.Count(text, "\r\n"))); err != nil {
		return 0, err
	}
	lines := strings.Split(strings.TrimSuffix(strings.TrimPrefix(text, "\ufeff"), "\r\n"), "\r\n")
	if len(lines) < 4 || strings.Contains(lines[0], "`") || len(strings.Split(lines[0], ",")) != 27 {
		return 0, fmt.Errorf("header %q", lines[0])
	}
	rows := lines[1 : len(lines)-2]
	refunds, err := countRefundRows(rows)
	if err != nil {
		return 0, err
	}
	summary := strings.Split(strings.TrimPrefix(lines[len(lines)-1], "`"), ",`")
	return len(rows), expect("the summary", lines[len(lines)-2:],
		is("headed", lines[len(lines)-2] == "总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额"),
		is("of 7 fields", len(summary) == 7), is("counting the rows float-style", summary[0] == strconv.Itoa(len(rows))+".0"),
		is("after two refund rows", refunds == 2))
}

// countRefundRows checks each row's 27 backtick-prefixed fields and counts the
// successful refunds.
func countRefundRows(rows []string) (int, error) {
	refunds := 0
	for _, row := range rows {
		fields := strings.Split(row, ",`")
		if !strings.HasPrefix(row, "`") || len(fields) != 27 {
			return 0, fmt.Errorf("row %q", row)
		}
		if fields[9] == "REFUND" && fields[19] == "SUCCESS" && fields[18] == "ORIGINAL" {
			refunds++
		}
	}
	return refunds, nil
}
