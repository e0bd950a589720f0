package checkout_test

import (
	"context"

	"github.com/paykit/paykit/checkout"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/payment/paymenttest"
	"github.com/paykit/paykit/runs"
)

// fakeStore is the Stores of a checkout: paymenttest.Payments, which keeps one pending
// payment per order as the active-order unique index does.
type fakeStore struct{ paymenttest.Payments }

func newFakeStore() *fakeStore {
	return &fakeStore{Payments: paymenttest.Payments{ByNo: map[string]payment.Payment{}, Links: map[string]string{}}}
}

func (f *fakeStore) stores() checkout.Stores { return checkout.Stores{Payments: f, PayLinks: f} }

// fakeOrch is the Orchestrator: it records the checkout updates and starts asked of it.
type fakeOrch struct {
	updateIDs []string
	lastIn    runs.PaymentInput
	// errs answer the next checkout updates, one each; err answers the rest.
	errs []error
	err  error
	// opened are the inputs of StartOpened; startErr fails it and startRunning answers
	// started=false (a run of the order is already running).
	opened       []runs.PaymentInput
	startErr     error
	startRunning bool
}

func (o *fakeOrch) Checkout(_ context.Context, in runs.PaymentInput, updateID string) (runs.CheckoutResult, error) {
	o.updateIDs = append(o.updateIDs, updateID)
	o.lastIn = in
	err := o.err
	if len(o.errs) > 0 {
		err, o.errs = o.errs[0], o.errs[1:]
	}
	if err != nil {
		return runs.CheckoutResult{}, err
	}
	return runs.CheckoutResult{PaymentNo: "PUPDATE", TenantID: in.TenantID, OrderID: in.OrderID, Status: payment.StatusPending,
		Amount: in.Amount, Currency: in.Currency, Subject: in.Subject}, nil
}

func (o *fakeOrch) StartOpened(_ context.Context, in runs.PaymentInput) (bool, error) {
	if o.startErr != nil {
		return false, o.startErr
	}
	if o.startRunning {
		return false, nil
	}
	o.opened = append(o.opened, in)
	return true, nil
}

// fakeTokens are the one-time tokens: a token is issued for an order and bound to the
// first binder that claims it.
type fakeTokens struct {
	issued   map[string]string // token -> order
	bound    map[string]string // token -> binder
	err      error
	released int
}

func newFakeTokens(tokenOrder ...string) *fakeTokens {
	t := &fakeTokens{issued: map[string]string{}, bound: map[string]string{}}
	for i := 0; i+1 < len(tokenOrder); i += 2 {
		t.issued[tokenOrder[i]] = tokenOrder[i+1]
	}
	return t
}

func (t *fakeTokens) ClaimToken(_ context.Context, _, token, orderID, binder string) (string, bool, error) {
	if t.err != nil {
		return "", false, t.err
	}
	order, ok := t.issued[token]
	if !ok {
		return "", false, nil
	}
	if order != orderID {
		return order, false, nil
	}
	if b, ok := t.bound[token]; ok && b != binder {
		return order, false, nil
	}
	t.bound[token] = binder
	return order, true, nil
}

func (t *fakeTokens) ReleaseToken(_ context.Context, _, token, binder string) error {
	if t.bound[token] == binder {
		delete(t.bound, token)
		t.released++
	}
	return nil
}

// fakeGateway signs the hand-offs of page, wap and app payments, as Alipay's adapter
// does, and opens nothing: a QR payment's trade is the workflow's to open. Any other call
// fails with its name (paymenttest.Gateway).
type fakeGateway struct {
	paymenttest.Gateway
	refuse *payment.ChannelError
}

func (g fakeGateway) SignedHandOff(_ context.Context, req payment.TradeRequest) (payment.HandOff, bool, error) {
	if req.Method == payment.MethodQR {
		return payment.HandOff{}, false, nil
	}
	if g.refuse != nil {
		return payment.HandOff{}, false, g.refuse
	}
	link := "https://cashier.test/" + string(req.Method) + "?out_trade_no=" + req.PaymentNo
	if req.Method == payment.MethodApp {
		return payment.HandOff{OrderString: link}, true, nil
	}
	return payment.HandOff{PayURL: link}, true, nil
}
