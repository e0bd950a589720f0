package alipaysim_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/paykit/paykit/alipaysim"
)

// commonParams are the parameters Alipay's Java SDK sends in the URL query; only
// biz_content goes in the body.
var commonParams = []string{"app_id", "method", "format", "charset", "sign_type", "sign",
	"timestamp", "version", "notify_url", "return_url", "app_auth_token", "alipay_sdk", "app_cert_sn", "alipay_root_cert_sn"}

// split moves the named parameters of a signed form into a query, leaving the rest in
// the body.
func split(form url.Values, names ...string) (query, body url.Values) {
	query, body = url.Values{}, url.Values{}
	for k, vs := range form {
		dst := body
		for _, n := range names {
			if k == n {
				dst = query
			}
		}
		dst[k] = append([]string(nil), vs...)
	}
	return query, body
}

// shapeForm is a signed precreate built by hand, with the optional common parameters
// Java SDK sends (notify_url, alipay_sdk), so the query carries more than the minimum.
func shapeForm(t *testing.T, h *harness, no string) url.Values {
	t.Helper()
	key := parsePriv(t, h.keys.AppPrivateKeyPEM)
	f := signedForm(t, key, "alipay.trade.precreate", map[string]string{
		"out_trade_no": no, "total_amount": "3.20", "subject": "shape " + no})
	f.Set("notify_url", h.sink.url())
	f.Set("alipay_sdk", "alipay-sdk-java-4.39.0.ALL")
	f.Del("sign")
	f.Set("sign", sign(t, key, canonical(f, "sign")))
	return f
}

func wantPrecreated(t *testing.T, a rawAnswer, no string) {
	t.Helper()
	if a.name != "alipay_trade_precreate_response" || a.get("code") != "10000" || a.get("out_trade_no") != no || a.get("qr_code") == "" {
		t.Fatalf("answer %s = %v; want a successful precreate of %s", a.name, a.fields, no)
	}
}

// TestCharsetInQueryAndBody is the shape of clients that post to gateway.do?charset=utf-8
// and send charset again in the form body: one parameter, signed once.
func TestCharsetInQueryAndBody(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	f := shapeForm(t, h, "S_shape_cs")
	a := h.postRaw(t, url.Values{"charset": {"utf-8"}}, f)
	wantPrecreated(t, a, "S_shape_cs")
}

func TestRequestShapes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	t.Run("all parameters in the body", func(t *testing.T) {
		a := h.postRaw(t, nil, shapeForm(t, h, "S_shape_body"))
		wantPrecreated(t, a, "S_shape_body")
	})
	t.Run("common parameters in the query, biz_content in the body", func(t *testing.T) {
		q, b := split(shapeForm(t, h, "S_shape_java"), commonParams...)
		if len(b) != 1 || b.Get("biz_content") == "" || q.Get("sign") == "" || q.Get("notify_url") == "" {
			t.Fatalf("bad split: query %v body %v", q, b)
		}
		a := h.postRaw(t, q, b)
		wantPrecreated(t, a, "S_shape_java")
		tr, err := h.sim.Trade(appID, "S_shape_java")
		if err != nil || tr.NotifyURL != h.sink.url() {
			t.Fatalf("trade %+v, %v: notify_url from the query must be kept", tr, err)
		}
	})
	t.Run("everything in the query", func(t *testing.T) {
		q, b := split(shapeForm(t, h, "S_shape_query"), append(commonParams, "biz_content")...)
		a := h.postRaw(t, q, b)
		wantPrecreated(t, a, "S_shape_query")
	})
	t.Run("every parameter in both places", func(t *testing.T) {
		f := shapeForm(t, h, "S_shape_both")
		a := h.postRaw(t, f, f)
		wantPrecreated(t, a, "S_shape_both")
	})
}

// TestConflictingDuplicatesAreRefused: a parameter sent twice with different values is
// refused with a signed error before anything is processed, whichever copy was signed.
func TestConflictingDuplicatesAreRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	tests := []struct {
		name  string
		build func(f url.Values) (query, body url.Values)
		param string
		resp  string
	}{
		{"charset differs", func(f url.Values) (url.Values, url.Values) {
			return url.Values{"charset": {"GBK"}}, f
		}, "charset", "alipay_trade_precreate_response"},
		{"biz_content differs (amount in the query)", func(f url.Values) (url.Values, url.Values) {
			return url.Values{"biz_content": {`{"out_trade_no":"S_dup","total_amount":"0.01","subject":"x"}`}}, f
		}, "biz_content", "alipay_trade_precreate_response"},
		{"app_id differs", func(f url.Values) (url.Values, url.Values) {
			return url.Values{"app_id": {"2021000000000002"}}, f
		}, "app_id", "alipay_trade_precreate_response"},
		{"method differs", func(f url.Values) (url.Values, url.Values) {
			return url.Values{"method": {"alipay.trade.close"}}, f
		}, "method", "error_response"},
		{"twice in the body", func(f url.Values) (url.Values, url.Values) {
			f["notify_url"] = append(f["notify_url"], "http://attacker.invalid/notify")
			return nil, f
		}, "notify_url", "alipay_trade_precreate_response"},
		{"sign differs", func(f url.Values) (url.Values, url.Values) {
			return url.Values{"sign": {"AAAA"}}, f
		}, "sign", "alipay_trade_precreate_response"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, b := tc.build(shapeForm(t, h, "S_dup"))
			a := h.postRaw(t, q, b)
			if a.name != tc.resp || a.get("code") != "40002" || a.get("sub_code") != "isv.invalid-parameter" {
				t.Fatalf("answer %s = %v; want 40002 isv.invalid-parameter", a.name, a.fields)
			}
			if want := "duplicate parameter " + tc.param; !strings.Contains(a.get("sub_msg"), want) {
				t.Fatalf("sub_msg %q does not name %q", a.get("sub_msg"), want)
			}
		})
	}
	if _, err := h.sim.Trade(appID, "S_dup"); err == nil {
		t.Fatal("a refused request created a trade")
	}
}

// TestConflictingDuplicatesOnThePagePayURL: the cashier refuses an ambiguous page-pay URL
// and creates no trade.
func TestConflictingDuplicatesOnThePagePayURL(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	key := parsePriv(t, h.keys.AppPrivateKeyPEM)
	f := signedForm(t, key, "alipay.trade.page.pay", map[string]string{
		"out_trade_no": "S_dup_page", "total_amount": "1.00", "subject": "s", "product_code": "FAST_INSTANT_TRADE_PAY"})
	f.Add("return_url", "http://merchant.invalid/return")
	f.Add("return_url", "http://attacker.invalid/return")
	resp, err := http.Get(h.srv.URL + alipaysim.GatewayPath + "?" + f.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "isv.invalid-parameter") {
		t.Fatalf("HTTP %d %s", resp.StatusCode, body)
	}
	if _, err := h.sim.Trade(appID, "S_dup_page"); err == nil {
		t.Fatal("an ambiguous page-pay URL created a trade")
	}
}
