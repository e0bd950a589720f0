package api

import (
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/paykit/paykit/payment"
)

// Page sizes of every /v1 list.
const (
	defaultPageLimit = 50
	maxPageLimit     = 100
	maxCursor        = 128
)

// page is a list request's ?after=<cursor>&limit=<n>.
type page struct {
	after string
	limit int
}

func pageOf(c echo.Context) (page, error) {
	pg := page{after: c.QueryParam("after"), limit: defaultPageLimit}
	if len(pg.after) > maxCursor {
		return page{}, payment.Errorf(payment.EINVALID, "after is not a cursor of this list")
	}
	if l := c.QueryParam("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxPageLimit {
			return page{}, payment.Errorf(payment.EINVALID, "limit must be 1-%d", maxPageLimit)
		}
		pg.limit = n
	}
	return pg, nil
}

// cut returns the first limit items, whether more follow, and the cursor of the last
// item returned ("" for none).
func cut[T any](items []T, limit int, cursor func(T) string) (_ []T, more bool, next string) {
	if len(items) > limit {
		items, more = items[:limit], true
	}
	if len(items) > 0 {
		next = cursor(items[len(items)-1])
	}
	return items, more, next
}

// after returns the items that follow the one whose cursor is after ("" for all of
// them), for lists read whole from the store (the payments of one order, the refunds of
// one payment: a handful each). An unknown cursor is a client error.
func after[T any](items []T, after string, cursor func(T) string) ([]T, error) {
	if after == "" {
		return items, nil
	}
	for i, it := range items {
		if cursor(it) == after {
			return items[i+1:], nil
		}
	}
	return nil, payment.Errorf(payment.EINVALID, "after is not a cursor of this list")
}
