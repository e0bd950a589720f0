package mysql

import (
	"context"
	"time"
)

// SetAfterEventInsert makes st call f inside each transition's transaction right after
// it wrote the outbox event, before the commit: a test holds a transaction open there.
func SetAfterEventInsert(st *Store, f func(paymentNo string)) { st.afterEventInsert = f }

// SetEventIDs makes st give each outbox event the id f returns instead of AUTO_INCREMENT's.
func SetEventIDs(st *Store, f func() int64) { st.eventIDs = f }

// QPaidWithoutGrant is the grant repair's query, for its EXPLAIN.
const QPaidWithoutGrant = qPaidWithoutGrant

// QOldestUnsettled is the backlog's oldest unsettled notification, for its EXPLAIN.
const QOldestUnsettled = qOldestUnsettled

// The staged bill lines' retention purge, for its EXPLAIN.
const (
	QOldStatementDay      = qOldStatementDay
	QOldStatementDayAfter = qOldStatementDayAfter
	QPurgeStatementDay    = qPurgeStatementDay
)

// The inbox's sweep statements, for their EXPLAIN.
const (
	QSettlePaidNotifications = qSettlePaidNotifications
	QPurgeNotifications      = qPurgeNotifications
)

// The audit's change reads, for their EXPLAIN.
const (
	QChangedPayments = qChangedPayments
	QChangedRefunds  = qChangedRefunds
	QChangedEvents   = qChangedEvents
)

// StatementLockName is the named lock of an (app, day).
var StatementLockName = statementLockName

// SetStatementLockCheck makes st check its held statement locks every d.
func SetStatementLockCheck(st *Store, d time.Duration) { st.lockCheck = d }

// StatementLockConn is the connection id holding the statement lock of held, the
// context LockStatement returned.
func StatementLockConn(held context.Context) int64 {
	id, _ := held.Value(lockConnKey{}).(int64)
	return id
}

// SetStatementLockRelease makes st let go of its statement locks with query, which a
// test makes fail.
func SetStatementLockRelease(st *Store, query string) { st.releaseLock = query }

// QPurgeDeliveredEvents is the purge's read of the delivered events it deletes, for its
// EXPLAIN.
const QPurgeDeliveredEvents = qDeliveredEventsToPurge

// QPurgeResolvedAnomalies is the purge of resolved anomalies, for its EXPLAIN.
const QPurgeResolvedAnomalies = qPurgeResolvedAnomalies

// QListAnomalies is the operators' list of anomalies, for its EXPLAIN.
const QListAnomalies = qListAnomalies
