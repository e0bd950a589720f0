package wechatpaysim_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/wechatpaysim"
)

// A SYSTEM_ERROR after processing: the order was taken, the client cannot know; a retry
// with the same parameters answers 200 as a repeat, and a query finds it. Before
// processing nothing is taken.
func TestSystemErrorAfterProcessing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	if code := h.control(t, "POST", "/_sim/faults/api", `{"mode":"system_error","path":"/v3/pay/transactions/native","after_processing":true}`, nil); code != 200 {
		t.Fatal(code)
	}
	body := orderBody("native", "SYSERR0001", 100, "https://e.com/n", nil)
	lost := h.do(t, req{method: "POST", target: "/v3/pay/transactions/native", body: body})
	if lost.status != 500 || lost.code() != "SYSTEM_ERROR" || lost.header.Get("Wechatpay-Signature") != "" {
		t.Fatalf("%d %s", lost.status, lost.body)
	}
	if q := h.query(t, "SYSERR0001"); q.status != 200 || q.json(t)["trade_state"] != "NOTPAY" {
		t.Fatalf("the order was not taken: %d %s", q.status, q.body)
	}
	retry := h.do(t, req{method: "POST", target: "/v3/pay/transactions/native", body: body})
	again := h.do(t, req{method: "POST", target: "/v3/pay/transactions/native", body: body})
	if retry.status != 200 || string(retry.body) != string(again.body) || len(h.sim.Orders(mchID)) != 1 {
		t.Fatalf("retry %d %s", retry.status, retry.body)
	}
	h.verify(t, retry)

	if err := h.sim.InjectFault(wechatpaysim.APIFault{Mode: wechatpaysim.FaultSystemError}); err != nil {
		t.Fatal(err)
	}
	if r := h.do(t, req{method: "POST", target: "/v3/pay/transactions/native", body: orderBody("native", "SYSERR0002", 1, "https://e.com/n", nil)}); r.status != 500 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if q := h.query(t, "SYSERR0002"); q.status != 404 {
		t.Fatalf("an order refused before processing was taken: %d", q.status)
	}
}

// The other fault modes: a bare HTTP error, a bad answer signature, a probe signature;
// a path filter; faults configured at start.
func TestAPIFaultModes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *wechatpaysim.Config) {
		c.Faults = []wechatpaysim.APIFault{{Mode: wechatpaysim.FaultHTTPError, Status: 503, Path: "/v3/certificates"}}
	})
	if r := h.do(t, req{method: "GET", target: "/v3/certificates"}); r.status != 503 || !strings.Contains(string(r.body), "<html>") {
		t.Fatalf("http_error: %d %s", r.status, r.body)
	}
	if err := h.sim.InjectFault(wechatpaysim.APIFault{Mode: wechatpaysim.FaultBadSignature, Path: "/v3/pay/transactions/out-trade-no/"}); err != nil {
		t.Fatal(err)
	}
	if r := h.do(t, req{method: "GET", target: "/v3/certificates"}); r.status != 200 {
		t.Fatalf("a fault for another path fired: %d", r.status)
	}
	h.place(t, "native", "FAULTS0001", 1, "https://e.com/n")
	bad := h.query(t, "FAULTS0001")
	if bad.status != 200 || wechatpaysim.VerifyResponse(h.keys.PlatformCertPEM, bad.header.Get("Wechatpay-Timestamp"),
		bad.header.Get("Wechatpay-Nonce"), bad.header.Get("Wechatpay-Signature"), bad.body) == nil {
		t.Fatalf("bad_signature: %d, the signature verified", bad.status)
	}
	if err := h.sim.InjectFault(wechatpaysim.APIFault{Mode: wechatpaysim.FaultSignProbe}); err != nil {
		t.Fatal(err)
	}
	if r := h.query(t, "FAULTS0001"); !strings.HasPrefix(r.header.Get("Wechatpay-Signature"), wechatpaysim.ProbePrefix) {
		t.Fatalf("sign_probe: %v", r.header)
	}
	h.verify(t, h.query(t, "FAULTS0001"))
	if code := h.control(t, "POST", "/_sim/faults/api", `{"mode":"nonsense"}`, nil); code != 400 {
		t.Fatalf("unknown mode: %d", code)
	}
	if code := h.control(t, "POST", "/_sim/faults/api", `{"mode":"http_error","status":200}`, nil); code != 400 {
		t.Fatalf("http_error 200: %d", code)
	}
}

