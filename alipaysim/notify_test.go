package alipaysim_test

import (
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/paykit/paykit/alipaysim"
)

// verifyNotification checks a delivered form with the independent verifier: every field
// but sign and sign_type, sorted, k=v joined with &.
func verifyNotification(t *testing.T, h *harness, form url.Values) {
	t.Helper()
	if err := verify(parsePub(t, h.keys.AlipayPublicKeyPEM), []byte(canonical(form, "sign", "sign_type")), form.Get("sign")); err != nil {
		t.Fatalf("notification signature: %v\n%v", err, form)
	}
}

// TestNotificationRetrySchedule: a merchant that never answers "success" gets 8
// deliveries of the same notification (same notify_id, same bytes) at the scaled intervals
// 4m, 10m, 10m, 1h, 2h, 6h, 15h, and then no more. Attempts are due at fixed offsets from
// the payment (so one late attempt does not push the next ones), and each is checked
// against its offset: never early, and at most 300 ms late on a loaded machine.
func TestNotificationRetrySchedule(t *testing.T) {
	t.Parallel()
	const scale = 36000 // 15h becomes 1.5s
	h := newHarness(t, func(c *alipaysim.Config) { c.TimeScale = scale }, func(int) string { return "fail" })
	h.precreate(t, "S_retry", "9.90")
	paid := time.Now()
	if _, err := h.sim.Pay("", "S_retry", ""); err != nil {
		t.Fatal(err)
	}
	var got []delivery
	for range 8 {
		got = append(got, h.sink.next(t, 5*time.Second))
	}
	h.sink.none(t, 500*time.Millisecond)

	first := got[0]
	verifyNotification(t, h, first.form)
	for i, d := range got {
		if d.body != first.body {
			t.Fatalf("delivery %d differs from the first:\n%s\n%s", i+1, d.body, first.body)
		}
	}
	if first.form.Get("notify_id") == "" || first.form.Get("trade_status") != "TRADE_SUCCESS" || first.form.Get("total_amount") != "9.90" {
		t.Fatalf("form = %v", first.form)
	}

	log := h.sim.Notifications()
	if len(log) != 8 {
		t.Fatalf("log has %d attempts", len(log))
	}
	want := alipaysim.DefaultNotifySchedule()
	var due time.Duration // scaled offset of attempt i+1 from the payment
	for i, e := range log {
		if e.Attempt != i+1 || e.NotifyID != first.form.Get("notify_id") || e.Acknowledged || e.ResponseBody != "fail" {
			t.Fatalf("attempt %d = %+v", i+1, e)
		}
		if i > 0 {
			due += want[i-1]
			t.Logf("attempt %d: %v after attempt %d (schedule %v → %v scaled)", i+1, e.At.Sub(log[i-1].At).Round(time.Millisecond),
				i, want[i-1], (want[i-1] / scale).Round(100*time.Microsecond))
		}
		expected := due / scale
		if at := e.At.Sub(paid); at < expected-time.Millisecond || at > expected+300*time.Millisecond {
			t.Errorf("attempt %d sent %v after the payment; want %v (the schedule's offset, scaled)", i+1, at, expected)
		}
	}
}

// TestOnlyExactSuccessAcknowledges: "SUCCESS", "success\n", " success" and "ok" are
// failures; the first exact "success" stops the redeliveries.
func TestOnlyExactSuccessAcknowledges(t *testing.T) {
	t.Parallel()
	replies := []string{"SUCCESS", "success\n", " success", "ok", "success"}
	h := newHarness(t, nil, func(n int) string {
		if n < len(replies) {
			return replies[n]
		}
		return "success"
	})
	h.precreate(t, "S_ack", "1")
	if _, err := h.sim.Pay("", "S_ack", ""); err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for range replies {
		ids[h.sink.next(t, 5*time.Second).form.Get("notify_id")] = true
	}
	h.sink.none(t, 400*time.Millisecond) // the 6th would come 2h/36000 = 200ms later
	if len(ids) != 1 {
		t.Fatalf("notify_id changed across deliveries: %v", ids)
	}
	log := h.sim.Notifications()
	for i, e := range log {
		if e.Acknowledged != (i == len(replies)-1) || e.ResponseBody != replies[i] {
			t.Fatalf("attempt %d = %+v", i+1, e)
		}
	}
}

