package webhook_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/paykit/paykit/webhook"
)

func ExampleStandardSignature() {
	// The tenant's webhook secret in the whsec_ form `paykit tenant` shows.
	wh, err := standardwebhooks.NewWebhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		panic(err)
	}
	handler := func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		// The exact bytes received: checks the time (5 minutes) and the signature, which
		// covers webhook-id, webhook-timestamp and the body.
		if err := wh.Verify(body, r.Header); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		// Verified and fresh: dedupe on webhook-id (the body's event_id), then act on body.
		var ev struct {
			EventID string `json:"event_id"`
			Type    string `json:"type"`
		}
		if err := json.Unmarshal(body, &ev); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		fmt.Print(r.Header.Get("webhook-id") == ev.EventID, " ")
		w.WriteHeader(http.StatusNoContent)
	}

	// A webhook just sent is accepted; the same one captured and replayed ten minutes
	// later is refused, and so is one replayed at once under another webhook-id.
	body := []byte(`{"event_id":"evt_1","type":"payment.paid"}`)
	for _, try := range []struct {
		sentAt time.Time
		id     string
	}{{time.Now(), "evt_1"}, {time.Now().Add(-10 * time.Minute), "evt_1"}, {time.Now(), "evt_2"}} {
		sig, _ := webhook.StandardSignature("evt_1", try.sentAt, body, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
		req := httptest.NewRequest(http.MethodPost, "/webhooks/paykit", bytes.NewReader(body))
		req.Header.Set("webhook-id", try.id)
		req.Header.Set("webhook-timestamp", strconv.FormatInt(try.sentAt.Unix(), 10))
		req.Header.Set("webhook-signature", sig)
		rec := httptest.NewRecorder()
		handler(rec, req)
		fmt.Print(rec.Code, " ", rec.Body.String())
	}
	// Output:
	// true 204 401 unable to verify payload, err: message timestamp too old
	// 401 unable to verify payload, err: no matching signature found
}
