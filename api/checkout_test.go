package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/paykit/paykit/gateways"
	"github.com/paykit/paykit/payment"
)

func checkoutHeaders(idemKey string) map[string]string {
	h := map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json"}
	if idemKey != "" {
		h["Idempotency-Key"] = idemKey
	}
	return h
}

// A checkout for an order that has a PAID payment is refused with the paid payment,
// whatever the key, and without starting a workflow; the re-purchase opt-in passes.
func TestCheckoutOfPaidOrderIsRefused(t *testing.T) {
	srv, st, orch := newServer(t)
	st.ByNo["PPAID"] = payment.Payment{PaymentNo: "PPAID", TenantID: "t1", OrderID: "paid1", Amount: 990, Status: payment.StatusPaid}
	body := `{"order_id":"paid1","amount_fen":990,"subject":"Coffee"}`
	for _, k := range []string{"", "paid-key-0001", "paid-key-0002"} {
		resp, b := post(t, srv.URL+"/v1/payments", body, checkoutHeaders(k))
		var p struct {
			Code    string          `json:"code"`
			Payment payment.Payment `json:"payment"`
		}
		_ = json.Unmarshal([]byte(b), &p)
		if resp.StatusCode != http.StatusConflict || p.Code != payment.EORDERPAID || p.Payment.PaymentNo != "PPAID" ||
			resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("key %q: HTTP %d %s", k, resp.StatusCode, b)
		}
	}
	if orch.checkouts != 0 {
		t.Fatalf("%d workflow checkouts for a paid order, want 0", orch.checkouts)
	}
	resp, b := post(t, srv.URL+"/v1/payments", `{"order_id":"paid1","amount_fen":990,"subject":"Coffee","repurchase":true}`, checkoutHeaders(""))
	if resp.StatusCode != http.StatusCreated || orch.checkouts != 1 || !orch.lastIn.Repurchase {
		t.Fatalf("re-purchase: HTTP %d %s, checkouts=%d repurchase=%v", resp.StatusCode, b, orch.checkouts, orch.lastIn.Repurchase)
	}
	// The workflow's own refusal (the store found the order paid) is answered the same way.
	orch.errs = []error{&payment.Error{Code: payment.EORDERPAID, Message: "order paid1 is already paid"}}
	resp, b = post(t, srv.URL+"/v1/payments", `{"order_id":"paid1","amount_fen":990,"subject":"Coffee","repurchase":true}`, checkoutHeaders(""))
	if resp.StatusCode != http.StatusConflict || !strings.Contains(b, `"PPAID"`) {
		t.Fatalf("refused by the workflow: HTTP %d %s", resp.StatusCode, b)
	}
}

// A checkout that reaches a run which is ending is tried again with a new update id; a run
// that never makes way is answered 409 payment_finishing with Retry-After, and the key is
// released rather than stored.
func TestCheckoutRetriesWhileTheOldRunMakesWay(t *testing.T) {
	srv, st, orch := newServer(t)
	finishing := &payment.Error{Code: payment.EFINISHING, Message: "payment P0 is CLOSED and its run is ending; retry"}
	orch.errs = []error{finishing, finishing}
	resp, b := post(t, srv.URL+"/v1/payments", `{"order_id":"o9","amount_fen":990,"subject":"Coffee"}`, checkoutHeaders("finish-key-01"))
	if resp.StatusCode != http.StatusCreated || len(orch.updateIDs) != 3 {
		t.Fatalf("HTTP %d %s after %d tries", resp.StatusCode, b, len(orch.updateIDs))
	}
	if orch.updateIDs[0] == orch.updateIDs[1] || orch.updateIDs[1] == orch.updateIDs[2] {
		t.Fatalf("update ids reused: %v", orch.updateIDs)
	}
	orch.err = finishing
	resp, b = post(t, srv.URL+"/v1/payments", `{"order_id":"o9","amount_fen":990,"subject":"Coffee"}`, checkoutHeaders("finish-key-02"))
	if resp.StatusCode != http.StatusConflict || !strings.Contains(b, payment.EFINISHING) || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("HTTP %d %s retry-after=%q", resp.StatusCode, b, resp.Header.Get("Retry-After"))
	}
	if _, kept := st.idem["finish-key-02"]; kept || st.released != 1 {
		t.Fatalf("finishing answer stored for the key (released=%d)", st.released)
	}
}

// Alipay's refusal to open the trade is a 422 with code channel_refused, not a 201.
func TestCheckoutRefusedByAlipayIs422(t *testing.T) {
	srv, _, orch := newServer(t)
	orch.err = &payment.Error{Code: payment.ECHANNEL, Message: "alipay refused the trade: ACQ.ACCESS_FORBIDDEN"}
	resp, b := post(t, srv.URL+"/v1/payments", `{"order_id":"o8","amount_fen":990,"subject":"Coffee"}`, checkoutHeaders(""))
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(b, payment.ECHANNEL) {
		t.Fatalf("HTTP %d %s", resp.StatusCode, b)
	}
}

