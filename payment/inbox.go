package payment

import (
	"context"
	"time"
)

// Inbox is the durable side of Alipay's notifications once they are acknowledged. A
// verified notification is recorded with a DispatchDueAt and acknowledged at once; from
// then on paykit owns it until it is settled by its effect: the payment PAID with its
// trade_no, an anomaly naming it, or a record that says it needs nothing (a status that
// advances nothing, a refund already final). Temporal accepting a signal settles nothing.
type Inbox interface {
	// SettleNotification records a notification's outcome and that it needs nothing more.
	SettleNotification(ctx context.Context, id int64, outcome string) error
	// SettlePaidNotifications settles every unsettled verified payment notification (not
	// a refund's) whose payment is PAID with its trade_no, and returns how many it settled.
	SettlePaidNotifications(ctx context.Context, now time.Time) (int64, error)
	// DueNotifications returns up to limit unsettled verified notifications whose
	// DispatchDueAt is at or before now, the most overdue first.
	DueNotifications(ctx context.Context, now time.Time, limit int) ([]ChannelNotification, error)
	// ClaimNotificationDispatch moves a due notification's next hand-over to next and
	// counts the attempt, if its DispatchAttempts is still attempts (another process did
	// not claim it first): claimed=false otherwise.
	ClaimNotificationDispatch(ctx context.Context, id int64, attempts int, next time.Time) (claimed bool, err error)
	// ArmNotification makes an unsettled notification with no hand-over due (one recorded
	// before the inbox) due at due.
	ArmNotification(ctx context.Context, id int64, due time.Time) error
	// PurgeNotifications deletes up to limit notifications received before before that
	// need nothing more (settled, unverified, or recorded before the inbox), and returns
	// how many it deleted. Unsettled ones are kept whatever their age.
	PurgeNotifications(ctx context.Context, before time.Time, limit int) (int64, error)
}
