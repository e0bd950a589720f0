package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/openapi"
	"github.com/paykit/paykit/openapi/contract"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/payment/paymenttest"
)

var (
	contractOnce sync.Once
	theContract  *contract.Validator
	contractErr  error
)

// loadContract loads and validates the OpenAPI document once per test binary.
func loadContract(tb testing.TB) *contract.Validator {
	tb.Helper()
	contractOnce.Do(func() { theContract, contractErr = contract.Load(context.Background()) })
	if contractErr != nil {
		tb.Fatal(contractErr)
	}
	return theContract
}

// checked wraps the server so that every exchange is checked against the contract, and
// a drift fails the test.
func checked(tb testing.TB, h http.Handler) http.Handler {
	tb.Helper()
	return loadContract(tb).Handler(h, func(err error) {
		tb.Errorf("contract drift: %v", err)
	})
}

// The document is valid OpenAPI 3.1 (doc.Validate passes in contract.Load).
func TestOpenAPIDocumentIsValid(t *testing.T) {
	doc := loadContract(t).Document()
	if doc.OpenAPI != "3.1.0" || !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
}

// Every route the server has is in the document, and every operation of the document is
// a route of the server.
func TestEveryRouteIsInTheContractAndBack(t *testing.T) {
	doc := loadContract(t).Document()
	var inDoc []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			inDoc = append(inDoc, method+" "+path)
		}
	}
	slices.Sort(inDoc)
	srv := api.New(api.Config{}, (&fakeStore{}).stores(), payment.SingleGateway{Gateway: fakeGateway{}}, &fakeOrch{}, nil, nil, nil)
	routes := srv.Routes()
	for _, r := range routes {
		if !slices.Contains(inDoc, r) {
			t.Errorf("route %s is not in openapi/openapi.yaml", r)
		}
	}
	for _, op := range inDoc {
		if !slices.Contains(routes, op) {
			t.Errorf("openapi/openapi.yaml has %s, which the server does not route", op)
		}
	}
}

func TestOpenAPIIsServed(t *testing.T) {
	srv, _, _ := newServer(t)
	resp, err := http.Get(srv.URL + "/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(b, openapi.Document()) {
		t.Fatalf("GET /openapi.yaml: HTTP %d, %d bytes", resp.StatusCode, len(b))
	}
}

// mutate rewrites the JSON answers of h with f, as a handler whose answer changed shape.
func mutate(h http.Handler, f func(map[string]any)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		var m map[string]any
		body := rec.Body.Bytes()
		if json.Unmarshal(body, &m) == nil {
			f(m)
			body, _ = json.Marshal(m)
		}
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	})
}

// A response that drifts from the contract fails: the real handler's answer with a
// required field removed, a field added, or a field of another type; and a route the
// contract does not have.
func TestContractCatchesDrift(t *testing.T) {
	v := loadContract(t)
	newAPI := func() http.Handler {
		st := &fakeStore{
			tenant: payment.Tenant{ID: "t1", APIKeyHash: api.HashAPIKey(key)},
			Payments: paymenttest.Payments{ByNo: map[string]payment.Payment{
				"P1": {PaymentNo: "P1", TenantID: "t1", OrderID: "o1", Amount: 990, Currency: "CNY", Subject: "s"}}},
		}
		return api.New(api.Config{}, st.stores(), payment.SingleGateway{Gateway: fakeGateway{}}, &fakeOrch{}, nil, nil, nil)
	}
	get := func(t *testing.T, h http.Handler, path string) []error {
		var drift []error
		srv := httptest.NewServer(v.Handler(h, func(err error) { drift = append(drift, err) }))
		defer srv.Close()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return drift
	}
	if drift := get(t, newAPI(), "/v1/payments/P1"); len(drift) != 0 {
		t.Fatalf("the real answer drifts: %v", drift)
	}
	tests := []struct {
		name string
		f    func(map[string]any)
	}{
		{"required field missing", func(m map[string]any) { delete(m, "status") }},
		{"field added", func(m map[string]any) { m["amount_yuan"] = "9.90" }},
		{"field of another type", func(m map[string]any) { m["amount_fen"] = "990" }},
		{"status outside its enum", func(m map[string]any) { m["status"] = "SETTLED" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if drift := get(t, mutate(newAPI(), tc.f), "/v1/payments/P1"); len(drift) == 0 {
				t.Fatal("the validator passed an answer that drifted from the contract")
			}
		})
	}
	t.Run("route not in the contract", func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{}`))
		})
		if drift := get(t, h, "/v1/settlements"); len(drift) == 0 || !strings.Contains(drift[0].Error(), "not in the contract") {
			t.Fatalf("drift %v", drift)
		}
	})
}