// Checkout takes wap (with quit_url) and app; quit_url is checked like return_url and only
// taken for wap, and app, which returns to the merchant's app, takes no return_url.
func TestCheckoutWapAndAppRequests(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"wap with quit_url", `{"order_id":"w1","amount_fen":990,"subject":"s","method":"wap","return_url":"https://shop/r","quit_url":"https://shop/q"}`, http.StatusCreated},
		{"app", `{"order_id":"a1","amount_fen":990,"subject":"s","method":"app"}`, http.StatusCreated},
		{"unknown method", `{"order_id":"x1","amount_fen":990,"subject":"s","method":"wechat"}`, http.StatusBadRequest},
		{"quit_url not http", `{"order_id":"w2","amount_fen":990,"subject":"s","method":"wap","quit_url":"javascript:alert(1)"}`, http.StatusBadRequest},
		{"quit_url for page", `{"order_id":"p1","amount_fen":990,"subject":"s","method":"page","quit_url":"https://shop/q"}`, http.StatusBadRequest},
		{"quit_url for app", `{"order_id":"a2","amount_fen":990,"subject":"s","method":"app","quit_url":"https://shop/q"}`, http.StatusBadRequest},
		{"return_url for app", `{"order_id":"a3","amount_fen":990,"subject":"s","method":"app","return_url":"https://shop/r"}`, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _, orch := newServer(t)
			resp, b := post(t, srv.URL+"/v1/payments", tc.body, checkoutHeaders(""))
			if resp.StatusCode != tc.status {
				t.Fatalf("HTTP %d %s", resp.StatusCode, b)
			}
			if tc.status != http.StatusCreated {
				if orch.checkouts != 0 || resp.Header.Get("Content-Type") != "application/problem+json" {
					t.Fatalf("refused request reached the workflow or is not a problem: %d %s", orch.checkouts, b)
				}
				return
			}
			var req struct {
				Method  payment.Method `json:"method"`
				QuitURL string         `json:"quit_url"`
			}
			_ = json.Unmarshal([]byte(tc.body), &req)
			if orch.lastIn.Method != req.Method || orch.lastIn.QuitURL != req.QuitURL {
				t.Fatalf("workflow input %+v", orch.lastIn)
			}
		})
	}
}

// GET /v1/payments/{no} of a pending payment shows its pay link under the method's own
// name; a payment that is no longer pending, or another tenant's, shows none.
func TestGetPaymentShowsPayLinkOnlyWhilePending(t *testing.T) {
	srv, st, _ := newServer(t)
	st.Links = map[string]string{}
	for no, m := range map[string]payment.Method{"PPAGE": payment.MethodPage, "PWAP": payment.MethodWap, "PQR": payment.MethodQR, "PAPP": payment.MethodApp, "PPAIDWAP": payment.MethodWap} {
		status := payment.StatusPending
		if no == "PPAIDWAP" {
			status = payment.StatusPaid
		}
		st.ByNo[no] = payment.Payment{PaymentNo: no, TenantID: "t1", OrderID: "o" + no, Amount: 990, Method: m, Status: status}
		st.Links[no] = "link-of-" + no
	}
	st.ByNo["POTHER"] = payment.Payment{PaymentNo: "POTHER", TenantID: "t2", Method: payment.MethodWap}
	st.Links["POTHER"] = "link-of-POTHER"
	for no, want := range map[string]string{
		"PPAGE": `"pay_url":"link-of-PPAGE"`, "PWAP": `"pay_url":"link-of-PWAP"`,
		"PQR": `"qr_code":"link-of-PQR"`, "PAPP": `"order_string":"link-of-PAPP"`,
	} {
		status, b := getJSON(t, srv.URL+"/v1/payments/"+no)
		if status != http.StatusOK || !strings.Contains(b, want) || strings.Count(b, "link-of-") != 1 || !strings.Contains(b, `"payment_no":"`+no+`"`) {
			t.Fatalf("%s: HTTP %d %s", no, status, b)
		}
	}
	if status, b := getJSON(t, srv.URL+"/v1/payments/PPAIDWAP"); status != http.StatusOK || strings.Contains(b, "link-of-") || strings.Contains(b, "pay_url") {
		t.Fatalf("paid payment: HTTP %d %s", status, b)
	}
	if status, b := getJSON(t, srv.URL+"/v1/payments/POTHER"); status != http.StatusNotFound || strings.Contains(b, "link-of-") {
		t.Fatalf("another tenant's payment: HTTP %d %s", status, b)
	}
}

