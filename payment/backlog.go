package payment

import "time"

// Backlog is the work waiting in the database that an operator's alerts watch: the
// outbox's oldest live undelivered event, its dead events, the payments still pending
// past their expiry, and the inbox's oldest unsettled notification.
type Backlog struct {
	// OldestUndeliveredAt is when the oldest event that is neither delivered nor dead was
	// written; zero when there is none.
	OldestUndeliveredAt time.Time
	// DeadEvents counts the events given up on after their last allowed attempt.
	DeadEvents int64
	// PendingExpired counts the PENDING payments whose expire_at is before the cutoff
	// the caller asked about.
	PendingExpired int64
	// OldestUnsettledNotificationAt is when the oldest acknowledged Alipay notification
	// whose effect is not seen yet was received; zero when there is none.
	OldestUnsettledNotificationAt time.Time
}
