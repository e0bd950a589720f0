package gateways_test

import (
	"context"
	"errors"
	"testing"

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
func (g answering) Precreate(context.Context, payment.TradeRequest) (string, error) {
	return "qr", g.err
}
func (g answering) Refund(context.Context, payment.RefundRequest) (payment.RefundResult, error) {
	return payment.RefundResult{}, g.err
}

// countingLimiter counts what it is asked, and refuses when told to.
type countingLimiter struct {
	takes, throttled int
	refuse           error
}

func (l *countingLimiter) Take(context.Context, string) error {
	l.takes++
	return l.refuse
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
		"precreate": func(g payment.Gateway) error { _, err := g.Precreate(ctx, payment.TradeRequest{}); return err },
		"refund":    func(g payment.Gateway) error { _, err := g.Refund(ctx, payment.RefundRequest{}); return err },
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
