package gateways

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/paykit/paykit/payment"
)

// CodeCallLimited is Alipay's answer to an app over its call frequency (调用频次超限).
const CodeCallLimited = "40005"

// SubCodeFrequencyLimited is WeChat Pay's answer (429) to a merchant over its call
// frequency.
const SubCodeFrequencyLimited = "FREQUENCY_LIMITED"

// Limiter spaces the calls made to one Alipay app (or WeChat Pay merchant, by its mchid)
// on paykit's own initiative;
// *redis.CallLimiter implements it, shared by every process.
type Limiter interface {
	// Take waits until a call to appID may be made; an error means the call must not
	// be made now.
	Take(ctx context.Context, appID string) error
	// TryTake takes a turn of appID's limit if one is free now, without waiting: a zero
	// wait means it is taken, and any other is how long until the next turn. An error
	// means the limit could not be asked; no turn is taken.
	TryTake(ctx context.Context, appID string) (wait time.Duration, err error)
	// Throttled tells the limiter that Alipay answered that appID is over its call
	// frequency.
	Throttled(ctx context.Context, appID string)
}

// LocalLimiter is the Limiter of one process without Redis: each app's calls on paykit's
// own initiative at Rate a second, in bursts of Burst, on a limit of its own, so that an
// app over its rate holds back no other app's calls. Throttled drains the app's burst:
// its next calls come at Rate.
type LocalLimiter struct {
	Rate  float64
	Burst int

	mu   sync.Mutex
	apps map[string]*rate.Limiter
}

// Take implements Limiter.
func (l *LocalLimiter) Take(ctx context.Context, appID string) error {
	if l.Rate <= 0 {
		return nil
	}
	return l.app(appID).Wait(ctx)
}

// TryTake implements Limiter.
func (l *LocalLimiter) TryTake(_ context.Context, appID string) (time.Duration, error) {
	if l.Rate <= 0 {
		return 0, nil
	}
	return tryReserve(l.app(appID)), nil
}

// tryReserve takes a turn of lim if one is free now, and otherwise returns how long until
// the next without taking it.
func tryReserve(lim *rate.Limiter) time.Duration {
	now := time.Now()
	r := lim.ReserveN(now, 1)
	if !r.OK() {
		return time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d
	}
	return 0
}

// Throttled implements Limiter.
func (l *LocalLimiter) Throttled(_ context.Context, appID string) {
	if l.Rate <= 0 {
		return
	}
	lim := l.app(appID)
	_ = lim.ReserveN(time.Now(), lim.Burst())
}

func (l *LocalLimiter) app(appID string) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.apps == nil {
		l.apps = map[string]*rate.Limiter{}
	}
	lim, ok := l.apps[appID]
	if !ok {
		lim = rate.NewLimiter(rate.Limit(l.Rate), max(l.Burst, 1))
		l.apps[appID] = lim
	}
	return lim
}

// Limited is gw with the calls paykit makes on its own initiative (trade and refund
// queries, closes, bill downloads: the reconciliation, the audit, the expiry, a refund's
// confirmation, the statement)
// taken from l first, and Alipay's throttling answers reported to it. The calls a buyer
// or a merchant asks for (opening a trade, a refund) are not held back.
func Limited(gw payment.Gateway, appID string, l Limiter) payment.Gateway {
	if l == nil {
		return gw
	}
	return limited{Gateway: gw, app: appID, l: l}
}

// closeUnknown is the outcome of a close not made: no outcome, as the adapter's own on an
// error (never CloseDone, the zero value).
const closeUnknown = payment.CloseOutcome(-1)

type limited struct {
	payment.Gateway
	app string
	l   Limiter
	// turn is a turn taken ahead (Turn), true until a call is made on it.
	turn *atomic.Bool
}

var _ payment.Paced = limited{}

func (g limited) take(ctx context.Context, op string) error {
	if g.turn != nil && g.turn.Swap(false) {
		return nil
	}
	if err := g.l.Take(ctx, g.app); err != nil {
		return &payment.ChannelError{Op: op, Message: "held back by the app's call rate", Retryable: true, Err: err}
	}
	return nil
}

// Turn implements payment.Paced: the gateway it returns makes its next query, close,
// refund query or bill download on the turn it took.
func (g limited) Turn(ctx context.Context) (payment.Gateway, time.Duration, error) {
	wait, err := g.l.TryTake(ctx, g.app)
	if err != nil {
		return nil, 0, &payment.ChannelError{Op: "turn", Message: "the app's call limit did not answer", Retryable: true, Err: err}
	}
	if wait > 0 {
		return nil, wait, nil
	}
	g.turn = new(atomic.Bool)
	g.turn.Store(true)
	return g, 0, nil
}

func (g limited) seen(ctx context.Context, err error) {
	var ce *payment.ChannelError
	if errors.As(err, &ce) && (ce.Code == CodeCallLimited || ce.SubCode == SubCodeFrequencyLimited) {
		g.l.Throttled(ctx, g.app)
	}
}

// Query implements payment.Gateway.
func (g limited) Query(ctx context.Context, paymentNo string) (payment.Trade, error) {
	if err := g.take(ctx, "alipay.trade.query"); err != nil {
		return payment.Trade{}, err
	}
	t, err := g.Gateway.Query(ctx, paymentNo)
	g.seen(ctx, err)
	return t, err
}

// Close implements payment.Gateway.
func (g limited) Close(ctx context.Context, paymentNo string) (payment.CloseOutcome, error) {
	if err := g.take(ctx, "alipay.trade.close"); err != nil {
		return closeUnknown, err
	}
	o, err := g.Gateway.Close(ctx, paymentNo)
	g.seen(ctx, err)
	return o, err
}

// QueryRefund implements payment.Gateway.
func (g limited) QueryRefund(ctx context.Context, paymentNo, outRequestNo string) (payment.RefundStatusAtChannel, error) {
	if err := g.take(ctx, "alipay.trade.fastpay.refund.query"); err != nil {
		return payment.RefundStatusAtChannel{}, err
	}
	s, err := g.Gateway.QueryRefund(ctx, paymentNo, outRequestNo)
	g.seen(ctx, err)
	return s, err
}

// BillDownloadURL keeps the bill capability of the wrapped gateway: a bill download is
// a call on paykit's own initiative.
func (g limited) BillDownloadURL(ctx context.Context, billDate string) (string, error) {
	b, ok := g.Gateway.(payment.BillSource)
	if !ok {
		return "", errors.New("the gateway cannot download bills")
	}
	if err := g.take(ctx, "alipay.data.dataservice.bill.downloadurl.query"); err != nil {
		return "", err
	}
	u, err := b.BillDownloadURL(ctx, billDate)
	g.seen(ctx, err)
	return u, err
}

// Open, Refund: a buyer's or a merchant's request, never held back; a throttling answer
// still holds the app's other calls.

// Open implements payment.Gateway.
func (g limited) Open(ctx context.Context, req payment.TradeRequest) (payment.HandOff, error) {
	h, err := g.Gateway.Open(ctx, req)
	g.seen(ctx, err)
	return h, err
}

// Refund implements payment.Gateway.
func (g limited) Refund(ctx context.Context, req payment.RefundRequest) (payment.RefundResult, error) {
	r, err := g.Gateway.Refund(ctx, req)
	g.seen(ctx, err)
	return r, err
}
