package paymenttest

import (
	"context"
	"errors"
	"sync"

	"github.com/paykit/paykit/payment"
)

// Payments is payment.Payments and payment.PayLinks in memory, for the handler tests of
// the API and the checkout: one pending payment per order, as the active-order unique
// index keeps, and each pending payment's pay link. Its methods take Mu; a test that
// changes ByNo while requests run takes it too, and a fake that embeds Payments guards
// its own state with the same Mu. Its zero value is empty and ready.
type Payments struct {
	Mu sync.Mutex
	// ByNo is the payments by payment_no, Links their pay links.
	ByNo  map[string]payment.Payment
	Links map[string]string
	// HidePending is an order whose pending payment OrderStanding does not see: the race
	// in which another checkout's insert lands after the read.
	HidePending string
	// StandingErr fails OrderStanding (the paid-order read).
	StandingErr error
	// Down fails every call as a store that cannot be reached does.
	Down bool
	// Creates counts CreatePendingPayment calls.
	Creates int
}

var (
	_ payment.Payments = (*Payments)(nil)
	_ payment.PayLinks = (*Payments)(nil)
)

func (f *Payments) down() error {
	if f.Down {
		return errors.New("dial tcp 127.0.0.1:3306: connection refused")
	}
	return nil
}

// CreatePendingPayment implements payment.Payments: a second pending payment of an order
// is answered with the first, existed=true.
func (f *Payments) CreatePendingPayment(_ context.Context, np payment.NewPayment) (payment.Payment, bool, error) {
	if err := f.down(); err != nil {
		return payment.Payment{}, false, err
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Creates++
	for _, p := range f.ByNo {
		if p.TenantID == np.TenantID && p.OrderID == np.OrderID && p.Status == payment.StatusPending {
			return p, true, nil
		}
	}
	if f.ByNo == nil {
		f.ByNo = map[string]payment.Payment{}
	}
	if f.Links == nil {
		f.Links = map[string]string{}
	}
	p := payment.Payment{PaymentNo: np.PaymentNo, TenantID: np.TenantID, OrderID: np.OrderID, Amount: np.Amount, Currency: np.Currency,
		Subject: np.Subject, Method: np.Method, Repurchase: np.Repurchase, Status: payment.StatusPending,
		ExpireAt: np.ExpireAt, WorkflowID: np.WorkflowID}
	f.ByNo[p.PaymentNo] = p
	f.Links[p.PaymentNo] = np.PayLink
	return p, false, nil
}

// GetPayment implements payment.Payments.
func (f *Payments) GetPayment(_ context.Context, no string) (payment.Payment, error) {
	if err := f.down(); err != nil {
		return payment.Payment{}, err
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if p, ok := f.ByNo[no]; ok {
		return p, nil
	}
	return payment.Payment{}, payment.ErrNotFound
}

// GetTenantPayment implements payment.Payments: another tenant's payment is not found.
func (f *Payments) GetTenantPayment(ctx context.Context, tenantID, no string) (payment.Payment, error) {
	p, err := f.GetPayment(ctx, no)
	if err == nil && p.TenantID != tenantID {
		return payment.Payment{}, payment.ErrNotFound
	}
	return p, err
}

// OrderPaidPayment implements payment.Payments.
func (f *Payments) OrderPaidPayment(_ context.Context, tenantID, orderID string) (payment.Payment, bool, error) {
	if err := f.down(); err != nil {
		return payment.Payment{}, false, err
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	for _, p := range f.ByNo {
		if p.TenantID == tenantID && p.OrderID == orderID && p.Status == payment.StatusPaid {
			return p, true, nil
		}
	}
	return payment.Payment{}, false, nil
}

// OrderStanding implements payment.Payments.
func (f *Payments) OrderStanding(_ context.Context, tenantID, orderID string) (paid, pending *payment.Payment, err error) {
	if err := f.down(); err != nil {
		return nil, nil, err
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if f.StandingErr != nil {
		return nil, nil, f.StandingErr
	}
	for _, p := range f.ByNo {
		if p.TenantID != tenantID || p.OrderID != orderID {
			continue
		}
		switch {
		case p.Status == payment.StatusPaid:
			paid = &p
		case p.Status == payment.StatusPending && orderID != f.HidePending:
			pending = &p
		}
	}
	return paid, pending, nil
}

// ListOrderPayments implements payment.Payments (in no particular order).
func (f *Payments) ListOrderPayments(_ context.Context, tenantID, orderID string) ([]payment.Payment, error) {
	if err := f.down(); err != nil {
		return nil, err
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	var ps []payment.Payment
	for _, p := range f.ByNo {
		if p.TenantID == tenantID && p.OrderID == orderID {
			ps = append(ps, p)
		}
	}
	return ps, nil
}

// SetPayLink implements payment.PayLinks: only a pending payment keeps a link.
func (f *Payments) SetPayLink(_ context.Context, no, link string) error {
	if err := f.down(); err != nil {
		return err
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if p, ok := f.ByNo[no]; ok && p.Status == payment.StatusPending {
		if f.Links == nil {
			f.Links = map[string]string{}
		}
		f.Links[no] = link
	}
	return nil
}

// PendingPayLink implements payment.PayLinks: "" for a payment that is not the tenant's
// or not pending.
func (f *Payments) PendingPayLink(_ context.Context, tenantID, no string) (string, error) {
	if err := f.down(); err != nil {
		return "", err
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if p, ok := f.ByNo[no]; ok && p.TenantID == tenantID && p.Status == payment.StatusPending {
		return f.Links[no], nil
	}
	return "", nil
}
