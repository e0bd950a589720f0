package api_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/paykit/paykit/alipay"
	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/redis"
)

// storedServer is the API on a database and a Redis key space of its own, signing pay
// links with a real Alipay gateway, so that a value a column cannot hold or a link that
// outgrows its column shows as the 5xx it would be in production.
type storedServer struct {
	url   string
	store *mysql.Store
	orch  *fakeOrch
}

func newStoredServer(tb testing.TB) *storedServer {
	tb.Helper()
	db, _ := testenv.MySQL(tb)
	st := mysql.NewStore(db)
	tb.Cleanup(func() { _ = st.Close() })
	rdb, prefix := testenv.Redis(tb)
	ctx := context.Background()
	if err := st.UpsertTenant(ctx, payment.Tenant{ID: "t1", Name: "bounds", APIKeyHash: api.HashAPIKey(key),
		WebhookSecret: "whsec_bounds", AlipayAppID: "2021000000000001", AlipaySeller: "2088000000000001"}); err != nil {
		tb.Fatal(err)
	}
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	priv, _ := x509.MarshalPKCS8PrivateKey(k)
	pub, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	gw, err := alipay.New(alipay.Config{AppID: "2021000000000001", SellerID: "2088000000000001",
		AppPrivateKeyPEM:   string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: priv})),
		AlipayPublicKeyPEM: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})),
		NotifyURL:          "https://paykit.example.com/callbacks/alipay"})
	if err != nil {
		tb.Fatal(err)
	}
	orch := &fakeOrch{}
	stores := mysqlStores(st)
	var logs logBuffer
	srv := httptest.NewServer(checked(tb, api.New(api.Config{DirectCheckoutTTL: 15 * time.Minute}, stores,
		payment.SingleGateway{Gateway: gw}, orch, redis.APICache{Client: redis.New(rdb, prefix)}, logs.logger(), nil)))
	tb.Cleanup(srv.Close)
	return &storedServer{url: srv.URL, store: st, orch: orch}
}

// paidPayment checks out an order and marks its payment paid, for refunds.
func (s *storedServer) paidPayment(t *testing.T) string {
	t.Helper()
	resp, b := post(t, s.url+"/v1/payments", `{"order_id":"paid-1","amount_fen":100000,"subject":"s"}`, authJSON)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("checkout: HTTP %d %s", resp.StatusCode, b)
	}
	var res struct {
		PaymentNo string `json:"payment_no"`
	}
	_ = json.Unmarshal([]byte(b), &res)
	if _, err := s.store.MarkPaid(context.Background(), res.PaymentNo, "2026120322001400000000000001", time.Now()); err != nil {
		t.Fatal(err)
	}
	return res.PaymentNo
}

// requestFor is how to send a valid request to one operation of the contract: its path
// and a body whose fields the test replaces one at a time.
type requestFor func(field string) (path string, body map[string]any)

