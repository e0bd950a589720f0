package activities

import "github.com/paykit/paykit/payment"

// Stores are the records the activities read and write, one interface per noun of
// package payment. The worker sets each to the same *mysql.Store.
type Stores struct {
	payment.Payments            // a payment's insert and reads
	payment.PaymentTransitions  // PAID, CLOSED, FAILED; the pending ones for the sweeper
	payment.PayLinks            // the pay link kept once a trade is opened
	payment.QuerySchedule       // the scheduled reconciler's due queries
	payment.Refunds             // refunds opened and read
	payment.RefundTransitions   // SUCCEEDED, FAILED; the pending ones for the sweeper
	payment.Outbox              // webhook deliveries
	payment.EventFeed           // a tenant's event, redelivered on request
	payment.Grants              // the grant of a paid payment, and its repair
	payment.IdempotencyKeys     // expired keys purged
	payment.Tenants             // a payment's tenant (notify_url, webhook secret)
	payment.Anomalies           // what an operator must look at
	payment.NotificationRecords // the verified notification a notification signal names
	payment.EventRetention      // delivered events purged once past their retention
	payment.AnomalyRetention    // resolved anomalies purged once past their retention
}

// Check names the first noun left nil: the worker refuses to start on it rather than let
// an activity panic on its first call.
func (s Stores) Check() error { return payment.UnsetNoun(s) }
