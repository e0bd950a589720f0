package webhook_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/paykit/paykit/webhook"
)

func ExampleVerify() {
	secret := "whsec_example" // the tenant's webhook secret
	handler := func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		err = webhook.Verify(r.Header.Get("Paykit-Signature"), body, secret, webhook.DefaultTolerance)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		// Verified and fresh: dedupe on r.Header.Get("Paykit-Event-Id"), then act on body.
		w.WriteHeader(http.StatusNoContent)
	}

	// A webhook just sent is accepted; the same one captured and replayed ten minutes
	// later is refused.
	body := []byte(`{"event_id":"evt_1","type":"payment.paid"}`)
	for _, sentAt := range []time.Time{time.Now(), time.Now().Add(-10 * time.Minute)} {
		req := httptest.NewRequest(http.MethodPost, "/webhooks/paykit", bytes.NewReader(body))
		req.Header.Set("Paykit-Signature", webhook.Sign(body, sentAt, secret))
		rec := httptest.NewRecorder()
		handler(rec, req)
		fmt.Print(rec.Code, " ", rec.Body.String())
	}
	// Output:
	// 204 401 webhook: timestamp outside the tolerance window
}