// TestEveryStringInputIsBounded walks the contract: every string field of a JSON request
// body and every string query parameter must have a maxLength (or an enum). At the bound
// the request is not refused for its length and is answered without a 5xx, through the real database, Redis and a pay link
// signed with the largest URLs and subject, escaped at their worst; one byte past it the
// answer is 400 invalid naming the field, before anything is signed or written.
func TestEveryStringInputIsBounded(t *testing.T) {
	s := newStoredServer(t)
	paid := s.paidPayment(t)
	seq := 0
	unique := func() string { seq++; return fmt.Sprintf("%d-%d", time.Now().UnixNano(), seq) }
	requests := map[string]requestFor{
		"createCheckoutToken": func(string) (string, map[string]any) {
			return "/v1/checkout-tokens", map[string]any{"order_id": "o-" + unique()}
		},
		"createPayment": func(field string) (string, map[string]any) {
			b := map[string]any{"order_id": "o-" + unique(), "amount_fen": 990, "subject": "s"}
			switch field {
			case "quit_url":
				b["method"] = "wap"
				b["return_url"] = longURL(256)
			case "return_url":
				b["method"] = "wap"
				b["quit_url"] = longURL(400)
			}
			if field != "subject" {
				b["subject"] = strings.Repeat(`"<`, 128)
			}
			return "/v1/payments", b
		},
		"createRefund": func(string) (string, map[string]any) {
			return "/v1/payments/" + paid + "/refunds", map[string]any{"amount_fen": 1, "refund_no": "r-" + unique()}
		},
	}
	queries := map[string]string{
		"listOrderPayments":  "/v1/orders/paid-1/payments",
		"listPaymentRefunds": "/v1/payments/" + paid + "/refunds",
		"listEvents":         "/v1/events",
	}
	doc := loadContract(t).Document()
	walked := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for _, p := range op.Parameters {
				if p.Value.In != openapi3.ParameterInQuery || !isString(p.Value.Schema.Value) {
					continue
				}
				name, sc := p.Value.Name, p.Value.Schema.Value
				t.Run(fmt.Sprintf("%s %s ?%s", method, path, name), func(t *testing.T) {
					at, ok := queries[op.OperationID]
					if !ok {
						t.Fatalf("no request for %s: add one to queries", op.OperationID)
					}
					n := boundOf(t, sc)
					walked++
					get := func(v string) (*http.Response, string) {
						return do(t, http.MethodGet, s.url+at+"?"+url.Values{name: {v}}.Encode(), "", authJSON)
					}
					if resp, b := get(valueOf(name, sc, n)); resp.StatusCode >= 500 || strings.Contains(b, "at most") {
						t.Fatalf("%s of %d bytes: HTTP %d %s", name, n, resp.StatusCode, b)
					}
					checkRefused(t, name, n)(get(valueOf(name, sc, n+1)))
				})
			}
			if op.RequestBody == nil {
				continue
			}
			mt := op.RequestBody.Value.Content.Get("application/json")
			if mt == nil || strings.HasPrefix(path, "/callbacks/") {
				// The channels' callbacks: Alipay's form, answered success or failure, and
				// WeChat Pay's JSON, signed by WeChat Pay and bounded by the body limit.
				continue
			}
			for name, prop := range mt.Schema.Value.Properties {
				sc := prop.Value
				if !isString(sc) || len(sc.Enum) > 0 {
					continue
				}
				t.Run(fmt.Sprintf("%s %s %s", method, path, name), func(t *testing.T) {
					req, ok := requests[op.OperationID]
					if !ok {
						t.Fatalf("no request for %s: add one to requests", op.OperationID)
					}
					n := boundOf(t, sc)
					walked++
					send := func(v string) (*http.Response, string) {
						at, body := req(name)
						body[name] = v
						return post(t, s.url+at, marshal(body), authJSON)
					}
					resp, b := send(valueOf(name, sc, n))
					if resp.StatusCode >= 500 || resp.StatusCode == http.StatusBadRequest {
						t.Fatalf("%s of %d bytes: HTTP %d %s", name, n, resp.StatusCode, b)
					}
					var res struct {
						PayURL string `json:"pay_url"`
					}
					if _ = json.Unmarshal([]byte(b), &res); len(res.PayURL) > 8<<10 {
						t.Fatalf("%s of %d bytes: a pay link of %d bytes, over the 8 KiB the bounds in payment/gateway.go allow for", name, n, len(res.PayURL))
					} else if res.PayURL != "" {
						t.Logf("pay link: %d bytes", len(res.PayURL))
					}
					checkRefused(t, name, n)(send(valueOf(name, sc, n+1)))
				})
			}
		}
	}
	if walked == 0 {
		t.Fatal("the contract has no string inputs")
	}
	t.Run("a 22 KB return_url", func(t *testing.T) {
		b := marshal(map[string]any{"order_id": "o-long", "amount_fen": 990, "subject": "s", "return_url": longURL(22 << 10)})
		checkRefused(t, "return_url", 256)(post(t, s.url+"/v1/payments", b, authJSON))
	})
}

// marshal encodes a body as a client would, without escaping < > & as \u003c.
func marshal(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return b.String()
}

// isString reports whether a schema is of type string.
func isString(sc *openapi3.Schema) bool { return sc.Type != nil && sc.Type.Is(openapi3.TypeString) }

// boundOf is the field's maxLength; a string field without one fails the test.
func boundOf(t *testing.T, sc *openapi3.Schema) int {
	t.Helper()
	if sc.MaxLength == nil || *sc.MaxLength == 0 {
		t.Fatalf("no maxLength: every string input needs a bound in openapi/openapi.yaml and in the code")
	}
	return int(*sc.MaxLength)
}

// valueOf is a value of n bytes for a field, valid but for its length, and as large as
// it can be once escaped into a pay link (JSON escapes " and <, and a URL escapes both).
func valueOf(name string, sc *openapi3.Schema, n int) string {
	switch {
	case sc.Pattern == "^https?://":
		return longURL(n)
	case sc.Pattern != "" || name == "after" || name == "checkout_token":
		return strings.Repeat("a", n)
	default:
		return strings.Repeat("<", n)
	}
}

// longURL is an https URL of n bytes whose query escapes to the most bytes it can.
func longURL(n int) string {
	const head = "https://shop.example.com/r?"
	return head + strings.Repeat("&", n-len(head))
}

// checkRefused checks that a value one byte past its bound was refused: 400 invalid,
// as problem+json, naming the field.
func checkRefused(t *testing.T, name string, n int) func(*http.Response, string) {
	return func(resp *http.Response, b string) {
		t.Helper()
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/problem+json" ||
			!strings.Contains(b, `"code":"invalid"`) || !regexp.MustCompile(`\b`+name+`\b`).MatchString(b) {
			t.Fatalf("%s past %d bytes: HTTP %d %s; want 400 invalid naming %s", name, n, resp.StatusCode, b, name)
		}
	}
}
