package activities_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/payment"
)

// TestWebhookToAnInternalAddressIsRefusedOnConnect: a notify_url whose name resolves to
// loopback ("localhost", which the literal check cannot see) reaches nothing: the dialer
// refuses the resolved address, the error stored for the tenant names the class only,
// and the server inside gets no request. A literal internal address is refused before
// any connection. Allowed, the same server is reached, and a closed port is stored as
// "connection refused", without the address. Before, the worker posted to any address
// and the tenant read the dialer's error, address and port included.
func TestWebhookToAnInternalAddressIsRefusedOnConnect(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var inside atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { inside.Add(1) }))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().String()
	ln.Close()

	deliver := func(p activities.WebhookPolicy, notifyURL string) (payment.Event, error) {
		t.Helper()
		id := "t_" + randomHex(4)
		if err := f.store.UpsertTenant(ctx, payment.Tenant{
			ID: id, Name: "destination test", APIKeyHash: randomHex(32), NotifyURL: notifyURL,
			WebhookSecret: testSecret, AlipayAppID: testAppID, AlipaySeller: testSellerID, CreatedAt: time.Now(),
		}); err != nil {
			t.Fatal(err)
		}
		f.acts.WebhookPolicy = p
		f.acts.HTTP = &http.Client{Timeout: 2 * time.Second, Transport: activities.NewWebhookTransport(p)}
		ev := f.paidEvents(t, id, 1)[0]
		err := f.remote(t, nil, f.acts.DeliverWebhook, ev)
		got, gerr := f.store.GetEvent(ctx, ev)
		if gerr != nil {
			t.Fatal(gerr)
		}
		return got, err
	}
	refuse := activities.WebhookPolicy{RefusePrivate: true} // http allowed: only the address decides
	ev, err := deliver(refuse, "http://localhost:"+port+"/hooks")
	if err == nil || ev.Delivered || inside.Load() != 0 {
		t.Fatalf("localhost: err %v, delivered %v, %d requests inside", err, ev.Delivered, inside.Load())
	}
	if !strings.HasPrefix(ev.LastError, "destination not allowed") || strings.Contains(ev.LastError, port) {
		t.Fatalf("error stored for the tenant: %q, want the class without the address", ev.LastError)
	}
	ev, err = deliver(refuse, srv.URL+"/hooks")
	if err == nil || inside.Load() != 0 || !strings.Contains(ev.LastError, "not a public address") {
		t.Fatalf("literal loopback: %v, %d requests, last_error %q", err, inside.Load(), ev.LastError)
	}
	ev, err = deliver(activities.WebhookPolicy{RequireHTTPS: true}, srv.URL+"/hooks")
	if err == nil || inside.Load() != 0 || !strings.Contains(ev.LastError, "must be https") {
		t.Fatalf("http with https required: %v, %d requests, last_error %q", err, inside.Load(), ev.LastError)
	}
	if ev, err = deliver(activities.WebhookPolicy{}, srv.URL+"/hooks"); err != nil || !ev.Delivered || inside.Load() != 1 {
		t.Fatalf("allowed: %v, delivered %v, %d requests", err, ev.Delivered, inside.Load())
	}
	ev, _ = deliver(activities.WebhookPolicy{}, "http://"+closed+"/hooks")
	if ev.LastError != "connection refused" {
		t.Fatalf("closed port: last_error %q, want \"connection refused\"", ev.LastError)
	}
}