// A hang holds the request until the client gives up.
func TestHangFault(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	if err := h.sim.InjectFault(wechatpaysim.APIFault{Mode: wechatpaysim.FaultHang}); err != nil {
		t.Fatal(err)
	}
	auth, err := wechatpaysim.SignRequest(h.keys.MerchantPrivateKeyPEM, mchID, h.keys.MerchantSerialNo, "GET", "/v3/certificates", nil, h.clock.Now(), "N")
	if err != nil {
		t.Fatal(err)
	}
	r, _ := http.NewRequest("GET", h.srv.URL+"/v3/certificates", nil)
	r.Header.Set("Authorization", auth)
	r.Header.Set("Accept", "*/*")
	client := &http.Client{Timeout: 100 * time.Millisecond}
	if res, err := client.Do(r); err == nil {
		res.Body.Close()
		t.Fatalf("answered %d", res.StatusCode)
	}
}

// Past the rate, each merchant's calls answer 429 FREQUENCY_LIMITED and are not carried
// out; the limit refills with time and lifts at rate 0.
func TestThrottle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	var fs wechatpaysim.FaultState
	if code := h.control(t, "POST", "/_sim/faults/throttle", `{"rate":2,"burst":2}`, &fs); code != 200 || fs.Throttle.Rate != 2 {
		t.Fatalf("%d %+v", code, fs)
	}
	place := func(no string) resp {
		return h.do(t, req{method: "POST", target: "/v3/pay/transactions/native", body: orderBody("native", no, 1, "https://e.com/n", nil)})
	}
	got := []int{place("THROTTLE01").status, place("THROTTLE02").status, place("THROTTLE03").status}
	if got[0] != 200 || got[1] != 200 || got[2] != 429 {
		t.Fatalf("statuses %v", got)
	}
	if r := place("THROTTLE03"); r.code() != "FREQUENCY_LIMITED" {
		t.Fatalf("%s", r.body)
	}
	if q := h.query(t, "THROTTLE03"); q.status != 429 {
		t.Fatalf("query while limited: %d", q.status)
	}
	h.clock.Advance(time.Second)
	if q := h.query(t, "THROTTLE03"); q.status != 404 {
		t.Fatalf("a refused order was taken: %d %s", q.status, q.body)
	}
	if h.sim.Faults().Throttled != 3 {
		t.Fatalf("throttled %d", h.sim.Faults().Throttled)
	}
	other, err := wechatpaysim.GenerateKeys("1230000111", "wx3333333333333333", 1024)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.sim.AddMerchant(other.Merchant()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r := h.do(t, req{method: "GET", target: "/v3/certificates", mchid: other.MchID, serial: other.MerchantSerialNo, key: other.MerchantPrivateKeyPEM})
		if r.status != 200 {
			t.Fatalf("another merchant is limited by the first's calls: %d", r.status)
		}
	}
	if code := h.control(t, "POST", "/_sim/faults/throttle", `{"rate":0}`, nil); code != 200 {
		t.Fatal(code)
	}
	for range 5 {
		if q := h.query(t, "THROTTLE01"); q.status != 200 {
			t.Fatalf("lifted: %d", q.status)
		}
	}
	if code := h.control(t, "POST", "/_sim/faults/throttle", `{"rate":-1}`, nil); code != 400 {
		t.Fatalf("negative rate: %d", code)
	}
}
