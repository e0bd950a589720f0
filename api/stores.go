package api

import "github.com/paykit/paykit/payment"

// Stores are the records the API reads and writes, one interface per noun of package
// payment. The wiring sets each to the same *mysql.Store; a handler test sets each to the
// fake it needs. New refuses a Stores with one left nil.
type Stores struct {
	payment.Payments        // the checkout and the payment reads
	payment.PayLinks        // a pending payment's pay link, shown again
	payment.Refunds         // refund requests and reads
	payment.IdempotencyKeys // the Idempotency-Key protocol
	payment.Notifications   // Alipay's notifications as received
	payment.Inbox           // their hand-over to the payments after the acknowledgement
	payment.EventFeed       // a tenant's events
	payment.Tenants         // a payment's tenant
	payment.APIKeys         // authentication
	payment.Anomalies       // what an operator must look at
	payment.Pinger          // readiness
}

// check names the first noun left nil.
func (s Stores) check() error { return payment.UnsetNoun(s) }
