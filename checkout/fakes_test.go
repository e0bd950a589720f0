package checkout_test

import (
	"context"
	"sync"

	"github.com/paykit/paykit/checkout"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/payment/paymenttest"
	"github.com/paykit/paykit/runs"
)

// fakeStore is the Stores of a checkout: payment.Payments and payment.PayLinks over a map,
// keeping one pending payment per order as the active-order unique index does.
type fakeStore struct {
	mu       sync.Mutex
	payments map[string]payment.Payment
	links    map[string]string
	// standingErr fails OrderStanding (the paid-order read), which a checkout skips.
	standingErr error
	// hidePending hides an order's pending payment from OrderStanding: the race in which
	// another checkout's insert lands after the read.
	hidePending string
	creates     int
}

func newFakeStore() *fakeStore {
	return &fakeStore{payments: map[string]payment.Payment{}, links: map[string]string{}}
}

func (f *fakeStore) stores() checkout.Stores { return checkout.Stores{Payments: f, PayLinks: f} }

func (f *fakeStore) CreatePendingPayment(_ context.Context, np payment.NewPayment) (payment.Payment, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates++
	for _, p := range f.payments {
		if p.TenantID == np.TenantID && p.OrderID == np.OrderID && p.Status == payment.StatusPending {
			return p, true, nil
		}
	}
	p := payment.Payment{PaymentNo: np.PaymentNo, TenantID: np.TenantID, OrderID: np.OrderID, Amount: np.Amount, Currency: np.Currency,
		Subject: np.Subject, Method: np.Method, Repurchase: np.Repurchase, Status: payment.StatusPending, ExpireAt: np.ExpireAt,
		WorkflowID: np.WorkflowID}
	f.payments[p.PaymentNo] = p
	f.links[p.PaymentNo] = np.PayLink
	return p, false, nil
}

func (f *fakeStore) GetPayment(_ context.Context, no string) (payment.Payment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.payments[no]; ok {
		return p, nil
	}
	return payment.Payment{}, payment.ErrNotFound
}

func (f *fakeStore) GetTenantPayment(ctx context.Context, tenantID, no string) (payment.Payment, error) {
	p, err := f.GetPayment(ctx, no)
	if err == nil && p.TenantID != tenantID {
		return payment.Payment{}, payment.ErrNotFound
	}
	return p, err
}

func (f *fakeStore) OrderPaidPayment(_ context.Context, tenantID, orderID string) (payment.Payment, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.payments {
		if p.TenantID == tenantID && p.OrderID == orderID && p.Status == payment.StatusPaid {
			return p, true, nil
		}
	}
	return payment.Payment{}, false, nil
}

func (f *fakeStore) OrderStanding(_ context.Context, tenantID, orderID string) (paid, pending *payment.Payment, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.standingErr != nil {
		return nil, nil, f.standingErr
	}
	for _, p := range f.payments {
		if p.TenantID != tenantID || p.OrderID != orderID {
			continue
		}
		switch {
		case p.Status == payment.StatusPaid:
			paid = &p
		case p.Status == payment.StatusPending && orderID != f.hidePending:
			pending = &p
		}
	}
	return paid, pending, nil
}

func (f *fakeStore) ListOrderPayments(_ context.Context, tenantID, orderID string) ([]payment.Payment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ps []payment.Payment
	for _, p := range f.payments {
		if p.TenantID == tenantID && p.OrderID == orderID {
			ps = append(ps, p)
		}
	}
	return ps, nil
}

func (f *fakeStore) SetPayLink(_ context.Context, no, link string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.payments[no]; ok && p.Status == payment.StatusPending {
		f.links[no] = link
	}
	return nil
}

func (f *fakeStore) PendingPayLink(_ context.Context, tenantID, no string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.payments[no]; ok && p.TenantID == tenantID && p.Status == payment.StatusPending {
		return f.links[no], nil
	}
	return "", nil
}

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
