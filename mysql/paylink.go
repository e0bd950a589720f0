package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/paykit/paykit/payment"
)

const (
	// A payment's pay link is written only while it is pending, so a late OpenTrade
	// retry cannot attach one to a paid or closed payment.
	qSetPayLink     = `UPDATE payments SET pay_link = ? WHERE payment_no = ? AND status = 0`
	qPendingPayLink = `SELECT COALESCE(pay_link, '') FROM payments WHERE payment_no = ? AND tenant_id = ? AND status = 0`
)

// SetPayLink keeps the pay link of a pending payment; a payment that is not pending (or
// does not exist) is left as it is.
func (st *Store) SetPayLink(ctx context.Context, paymentNo, link string) error {
	if _, err := st.exec(ctx, nil, qSetPayLink, link, paymentNo); err != nil {
		return fmt.Errorf("mysql: set pay link of %s: %w", paymentNo, err)
	}
	return nil
}

// PendingPayLink returns the pay link of a tenant's pending payment, and "" once the
// payment is not pending, belongs to another tenant or has none.
func (st *Store) PendingPayLink(ctx context.Context, tenantID, paymentNo string) (string, error) {
	var link string
	err := st.queryRow(ctx, nil, qPendingPayLink, []any{paymentNo, tenantID}, func(row *sql.Row) error { return row.Scan(&link) })
	if errors.Is(err, payment.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("mysql: pay link of %s: %w", paymentNo, err)
	}
	return link, nil
}
