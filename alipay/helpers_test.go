package alipay_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/paykit/paykit/alipay"
	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/alipaysim/simtest"
	"github.com/paykit/paykit/payment"
)

const (
	testAppID    = simtest.AppID
	testSellerID = simtest.SellerID
)

func testKeys(tb testing.TB) alipaysim.KeySet { return simtest.Keys(tb) }

// received is one notification as the merchant's notify_url saw it.
type received struct {
	form url.Values
	at   time.Time
}

// notifySink is a merchant notify_url. reply chooses the body for the n-th delivery (0-based).
type notifySink struct {
	srv   *httptest.Server
	mu    sync.Mutex
	got   []received
	reply func(n int) string
	ch    chan received
}

func newNotifySink(tb testing.TB, reply func(n int) string) *notifySink {
	tb.Helper()
	if reply == nil {
		reply = func(int) string { return "success" }
	}
	s := &notifySink{reply: reply, ch: make(chan received, 256)}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		form, err := url.ParseQuery(string(body))
		if err != nil {
			http.Error(w, "bad form", http.StatusBadRequest)
			return
		}
		rec := received{form: form, at: time.Now()}
		s.mu.Lock()
		n := len(s.got)
		s.got = append(s.got, rec)
		s.mu.Unlock()
		s.ch <- rec
		_, _ = io.WriteString(w, s.reply(n))
	}))
	tb.Cleanup(s.srv.Close)
	return s
}

func (s *notifySink) URL() string { return s.srv.URL + "/alipay/notify" }

// next waits for the next notification.
func (s *notifySink) next(tb testing.TB, timeout time.Duration) received {
	tb.Helper()
	select {
	case r := <-s.ch:
		return r
	case <-time.After(timeout):
		tb.Fatalf("no notification within %s", timeout)
		return received{}
	}
}

// env is a simulator behind a real HTTP server, an adapter pointed at it, and a notify sink.
type env struct {
	keys alipaysim.KeySet
	sim  *alipaysim.Simulator
	srv  *httptest.Server
	gw   *alipay.Gateway
	sink *notifySink
}

type envOption func(*alipaysim.Config, *alipay.Config)

func newEnv(tb testing.TB, opts ...envOption) *env {
	tb.Helper()
	keys := testKeys(tb)
	e := &env{keys: keys, sink: newNotifySink(tb, nil)}
	gwCfg := alipay.Config{
		AppID:              testAppID,
		SellerID:           testSellerID,
		AppPrivateKeyPEM:   keys.AppPrivateKeyPEM,
		AlipayPublicKeyPEM: keys.AlipayPublicKeyPEM,
		NotifyURL:          e.sink.URL(),
		Timeout:            5 * time.Second,
	}
	e.sim, e.srv = simtest.Start(tb, func(simCfg *alipaysim.Config) {
		simCfg.TimeScale = 36000
		for _, o := range opts {
			o(simCfg, &gwCfg)
		}
	})
	if gwCfg.GatewayURL == "" {
		gwCfg.GatewayURL = e.srv.URL + alipaysim.GatewayPath
	}
	gw, err := alipay.New(gwCfg)
	if err != nil {
		tb.Fatal(err)
	}
	e.gw = gw
	return e
}

func tradeReq(no string, amount payment.Amount) payment.TradeRequest {
	return payment.TradeRequest{
		PaymentNo: no,
		Subject:   "测试订单 " + no,
		Amount:    amount,
		ExpireAt:  time.Now().Add(30 * time.Minute),
	}
}

// channelError asserts err is a *payment.ChannelError and returns it.
func channelError(tb testing.TB, err error) *payment.ChannelError {
	tb.Helper()
	ce, ok := err.(*payment.ChannelError)
	if !ok {
		tb.Fatalf("error %v (%T) is not a *payment.ChannelError", err, err)
	}
	return ce
}
