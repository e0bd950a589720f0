package gateways_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/paykit/paykit/gateways"
	"github.com/paykit/paykit/payment"
)

// answering is a gateway whose every call answers err.
type answering struct {
	payment.Gateway
	err error
}

func (g answering) Query(context.Context, string) (payment.Trade, error) {
	return payment.Trade{}, g.err
}
func (g answering) Close(context.Context, string) (payment.CloseOutcome, error) {
	return payment.CloseNotExist, g.err
}
func (g answering) QueryRefund(context.Context, string, string) (payment.RefundStatusAtChannel, error) {
	return payment.RefundStatusAtChannel{}, g.err
}
func (g answering) Open(context.Context, payment.TradeRequest) (payment.HandOff, error) {
	return payment.HandOff{QRCode: "qr"}, g.err
}
func (g answering) Refund(context.Context, payment.RefundRequest) (payment.RefundResult, error) {
	return payment.RefundResult{}, g.err
}

// countingLimiter counts what it is asked, and refuses when told to: with refuse, or,
// for TryTake, with wait.
type countingLimiter struct {
	takes, throttled int
	refuse           error
	wait             time.Duration
}

func (l *countingLimiter) Take(context.Context, string) error {
	l.takes++
	return l.refuse
}
func (l *countingLimiter) TryTake(context.Context, string) (time.Duration, error) {
	if l.refuse != nil || l.wait > 0 {
		return l.wait, l.refuse
	}
	l.takes++
	return 0, nil
}
func (l *countingLimiter) Throttled(context.Context, string) { l.throttled++ }

// The calls paykit makes on its own initiative wait for the limit and are not made when
// it refuses; the calls a buyer or a merchant asks for are never held back; a 40005
// answer to any of them is reported to the limiter.
func TestLimitedGateway(t *testing.T) {
	ctx := context.Background()
	own := map[string]func(payment.Gateway) error{
		"query": func(g payment.Gateway) error { _, err := g.Query(ctx, "P1"); return err },
		"close": func(g payment.Gateway) error { _, err := g.Close(ctx, "P1"); return err },
		"refund query": func(g payment.Gateway) error {
			_, err := g.QueryRefund(ctx, "P1", "R1")
			return err
		},
	}
	asked := map[string]func(payment.Gateway) error{
		"open": func(g payment.Gateway) error {
			_, err := g.Open(ctx, payment.TradeRequest{Method: payment.MethodQR})
			return err
		},
		"refund": func(g payment.Gateway) error { _, err := g.Refund(ctx, payment.RefundRequest{}); return err },
	}
	limited := &payment.ChannelError{Op: "x", Code: gateways.CodeCallLimited, Retryable: true}
	for name, call := range own {
		l := &countingLimiter{}
		if err := call(gateways.Limited(answering{err: limited}, "2021A", l)); !errors.Is(err, limited) || l.takes != 1 || l.throttled != 1 {
			t.Errorf("%s answered 40005: %v, %d takes, %d throttled; want the answer, 1 and 1", name, err, l.takes, l.throttled)
		}
		l = &countingLimiter{refuse: errors.New("over the rate")}
		err := call(gateways.Limited(answering{}, "2021A", l))
		var ce *payment.ChannelError
		if !errors.As(err, &ce) || !ce.Retryable || l.throttled != 0 {
			t.Errorf("%s refused by the limit: %v; want a retryable channel error and no call", name, err)
		}
	}
	for name, call := range asked {
		l := &countingLimiter{refuse: errors.New("over the rate")}
		if err := call(gateways.Limited(answering{err: limited}, "2021A", l)); !errors.Is(err, limited) || l.takes != 0 || l.throttled != 1 {
			t.Errorf("%s: %v, %d takes, %d throttled; want it made, never held back, and its 40005 reported", name, err, l.takes, l.throttled)
		}
	}
	if g := gateways.Limited(answering{}, "2021A", nil); g != (answering{}) {
		t.Error("a nil limiter wraps the gateway")
	}
}

// billing is answering that can also download bills.
type billing struct{ answering }

func (billing) BillDownloadURL(context.Context, string) (string, error) { return "https://bills", nil }

