package e2e

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/shop"
)

var hiddenField = regexp.MustCompile(`name="(order_id|checkout_token|idempotency_key)" value="([^"]*)"`)

// The demo shop over plain HTTP, as a browser that double-clicks Pay would drive it: the
// page carries a checkout token and a per-view Idempotency-Key; two submissions of the
// same page make one payment, both sent to the same cashier; after paying, the result
// page shows PAID from the API. (The shop's own calls to the API go through the checked
// test client, so they are held to the contract too.)
func TestDemoShopDoubleSubmitMakesOnePayment(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	var shopURL string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		shop.New(shop.Config{APIURL: st.apiURL, APIKey: tn.apiKey, PublicURL: shopURL, AmountFen: 1990, HTTP: httpClient}).ServeHTTP(w, r)
	}))
	defer srv.Close()
	shopURL = srv.URL

	page := do(t, http.MethodGet, srv.URL+"/", nil, nil)
	if page.status != http.StatusOK || !strings.Contains(string(page.body), `onsubmit="document.getElementById('pay').disabled = true"`) {
		t.Fatalf("product page: HTTP %d %s", page.status, page.body)
	}
	form := url.Values{}
	for _, m := range hiddenField.FindAllStringSubmatch(string(page.body), -1) {
		form.Set(m[1], m[2])
	}
	if form.Get("checkout_token") == "" || form.Get("idempotency_key") == "" || form.Get("order_id") == "" {
		t.Fatalf("form fields %v", form)
	}
	noRedirect := &http.Client{Timeout: 60 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	locations := make([]string, 2)
	var wg sync.WaitGroup
	for i := range locations {
		wg.Go(func() {
			resp, err := noRedirect.PostForm(srv.URL+"/pay", form)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusSeeOther {
				t.Errorf("submit %d: HTTP %d", i, resp.StatusCode)
			}
			locations[i] = resp.Header.Get("Location")
		})
	}
	wg.Wait()
	if locations[0] == "" || locations[0] != locations[1] {
		t.Fatalf("the two submissions went to %q and %q, want one cashier", locations[0], locations[1])
	}
	orderID := form.Get("order_id")
	if n := count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND order_id = ?", tn.id, orderID); n != 1 {
		t.Fatalf("%d payments for the double-submitted order, want 1", n)
	}
	var paymentNo string
	if err := env.db.QueryRow("SELECT payment_no FROM payments WHERE tenant_id = ? AND order_id = ?", tn.id, orderID).Scan(&paymentNo); err != nil {
		t.Fatal(err)
	}
	openCashier(t, locations[0])
	simPay(t, paymentNo)
	waitStatus(t, paymentNo, payment.StatusPaid, 30*time.Second)
	result := do(t, http.MethodGet, srv.URL+"/result?order_id="+orderID, nil, nil)
	if !strings.Contains(string(result.body), `data-status="PAID"`) {
		t.Fatalf("result page: HTTP %d %s", result.status, result.body)
	}
	t.Logf("double submit of order %s: one payment %s, one cashier; paid, and the result page shows PAID", orderID, paymentNo)
}