func TestNotificationFaults(t *testing.T) {
	t.Parallel()

	t.Run("drop next", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, nil, nil)
		h.precreate(t, "S_drop1", "1")
		h.precreate(t, "S_drop2", "1")
		h.sim.SetNotificationFaults(alipaysim.NotificationFaults{DropNext: 1})
		if _, err := h.sim.Pay("", "S_drop1", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := h.sim.Pay("", "S_drop2", ""); err != nil {
			t.Fatal(err)
		}
		if d := h.sink.next(t, 5*time.Second); d.form.Get("out_trade_no") != "S_drop2" {
			t.Fatalf("delivered %v", d.form)
		}
		h.sink.none(t, 300*time.Millisecond)
		log := h.sim.Notifications()
		if len(log) != 2 || !log[0].Dropped || log[0].OutTradeNo != "S_drop1" || log[1].Dropped {
			t.Fatalf("log = %+v", log)
		}
	})

	t.Run("concurrent copies", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		inflight, peak := 0, 0
		h := newHarness(t, nil, nil)
		// Hold every copy briefly so that concurrency is observable.
		slow := newSink(t, func(int) string {
			mu.Lock()
			inflight++
			peak = max(peak, inflight)
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
			mu.Lock()
			inflight--
			mu.Unlock()
			return "success"
		})
		h.sink = slow
		h.precreate(t, "S_copies", "1")
		h.sim.SetNotificationFaults(alipaysim.NotificationFaults{Copies: 4})
		if _, err := h.sim.Pay("", "S_copies", ""); err != nil {
			t.Fatal(err)
		}
		ids := map[string]int{}
		for range 4 {
			ids[slow.next(t, 5*time.Second).form.Get("notify_id")]++
		}
		slow.none(t, 300*time.Millisecond)
		if len(ids) != 1 {
			t.Fatalf("copies carry different notify_ids: %v", ids)
		}
		mu.Lock()
		defer mu.Unlock()
		t.Logf("4 copies, peak concurrency at the merchant: %d", peak)
		if peak < 2 {
			t.Fatalf("copies were not concurrent (peak %d)", peak)
		}
	})

	t.Run("hold and release in reverse", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, nil, nil)
		nos := []string{"S_hold1", "S_hold2", "S_hold3"}
		for _, no := range nos {
			h.precreate(t, no, "1")
		}
		h.sim.SetNotificationFaults(alipaysim.NotificationFaults{Hold: true})
		for _, no := range nos {
			if _, err := h.sim.Pay("", no, ""); err != nil {
				t.Fatal(err)
			}
		}
		h.sink.none(t, 200*time.Millisecond)
		if f := h.sim.Faults(); f.Held != 3 {
			t.Fatalf("held = %d", f.Held)
		}
		n, err := h.sim.ReleaseNotifications(alipaysim.ReleaseLIFO)
		if err != nil || n != 3 {
			t.Fatalf("release = %d, %v", n, err)
		}
		var order []string
		for range nos {
			order = append(order, h.sink.next(t, 5*time.Second).form.Get("out_trade_no"))
		}
		if want := []string{"S_hold3", "S_hold2", "S_hold1"}; !slices.Equal(order, want) {
			t.Fatalf("order = %v; want %v", order, want)
		}
	})

	t.Run("delay", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, nil, nil)
		h.precreate(t, "S_delay", "1")
		h.sim.SetNotificationFaults(alipaysim.NotificationFaults{DelayMS: 300})
		start := time.Now()
		if _, err := h.sim.Pay("", "S_delay", ""); err != nil {
			t.Fatal(err)
		}
		if d := h.sink.next(t, 5*time.Second); d.at.Sub(start) < 300*time.Millisecond {
			t.Fatalf("delivered after %v", d.at.Sub(start))
		}
	})

	t.Run("refund and close notifications", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, nil, nil)
		h.precreate(t, "S_life", "10")
		if _, err := h.sim.Pay("", "S_life", ""); err != nil {
			t.Fatal(err)
		}
		verifyNotification(t, h, h.sink.next(t, 5*time.Second).form)
		a := h.postRaw(t, nil, signedForm(t, parsePriv(t, h.keys.AppPrivateKeyPEM), "alipay.trade.refund",
			map[string]string{"out_trade_no": "S_life", "refund_amount": "4", "out_request_no": "R1"}))
		if a.get("fund_change") != "Y" {
			t.Fatalf("refund = %v", a.fields)
		}
		d := h.sink.next(t, 5*time.Second)
		verifyNotification(t, h, d.form)
		if d.form.Get("trade_status") != "TRADE_SUCCESS" || d.form.Get("refund_fee") != "4.00" || d.form.Get("out_biz_no") != "R1" || d.form.Get("gmt_refund") == "" {
			t.Fatalf("partial refund notification = %v", d.form)
		}
		h.postRaw(t, nil, signedForm(t, parsePriv(t, h.keys.AppPrivateKeyPEM), "alipay.trade.refund",
			map[string]string{"out_trade_no": "S_life", "refund_amount": "6", "out_request_no": "R2"}))
		d = h.sink.next(t, 5*time.Second)
		if d.form.Get("trade_status") != "TRADE_CLOSED" || d.form.Get("refund_fee") != "10.00" {
			t.Fatalf("full refund notification = %v", d.form)
		}
	})

	t.Run("payment notifications only", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, func(c *alipaysim.Config) { c.PaymentNotificationsOnly = true }, nil)
		h.precreate(t, "S_only1", "1")
		h.precreate(t, "S_only2", "1")
		if _, err := h.sim.Expire("", "S_only1"); err != nil {
			t.Fatal(err)
		}
		if _, err := h.sim.Pay("", "S_only2", ""); err != nil {
			t.Fatal(err)
		}
		if d := h.sink.next(t, 5*time.Second); d.form.Get("out_trade_no") != "S_only2" {
			t.Fatalf("delivered %v", d.form)
		}
		h.sink.none(t, 200*time.Millisecond)
	})
}