func getJSON(t *testing.T, u string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Checkout takes the WeChat Pay methods with what each needs of the payer (the openid for
// wechat_jsapi, the IP address for wechat_h5), checked at the boundary as problem+json
// 400s that reach no workflow, and hands the payer to the workflow's checkout.
func TestCheckoutWechatPayRequests(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		status     int
		payer      payment.Payer
	}{
		{"native", `{"order_id":"n1","amount_fen":990,"subject":"s","method":"wechat_native"}`, http.StatusCreated, payment.Payer{}},
		{"app", `{"order_id":"n2","amount_fen":990,"subject":"s","method":"wechat_app"}`, http.StatusCreated, payment.Payer{}},
		{"jsapi with openid", `{"order_id":"j1","amount_fen":990,"subject":"s","method":"wechat_jsapi","payer":{"openid":"oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"}}`,
			http.StatusCreated, payment.Payer{OpenID: "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"}},
		{"h5 with client_ip", `{"order_id":"h1","amount_fen":990,"subject":"s","method":"wechat_h5","payer":{"client_ip":"203.0.113.7"}}`,
			http.StatusCreated, payment.Payer{ClientIP: "203.0.113.7"}},
		{"jsapi without openid", `{"order_id":"j2","amount_fen":990,"subject":"s","method":"wechat_jsapi"}`, http.StatusBadRequest, payment.Payer{}},
		{"h5 without client_ip", `{"order_id":"h2","amount_fen":990,"subject":"s","method":"wechat_h5","payer":{}}`, http.StatusBadRequest, payment.Payer{}},
		{"h5 with a host name", `{"order_id":"h3","amount_fen":990,"subject":"s","method":"wechat_h5","payer":{"client_ip":"shop.example"}}`, http.StatusBadRequest, payment.Payer{}},
		{"openid for native", `{"order_id":"n3","amount_fen":990,"subject":"s","method":"wechat_native","payer":{"openid":"o1"}}`, http.StatusBadRequest, payment.Payer{}},
		{"client_ip for alipay qr", `{"order_id":"q1","amount_fen":990,"subject":"s","method":"qr","payer":{"client_ip":"203.0.113.7"}}`, http.StatusBadRequest, payment.Payer{}},
		{"unknown payer field", `{"order_id":"n4","amount_fen":990,"subject":"s","method":"wechat_native","payer":{"unionid":"u1"}}`, http.StatusBadRequest, payment.Payer{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _, orch := newServer(t)
			resp, b := post(t, srv.URL+"/v1/payments", tc.body, checkoutHeaders(""))
			if resp.StatusCode != tc.status {
				t.Fatalf("HTTP %d %s", resp.StatusCode, b)
			}
			if tc.status != http.StatusCreated {
				if orch.checkouts != 0 || resp.Header.Get("Content-Type") != "application/problem+json" {
					t.Fatalf("refused request reached the workflow or is not a problem: %d %s", orch.checkouts, b)
				}
				return
			}
			if orch.checkouts != 1 || orch.lastIn.Method.Channel() != payment.ChannelWechatPay || orch.lastIn.Payer != tc.payer {
				t.Fatalf("workflow checkouts %d, input %+v; want one of a WeChat Pay method with payer %+v", orch.checkouts, orch.lastIn, tc.payer)
			}
		})
	}
}

// On a deployment without a WeChat Pay merchant a wechat_* checkout is a 422 problem that
// says so, and reaches no workflow; an Alipay checkout is served as before.
func TestCheckoutOfAChannelNotConfigured(t *testing.T) {
	srv, _, orch := newServerWith(t, serverOptions{gateways: gateways.Channels{payment.ChannelAlipay: twoApps{}}})
	resp, b := post(t, srv.URL+"/v1/payments", `{"order_id":"n1","amount_fen":990,"subject":"s","method":"wechat_native"}`, checkoutHeaders(""))
	if resp.StatusCode != http.StatusUnprocessableEntity || resp.Header.Get("Content-Type") != "application/problem+json" ||
		!strings.Contains(b, "WeChat Pay is not configured") || orch.checkouts != 0 {
		t.Fatalf("HTTP %d %s (%d workflow checkouts); want a 422 problem saying WeChat Pay is not configured, and none", resp.StatusCode, b, orch.checkouts)
	}
	resp, b = post(t, srv.URL+"/v1/payments", `{"order_id":"q1","amount_fen":990,"subject":"s","method":"qr"}`, checkoutHeaders(""))
	if resp.StatusCode != http.StatusCreated || orch.checkouts != 1 {
		t.Fatalf("an Alipay checkout: HTTP %d %s", resp.StatusCode, b)
	}
}
