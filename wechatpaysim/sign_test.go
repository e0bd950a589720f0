package wechatpaysim_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/wechatpaysim"
)

// Every refusal of a request's authentication is 401 SIGN_ERROR with WeChat Pay's
// message (400 for an unknown merchant or missing headers), unsigned, with a Request-ID.
func TestRequestAuthenticationRefusals(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	other, err := wechatpaysim.GenerateKeys("", "", 1024)
	if err != nil {
		t.Fatal(err)
	}
	target := "/v3/pay/transactions/out-trade-no/ABC123456?mchid=" + mchID
	tests := []struct {
		name   string
		q      req
		status int
		code   string
		msg    string
	}{
		{"signed by another key", req{key: other.MerchantPrivateKeyPEM}, 401, "SIGN_ERROR", "错误的签名，验签失败"},
		{"timestamp 6 minutes old", req{ts: time.Now().Add(-6 * time.Minute)}, 401, "SIGN_ERROR", "Http头Authorization中的timestamp与发起请求的时间不得超过5分钟"},
		{"timestamp 6 minutes ahead", req{ts: time.Now().Add(6 * time.Minute)}, 401, "SIGN_ERROR", "Http头Authorization中的timestamp与发起请求的时间不得超过5分钟"},
		{"wrong merchant serial", req{serial: other.MerchantSerialNo}, 401, "SIGN_ERROR", "商户证书序列号有误。"},
		{"no Authorization", req{auth: " "}, 401, "SIGN_ERROR", "Http头Authorization值格式错误"},
		{"another scheme", req{auth: `WECHATPAY2-SM2-WITH-SM3 mchid="1230000109"`}, 401, "SIGN_ERROR", "Http头Authorization认证类型不正确"},
		{"a parameter missing", req{auth: `WECHATPAY2-SHA256-RSA2048 mchid="1230000109",nonce_str="x",timestamp="1",serial_no="y"`}, 401, "SIGN_ERROR", "Http头Authorization值格式错误"},
		{"unquoted value", req{auth: `WECHATPAY2-SHA256-RSA2048 mchid=1230000109,nonce_str="x",timestamp="1",serial_no="y",signature="z"`}, 401, "SIGN_ERROR", "Http头Authorization值格式错误"},
		{"unknown merchant", req{mchid: "1900000000"}, 400, "MCH_NOT_EXISTS", "商户号不存在"},
		{"no Accept", req{tamper: func(r *http.Request) { r.Header.Del("Accept") }}, 400, "INVALID_REQUEST", "Http头缺少Accept或User-Agent"},
		{"tampered query", req{tamper: func(r *http.Request) { r.URL.RawQuery = "mchid=1230000110" }}, 401, "SIGN_ERROR", "错误的签名，验签失败"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			q.method, q.target = "GET", target
			r := h.do(t, q)
			var e struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			}
			if err := json.Unmarshal(r.body, &e); err != nil || r.status != tc.status || e.Code != tc.code || e.Message != tc.msg {
				t.Fatalf("got %d %s, want %d %s %s", r.status, r.body, tc.status, tc.code, tc.msg)
			}
			if r.header.Get("Wechatpay-Signature") != "" {
				t.Fatal("a refusal is signed")
			}
		})
	}
}

