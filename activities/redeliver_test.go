package activities_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/payment"
)

// overlapEndpoint answers after delay and records, per event, how many requests it got
// and the most it had in flight at once.
type overlapEndpoint struct {
	srv       *httptest.Server
	mu        sync.Mutex
	inFlight  map[string]int
	maxAtOnce map[string]int
	hits      map[string]int
}

func newOverlapEndpoint(tb testing.TB, delay time.Duration) *overlapEndpoint {
	tb.Helper()
	e := &overlapEndpoint{inFlight: map[string]int{}, maxAtOnce: map[string]int{}, hits: map[string]int{}}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		id := r.Header.Get(activities.EventIDHeader)
		e.mu.Lock()
		e.hits[id]++
		e.inFlight[id]++
		e.maxAtOnce[id] = max(e.maxAtOnce[id], e.inFlight[id])
		e.mu.Unlock()
		time.Sleep(delay)
		e.mu.Lock()
		e.inFlight[id]--
		e.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	tb.Cleanup(e.srv.Close)
	return e
}

// Redeliveries asked for while two sweeps deliver the same events never send an event
// alongside another attempt at it: each request either waits its turn or is refused as
// busy, and every event ends delivered.
func TestRedeliverEvent_NeverAlongsideASweep(t *testing.T) {
	f := newFixture(t)
	f.acts.Redriver = &redriveRecorder{}
	e := newOverlapEndpoint(t, 50*time.Millisecond)
	id := "t_" + randomHex(4)
	if err := f.store.UpsertTenant(context.Background(), payment.Tenant{
		ID: id, Name: "redeliver test", APIKeyHash: randomHex(32), NotifyURL: e.srv.URL + "/webhooks",
		WebhookSecret: testSecret, CreatedAt: time.Now(),
	}); err != nil {
		t.Fatal(err)
	}
	ids := f.paidEvents(t, id, 6)
	var busy, delivered int
	var mu sync.Mutex
	testenv.Parallel(2+2*len(ids), func(i int) {
		if i < 2 {
			f.sweepEvents(context.Background(), t)
			return
		}
		res, err := f.acts.RedeliverEvent(context.Background(), activities.RedeliverInput{TenantID: id, EventID: ids[i%len(ids)]})
		mu.Lock()
		defer mu.Unlock()
		var appErr *temporal.ApplicationError
		switch {
		case errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeEventBusy:
			busy++
		case err != nil:
			t.Errorf("redeliver: %v", err)
		case res.Delivered:
			delivered++
		}
	})
	for _, evID := range ids {
		if e.maxAtOnce[evID] != 1 {
			t.Errorf("event %s: %d deliveries at once", evID, e.maxAtOnce[evID])
		}
		if ev, err := f.store.GetEvent(context.Background(), evID); err != nil || !ev.Delivered {
			t.Errorf("event %s not delivered: %+v %v", evID, ev, err)
		}
	}
	t.Logf("2 sweeps and %d redeliveries over %d events: %d redelivered, %d refused as busy, requests per event %v",
		2*len(ids), len(ids), delivered, busy, e.hits)
}

// A dead event redelivered on request is delivered after all; another tenant's event is
// not found; a delivered event is sent again.
func TestRedeliverEvent_DeadAndDelivered(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	evID := f.paidEvents(t, f.tenantID, 1)[0]
	retry := payment.EventRetry{Base: time.Minute, Max: time.Hour, MaxAttempts: 1}
	if _, died, err := f.store.MarkEventAttempt(ctx, evID, "HTTP 500", time.Now(), retry); err != nil || !died {
		t.Fatalf("make dead: %v %v", died, err)
	}
	for round := range 2 {
		res, err := f.acts.RedeliverEvent(ctx, activities.RedeliverInput{TenantID: f.tenantID, EventID: evID})
		if err != nil || !res.Delivered || !res.Event.Delivered || res.Event.Dead {
			t.Fatalf("round %d: %+v %v", round, res, err)
		}
	}
	if n := len(f.merchant.deliveries()); n != 2 {
		t.Fatalf("merchant got %d deliveries, want 2", n)
	}
	_, err := f.acts.RedeliverEvent(ctx, activities.RedeliverInput{TenantID: "t_other", EventID: evID})
	applicationError(t, err, activities.ErrTypeEventNotFound, true)
}
