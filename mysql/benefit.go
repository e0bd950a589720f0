package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/paykit/paykit/payment"
)

const (
	// qInsertGrant reports 1 affected row for a new grant and 0 for an existing one.
	// ON DUPLICATE KEY UPDATE is used rather than INSERT IGNORE, which would also hide
	// truncation and other errors.
	qInsertGrant = `INSERT INTO benefit_grants (tenant_id, payment_no, order_id, benefit, created_at)
VALUES (?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE id = id`
	// qInsertPaidGrant is qInsertGrant guarded by the payment in the same statement: a
	// row is inserted only for a PAID payment of the tenant, with its order. 0 affected
	// rows is an existing grant or a payment that is not paid, which a read tells apart.
	qInsertPaidGrant = `INSERT INTO benefit_grants (tenant_id, payment_no, order_id, benefit, created_at)
SELECT tenant_id, payment_no, order_id, ?, ? FROM payments WHERE payment_no = ? AND tenant_id = ? AND status = 1
ON DUPLICATE KEY UPDATE id = benefit_grants.id`
	qListGrants = `SELECT tenant_id, payment_no, order_id, benefit, created_at FROM benefit_grants
WHERE tenant_id = ? AND payment_no = ? ORDER BY created_at, id`
	// qPaidWithoutGrant walks idx_payments_paid_at (forced: on status = 1 alone the
	// optimizer may pick a status index and read every paid payment) over the payments paid in the
	// look-back window (by when they were paid, not created: a payment paid long after
	// its creation is still repaired) and probes uk_benefit_grants_payment once per
	// payment (an anti-join; with NOT EXISTS MariaDB reads the whole grants index into a
	// temporary table instead), then reads the rows of the ones it chose. A grant of any
	// benefit counts: the grant's identity is the payment. updated_at of a paid payment
	// is the moment MarkPaid committed, so the grace counts from when the workflow would
	// have granted, not from paid_at, which Alipay may report long before.
	qPaidWithoutGrant = `SELECT ` + paymentColumns + ` FROM payments JOIN (
	SELECT p.id AS lost_id FROM payments p FORCE INDEX (idx_payments_paid_at)
	LEFT JOIN benefit_grants g ON g.tenant_id = p.tenant_id AND g.payment_no = p.payment_no
	WHERE p.paid_at >= ? AND p.status = 1 AND p.updated_at < ? AND g.id IS NULL
	ORDER BY p.paid_at, p.id LIMIT ?
) lost ON lost.lost_id = payments.id
ORDER BY paid_at, id`
)

const maxBenefit = 128

// grantTime checks a grant and returns its creation time (now for a zero CreatedAt).
func (st *Store) grantTime(g payment.BenefitGrant) (time.Time, error) {
	if g.TenantID == "" || g.PaymentNo == "" || g.Benefit == "" || len(g.Benefit) > maxBenefit {
		return time.Time{}, payment.Errorf(payment.EINVALID, "a grant needs a tenant, a payment_no and a benefit of 1-%d bytes", maxBenefit)
	}
	if at := dbTime(g.CreatedAt); !at.IsZero() {
		return at, nil
	}
	return st.clock(), nil
}

// GrantBenefit inserts a grant; created=false if the payment was granted before, under
// any benefit name (uk_benefit_grants_payment). A zero CreatedAt means now.
func (st *Store) GrantBenefit(ctx context.Context, g payment.BenefitGrant) (bool, error) {
	at, err := st.grantTime(g)
	if err != nil {
		return false, err
	}
	res, err := st.exec(ctx, nil, qInsertGrant, g.TenantID, g.PaymentNo, g.OrderID, g.Benefit, at)
	if err != nil {
		return false, fmt.Errorf("mysql: grant %s for %s: %w", g.Benefit, g.PaymentNo, err)
	}
	created, err := affected(res)
	if err != nil {
		return false, fmt.Errorf("mysql: grant %s for %s: %w", g.Benefit, g.PaymentNo, err)
	}
	return created, nil
}

// GrantPaid grants a paid payment its benefit in one statement that reads the payment
// as it inserts: created=false if it was granted before; a payment of the tenant that is
// not PAID is payment.EILLEGALSTATE, and no such payment of the tenant payment.ErrNotFound.
// A zero CreatedAt means now.
func (st *Store) GrantPaid(ctx context.Context, g payment.BenefitGrant) (bool, error) {
	at, err := st.grantTime(g)
	if err != nil {
		return false, err
	}
	insert := func() (bool, error) {
		res, err := st.exec(ctx, nil, qInsertPaidGrant, g.Benefit, at, g.PaymentNo, g.TenantID)
		if err != nil {
			return false, fmt.Errorf("mysql: grant %s for %s: %w", g.Benefit, g.PaymentNo, err)
		}
		return affected(res)
	}
	created, err := insert()
	if err != nil || created {
		return created, err
	}
	// Granted before, or not a paid payment of this tenant: the rare path reads it.
	p, err := st.GetTenantPayment(ctx, g.TenantID, g.PaymentNo)
	if err != nil {
		return false, fmt.Errorf("mysql: grant %s for %s: %w", g.Benefit, g.PaymentNo, err)
	}
	if p.Status != payment.StatusPaid {
		return false, payment.Errorf(payment.EILLEGALSTATE, "payment %s is %s, not paid", p.PaymentNo, p.Status)
	}
	// PAID now. It may have become PAID between the insert and the read, so the insert
	// runs once more (a repeat is harmless): created=false only where a grant exists.
	return insert()
}

// ListGrants returns the grants of a payment, oldest first.
func (st *Store) ListGrants(ctx context.Context, tenantID, paymentNo string) ([]payment.BenefitGrant, error) {
	gs := []payment.BenefitGrant{}
	err := st.query(ctx, qListGrants, []any{tenantID, paymentNo}, func(rows *sql.Rows) error {
		var g payment.BenefitGrant
		err := rows.Scan(&g.TenantID, &g.PaymentNo, &g.OrderID, &g.Benefit, &g.CreatedAt)
		gs = append(gs, g)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: list grants: %w", err)
	}
	return gs, nil
}

// PaidWithoutGrant returns up to limit (default 100, at most 1000) payments paid at or
// after paidAfter, marked paid before markedBefore, that have no grant at all, by
// paid_at.
func (st *Store) PaidWithoutGrant(ctx context.Context, paidAfter, markedBefore time.Time, limit int) ([]payment.Payment, error) {
	ps := []payment.Payment{}
	args := []any{dbTime(paidAfter), dbTime(markedBefore), clampLimit(limit)}
	err := st.query(ctx, qPaidWithoutGrant, args, func(rows *sql.Rows) error {
		p, err := scanPayment(rows)
		ps = append(ps, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: paid without a grant: %w", err)
	}
	return ps, nil
}