// A signature mismatch tells what the server signed: the method, the URL and the
// string's byte length, as in WeChat Pay's FAQ.
func TestSignatureMismatchDetail(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	body := orderBody("native", "DETAIL0001", 100, "https://example.com/n", nil)
	r := h.do(t, req{method: "POST", target: "/v3/pay/transactions/native", body: body, ts: time.Unix(h.clock.Now().Unix(), 0),
		nonce: "593BEC0C930BF1AFEB40B4A08C8FB242", tamper: func(r *http.Request) {
			r.Body = http.NoBody
			r.ContentLength = 0
		}})
	var e struct {
		Code   string `json:"code"`
		Detail struct {
			Field, Issue, Location string
			SignInformation        struct {
				Method               string `json:"method"`
				URL                  string `json:"url"`
				TruncatedSignMessage string `json:"truncated_sign_message"`
				SignMessageLength    int    `json:"sign_message_length"`
			} `json:"sign_information"`
		} `json:"detail"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || r.status != 401 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	ts := h.clock.Now().Unix()
	want := "POST\n/v3/pay/transactions/native\n" + strconv.FormatInt(ts, 10) + "\n593BEC0C930BF1AFEB40B4A08C8FB242\n\n"
	si := e.Detail.SignInformation
	if e.Code != "SIGN_ERROR" || e.Detail.Field != "signature" || e.Detail.Issue != "sign not match" || e.Detail.Location != "authorization" ||
		si.Method != "POST" || si.URL != "/v3/pay/transactions/native" || si.TruncatedSignMessage != want || si.SignMessageLength != len(want) {
		t.Fatalf("detail %+v, want the message %q", e, want)
	}
}

// The five Authorization parameters come in any order (axios-plugin and php send
// mchid,serial_no,timestamp,nonce_str,signature), with or without spaces after commas.
func TestAuthorizationParametersInAnyOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	target := "/v3/pay/transactions/out-trade-no/NOPE000001?mchid=" + mchID
	ts := h.clock.Now()
	signed, err := wechatpaysim.SignRequest(h.keys.MerchantPrivateKeyPEM, mchID, h.keys.MerchantSerialNo, "GET", target, nil, ts, "NONCE0001")
	if err != nil {
		t.Fatal(err)
	}
	params := map[string]string{}
	for p := range strings.SplitSeq(strings.TrimPrefix(signed, wechatpaysim.AuthScheme+" "), ",") {
		k, v, _ := strings.Cut(p, "=")
		params[k] = v
	}
	for _, order := range [][]string{
		{"mchid", "serial_no", "timestamp", "nonce_str", "signature"},
		{"signature", "timestamp", "serial_no", "nonce_str", "mchid"},
	} {
		for _, sep := range []string{",", ", "} {
			var parts []string
			for _, k := range order {
				parts = append(parts, k+"="+params[k])
			}
			r := h.do(t, req{method: "GET", target: target, auth: wechatpaysim.AuthScheme + " " + strings.Join(parts, sep)})
			if r.status != http.StatusNotFound || r.code() != "ORDER_NOT_EXIST" {
				t.Fatalf("order %v sep %q: %d %s", order, sep, r.status, r.body)
			}
		}
	}
}

// gopay's quirks: it signs without the trailing "?" that net/http still sends, and signs
// path ids raw while '|' and '*' go on the wire as %7C and %2A.
func TestClientURLQuirks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.place(t, "native", "Q|U*IRK01", 100, "https://example.com/n")
	tests := []struct{ name, sent, signed string }{
		{"as sent", "/v3/pay/transactions/out-trade-no/Q%7CU%2AIRK01?mchid=" + mchID, "/v3/pay/transactions/out-trade-no/Q%7CU%2AIRK01?mchid=" + mchID},
		{"raw | and * signed", "/v3/pay/transactions/out-trade-no/Q%7CU%2AIRK01?mchid=" + mchID, "/v3/pay/transactions/out-trade-no/Q|U*IRK01?mchid=" + mchID},
		{"lower-case escapes", "/v3/pay/transactions/out-trade-no/Q%7cU%2aIRK01?mchid=" + mchID, "/v3/pay/transactions/out-trade-no/Q|U*IRK01?mchid=" + mchID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			auth, err := wechatpaysim.SignRequest(h.keys.MerchantPrivateKeyPEM, mchID, h.keys.MerchantSerialNo, "GET", tc.signed, nil, h.clock.Now(), "N1")
			if err != nil {
				t.Fatal(err)
			}
			r := h.do(t, req{method: "GET", target: tc.sent, auth: auth})
			if r.status != 200 || r.json(t)["out_trade_no"] != "Q|U*IRK01" {
				t.Fatalf("%d %s", r.status, r.body)
			}
		})
	}
	t.Run("trailing ? signed without it", func(t *testing.T) {
		auth, err := wechatpaysim.SignRequest(h.keys.MerchantPrivateKeyPEM, mchID, h.keys.MerchantSerialNo, "GET", "/v3/certificates", nil, h.clock.Now(), "N2")
		if err != nil {
			t.Fatal(err)
		}
		if r := h.do(t, req{method: "GET", target: "/v3/certificates?", auth: auth}); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
	t.Run("another path is not tolerated", func(t *testing.T) {
		auth, err := wechatpaysim.SignRequest(h.keys.MerchantPrivateKeyPEM, mchID, h.keys.MerchantSerialNo, "GET", "/v3/certificates?algorithm_type=RSA", nil, h.clock.Now(), "N3")
		if err != nil {
			t.Fatal(err)
		}
		if r := h.do(t, req{method: "GET", target: "/v3/certificates?algorithm_type=ALL", auth: auth}); r.status != 401 {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
}

// Every successful answer is signed, 204 included: with the WeChat Pay public key when
// the request names its ID and the merchant's switch is on (or it has nothing else),
// with the platform certificate otherwise.
func TestAnswersSigned(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, keyMode, requestSerial string
		wantPublicKey                bool
	}{
		{"both, no Wechatpay-Serial", wechatpaysim.KeyModeBoth, "", false},
		{"both, platform serial", wechatpaysim.KeyModeBoth, "platform", false},
		{"both, PUB_KEY_ID", wechatpaysim.KeyModeBoth, "pubkey", true},
		{"switch off, PUB_KEY_ID", wechatpaysim.KeyModePlatform, "pubkey", false},
		{"public key only, no serial", wechatpaysim.KeyModePublicKey, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(c *wechatpaysim.Config) { c.Merchants[0].KeyMode = tc.keyMode })
			serial := map[string]string{"platform": h.keys.PlatformSerialNo, "pubkey": h.keys.PublicKeyID}[tc.requestSerial]
			want := h.keys.PlatformSerialNo
			if tc.wantPublicKey {
				want = h.keys.PublicKeyID
			}
			placed := h.do(t, req{method: "POST", target: "/v3/pay/transactions/native", wechatpaySerial: serial,
				body: orderBody("native", "SIGNED0001", 1, "https://example.com/n", nil)})
			closed := h.do(t, req{method: "POST", target: "/v3/pay/transactions/out-trade-no/SIGNED0001/close", wechatpaySerial: serial,
				body: `{"mchid":"` + mchID + `"}`})
			if placed.status != 200 || closed.status != 204 || len(closed.body) != 0 {
				t.Fatalf("place %d %s, close %d %s", placed.status, placed.body, closed.status, closed.body)
			}
			for _, r := range []resp{placed, closed} {
				if got := h.verify(t, r); got != want {
					t.Fatalf("answer %d signed by %s, want %s", r.status, got, want)
				}
				if len(r.header.Get("Wechatpay-Nonce")) != 32 {
					t.Fatalf("nonce %q", r.header.Get("Wechatpay-Nonce"))
				}
			}
		})
	}
}

// A tampered answer body no longer verifies: the signature covers the exact bytes.
func TestAnswerSignatureCoversBody(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	r := h.place(t, "native", "COVER00001", 1, "https://example.com/n")
	h.verify(t, r)
	r.body = []byte(strings.Replace(string(r.body), "weixin", "weixim", 1))
	if err := wechatpaysim.VerifyResponse(h.keys.PlatformCertPEM, r.header.Get("Wechatpay-Timestamp"), r.header.Get("Wechatpay-Nonce"),
		r.header.Get("Wechatpay-Signature"), r.body); err == nil {
		t.Fatal("a tampered body verified")
	}
}

// AEAD_AES_256_GCM: what EncryptAEAD seals, DecryptAEAD opens with the same key, nonce
// and associated data, and nothing else.
func TestAEADRoundTrip(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdefghijklmnopqrstuv")
	ct, err := wechatpaysim.EncryptAEAD(key, "3a584b49ed9b", "transaction", []byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := wechatpaysim.DecryptAEAD(key, "3a584b49ed9b", "transaction", ct); err != nil || string(pt) != `{"a":1}` {
		t.Fatalf("round trip: %q %v", pt, err)
	}
	tests := []struct {
		name                string
		key                 []byte
		nonce, ad, cipher   string
		wantErrContainsText string
	}{
		{"other associated data", key, "3a584b49ed9b", "certificate", ct, "decrypt"},
		{"other nonce", key, "3a584b49ed9c", "transaction", ct, "decrypt"},
		{"other key", []byte("0123456789abcdefghijklmnopqrstuw"), "3a584b49ed9b", "transaction", ct, "decrypt"},
		{"short nonce", key, "3a584b49ed", "transaction", ct, "12 bytes"},
		{"short key", key[:16], "3a584b49ed9b", "transaction", ct, "32 bytes"},
	}
	for _, tc := range tests {
		if _, err := wechatpaysim.DecryptAEAD(tc.key, tc.nonce, tc.ad, tc.cipher); err == nil || !strings.Contains(err.Error(), tc.wantErrContainsText) {
			t.Errorf("%s: err %v", tc.name, err)
		}
	}
}

// GET /v3/certificates lists the platform certificate encrypted under the merchant's
// APIv3 key with RFC 3339 times, signed by it; a public-key-only merchant gets 404.
func TestCertificates(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	for _, target := range []string{"/v3/certificates", "/v3/certificates?algorithm_type=RSA", "/v3/certificates?algorithm_type=ALL"} {
		r := h.do(t, req{method: "GET", target: target})
		if r.status != 200 {
			t.Fatalf("%s: %d %s", target, r.status, r.body)
		}
		if got := h.verify(t, r); got != h.keys.PlatformSerialNo {
			t.Fatalf("signed by %s", got)
		}
		var ans struct {
			Data []struct {
				SerialNo           string `json:"serial_no"`
				EffectiveTime      string `json:"effective_time"`
				ExpireTime         string `json:"expire_time"`
				EncryptCertificate struct {
					Algorithm      string `json:"algorithm"`
					AssociatedData string `json:"associated_data"`
					Nonce          string `json:"nonce"`
					Ciphertext     string `json:"ciphertext"`
				} `json:"encrypt_certificate"`
			} `json:"data"`
		}
		if err := json.Unmarshal(r.body, &ans); err != nil || len(ans.Data) != 1 {
			t.Fatalf("%s: %s", target, r.body)
		}
		c := ans.Data[0]
		eff, err1 := time.Parse(time.RFC3339, c.EffectiveTime)
		exp, err2 := time.Parse(time.RFC3339, c.ExpireTime)
		if err1 != nil || err2 != nil || !exp.After(eff) || !strings.HasSuffix(c.EffectiveTime, "+08:00") {
			t.Fatalf("times %q %q", c.EffectiveTime, c.ExpireTime)
		}
		pemText, err := wechatpaysim.DecryptAEAD([]byte(h.keys.APIv3Key), c.EncryptCertificate.Nonce, c.EncryptCertificate.AssociatedData, c.EncryptCertificate.Ciphertext)
		if err != nil || string(pemText) != h.keys.PlatformCertPEM || c.SerialNo != h.keys.PlatformSerialNo ||
			c.EncryptCertificate.Algorithm != "AEAD_AES_256_GCM" || c.EncryptCertificate.AssociatedData != "certificate" {
			t.Fatalf("certificate %+v: %v", c, err)
		}
	}
	pk := newHarness(t, func(c *wechatpaysim.Config) { c.Merchants[0].KeyMode = wechatpaysim.KeyModePublicKey })
	if r := pk.do(t, req{method: "GET", target: "/v3/certificates"}); r.status != 404 || r.code() != "RESOURCE_NOT_EXISTS" ||
		!strings.HasPrefix(r.json(t)["message"].(string), "无可用的平台证书") {
		t.Fatalf("public-key-only: %d %s", r.status, r.body)
	}
}

// RejectReplayedNonce (off by default) refuses a merchant's nonce used twice.
func TestNonceReplay(t *testing.T) {
	t.Parallel()
	for _, reject := range []bool{false, true} {
		h := newHarness(t, func(c *wechatpaysim.Config) { c.RejectReplayedNonce = reject })
		q := req{method: "GET", target: "/v3/certificates", nonce: "SAMENONCE"}
		first, second := h.do(t, q), h.do(t, q)
		want := 200
		if reject {
			want = 401
		}
		if first.status != 200 || second.status != want {
			t.Fatalf("reject=%v: %d then %d %s", reject, first.status, second.status, second.body)
		}
	}
}

// An unknown v3 path is 404 with an empty body.
func TestUnknownPath(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	if r := h.do(t, req{method: "GET", target: "/v3/nothing/here"}); r.status != 404 || len(r.body) != 0 {
		t.Fatalf("%d %q", r.status, r.body)
	}
}
