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
		id, err := webhook.VerifyEvent(r.Header.Get("Paykit-Signature"), r.Header.Get("Paykit-Event-Id"),
			body, secret, webhook.DefaultTolerance)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		// Verified and fresh: dedupe on id (the signed body's event_id), then act on body.
		fmt.Print(id, " ")
		w.WriteHeader(http.StatusNoContent)
	}

	// A webhook just sent is accepted; the same one captured and replayed ten minutes
	// later is refused, and so is one replayed at once under another Paykit-Event-Id.
	body := []byte(`{"event_id":"evt_1","type":"payment.paid"}`)
	for _, try := range []struct {
		sentAt time.Time
		id     string
	}{{time.Now(), "evt_1"}, {time.Now().Add(-10 * time.Minute), "evt_1"}, {time.Now(), "evt_2"}} {
		req := httptest.NewRequest(http.MethodPost, "/webhooks/paykit", bytes.NewReader(body))
		req.Header.Set("Paykit-Signature", webhook.Sign(body, try.sentAt, secret))
		req.Header.Set("Paykit-Event-Id", try.id)
		rec := httptest.NewRecorder()
		handler(rec, req)
		fmt.Print(rec.Code, " ", rec.Body.String())
	}
	// Output:
	// evt_1 204 401 webhook: timestamp outside the tolerance window
	// 401 webhook: the event id is not the signed body's
}