// A limited gateway keeps the bill capability of the gateway it wraps (the statement
// finds its bill source by it), and a bill download is a call on paykit's own initiative.
func TestLimitedGatewayKeepsBills(t *testing.T) {
	l := &countingLimiter{}
	b, ok := gateways.Limited(billing{}, "2021A", l).(payment.BillSource)
	if !ok {
		t.Fatal("the limited gateway of a bill source is no bill source")
	}
	if u, err := b.BillDownloadURL(context.Background(), "2026-12-01"); err != nil || u != "https://bills" || l.takes != 1 {
		t.Fatalf("bill URL %q, %v, %d takes", u, err, l.takes)
	}
}

// A turn taken ahead (the reconciler takes one before it claims a query) is the limit's
// one take: the next query is made on it without asking the limit again, and a later
// query asks again. A turn that is not free, or a limit that does not answer, gives no
// gateway; a gateway without a limit has no turns to take.
func TestLimitedGatewayTurn(t *testing.T) {
	ctx := context.Background()
	l := &countingLimiter{}
	paced, ok := gateways.Limited(answering{}, "2021A", l).(payment.Paced)
	if !ok {
		t.Fatal("a limited gateway is not paced")
	}
	gw, wait, err := paced.Turn(ctx)
	if gw == nil || wait != 0 || err != nil || l.takes != 1 {
		t.Fatalf("turn: %v, %s, %v, %d takes; want a gateway on one take", gw, wait, err, l.takes)
	}
	if _, err := gw.Query(ctx, "P1"); err != nil || l.takes != 1 {
		t.Fatalf("query on the turn: %v, %d takes; want none more", err, l.takes)
	}
	if _, err := gw.Query(ctx, "P2"); err != nil || l.takes != 2 {
		t.Fatalf("a second query: %v, %d takes; want it to take its own", err, l.takes)
	}
	gw, wait, err = gateways.Limited(answering{}, "2021A", &countingLimiter{wait: 300 * time.Millisecond}).(payment.Paced).Turn(ctx)
	if gw != nil || wait != 300*time.Millisecond || err != nil {
		t.Fatalf("turn not free: %v, %s, %v; want no gateway and the wait", gw, wait, err)
	}
	gw, _, err = gateways.Limited(answering{}, "2021A", &countingLimiter{refuse: errors.New("limit down")}).(payment.Paced).Turn(ctx)
	var ce *payment.ChannelError
	if !errors.As(err, &ce) || !ce.Retryable || gw != nil {
		t.Fatalf("turn of a limit that does not answer: %v, %v; want a retryable channel error and no gateway", gw, err)
	}
	if _, ok := gateways.Limited(answering{}, "2021A", nil).(payment.Paced); ok {
		t.Fatal("a gateway without a limit is paced")
	}
}

// The limit of one process without Redis is each app's own: an app over its rate, or one
// Alipay throttled, holds back its own calls and no other app's.
func TestLocalLimiterHoldsEachAppAlone(t *testing.T) {
	l := &gateways.LocalLimiter{Rate: 1, Burst: 1}
	take := func(app string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		return l.Take(ctx, app)
	}
	if err := take("2021A"); err != nil {
		t.Fatal(err)
	}
	if err := take("2021A"); err == nil {
		t.Fatal("a second call to 2021A within its 1 s interval was let through at once")
	}
	if err := take("2021B"); err != nil {
		t.Fatalf("2021B held back by 2021A's rate: %v", err)
	}
	l.Throttled(context.Background(), "2021C")
	if err := take("2021C"); err == nil {
		t.Fatal("a call to 2021C right after alipay throttled it was let through")
	}
	if err := take("2021D"); err != nil {
		t.Fatalf("2021D held back by 2021C's throttling: %v", err)
	}
	if wait, err := l.TryTake(context.Background(), "2021E"); wait != 0 || err != nil {
		t.Fatalf("a free turn of 2021E: %s, %v; want it taken", wait, err)
	}
	if wait, err := l.TryTake(context.Background(), "2021E"); wait < 500*time.Millisecond || wait > time.Second || err != nil {
		t.Fatalf("2021E's next turn: %s, %v; want about 1 s", wait, err)
	}
	if wait, err := l.TryTake(context.Background(), "2021F"); wait != 0 || err != nil {
		t.Fatalf("2021F's turn after 2021E's: %s, %v; want it free", wait, err)
	}
	if err := (&gateways.LocalLimiter{}).Take(context.Background(), "2021A"); err != nil {
		t.Fatalf("no rate: %v, want no limit", err)
	}
}
