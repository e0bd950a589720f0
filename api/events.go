package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/paykit/paykit/payment"
)

// Delivery states of an event in the feed.
const (
	deliveryPending   = "pending"
	deliveryDelivered = "delivered"
	deliveryDead      = "dead"
)

var eventIDPattern = regexp.MustCompile(`^[A-Za-z0-9_]{1,128}$`)

// EventView is an outbox event as the feed shows it: the webhook body as delivered, and
// where its delivery stands.
type EventView struct {
	EventID   string          `json:"event_id"`
	Type      string          `json:"type"`
	PaymentNo string          `json:"payment_no"`
	CreatedAt time.Time       `json:"created_at"`
	Payload   json.RawMessage `json:"payload"`
	Delivery  DeliveryView    `json:"delivery"`
	// Cursor is the position of the event in the feed: GET /v1/events?after=<cursor>
	// lists the events after it.
	Cursor string `json:"cursor"`
}

// DeliveryView is the delivery state of an event.
type DeliveryView struct {
	State         string    `json:"state"`
	Attempts      int       `json:"attempts"`
	LastError     string    `json:"last_error,omitempty"`
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
	DeliveredAt   time.Time `json:"delivered_at,omitzero"`
}

func eventView(ev payment.Event) EventView {
	d := DeliveryView{State: deliveryPending, Attempts: ev.Attempts, LastError: ev.LastError}
	switch {
	case ev.Delivered:
		d.State, d.DeliveredAt = deliveryDelivered, ev.DeliveredAt
	case ev.Dead:
		d.State = deliveryDead
	default:
		d.NextAttemptAt = ev.NextAttemptAt
	}
	payload := json.RawMessage(ev.Payload)
	if !json.Valid(payload) {
		payload, _ = json.Marshal(string(ev.Payload))
	}
	return EventView{EventID: ev.EventID, Type: ev.Type, PaymentNo: ev.PaymentNo, CreatedAt: ev.CreatedAt,
		Payload: payload, Delivery: d, Cursor: strconv.FormatInt(ev.Seq, 10)}
}

// listEvents is the tenant's outbox as a feed, oldest first, from after the cursor. A
// cursor the retention purge has passed (events after it were deleted) answers 410
// cursor_expired with the oldest cursor still valid, rather than a page that skips them.
func (s *Server) listEvents(c echo.Context) error {
	pg, err := pageOf(c)
	if err != nil {
		return err
	}
	var after int64
	if pg.after != "" {
		if after, err = strconv.ParseInt(pg.after, 10, 64); err != nil || after < 0 {
			return payment.Errorf(payment.EINVALID, "after must be a cursor from this feed")
		}
	}
	ctx, tenantID := c.Request().Context(), tenantIDOf(c)
	evs, err := s.store.ListTenantEvents(ctx, tenantID, after, pg.limit+1)
	if err != nil {
		return &payment.Error{Code: payment.EUNAVAILABLE, Message: "cannot read events right now", Err: err}
	}
	if after > 0 {
		// Read after the events: a purge that deleted one after the cursor before they
		// were read has recorded it by now.
		horizon, err := s.store.FeedHorizon(ctx, tenantID)
		if err != nil {
			return &payment.Error{Code: payment.EUNAVAILABLE, Message: "cannot read events right now", Err: err}
		}
		if after < horizon {
			oldest := strconv.FormatInt(horizon, 10)
			return &problemError{err: payment.Errorf(payment.ECURSOREXPIRED,
				"events after cursor %d were deleted past their retention; resume from oldest_cursor %s or from the start", after, oldest),
				oldestCursor: oldest}
		}
	}
	views := make([]EventView, 0, len(evs))
	for _, ev := range evs {
		views = append(views, eventView(ev))
	}
	page, more, next := cut(views, pg.limit, func(v EventView) string { return v.Cursor })
	if next == "" {
		next = pg.after // nothing new yet: poll again from the same place
	}
	return c.JSON(http.StatusOK, map[string]any{"events": page, "has_more": more, "next_cursor": next})
}

// redeliverEvent delivers one of the tenant's events now and answers with the outcome
// and the event after it. The body, if any, must be {}.
func (s *Server) redeliverEvent(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	if err := decodeNone(body); err != nil {
		return err
	}
	ctx := c.Request().Context()
	tenantID := tenantIDOf(c)
	id := c.Param("event_id")
	if !eventIDPattern.MatchString(id) {
		return payment.Errorf(payment.EINVALID, "event_id must be 1-128 characters of A-Z a-z 0-9 _")
	}
	if _, err := s.store.GetTenantEvent(ctx, tenantID, id); err != nil {
		if errors.Is(err, payment.ErrNotFound) {
			return payment.Errorf(payment.ENOTFOUND, "no event %s", id)
		}
		return &payment.Error{Code: payment.EUNAVAILABLE, Message: "cannot read the event right now", Err: err}
	}
	res, err := s.orch.RedeliverEvent(ctx, tenantID, id)
	if err != nil {
		if payment.ErrorCode(err) == payment.EINFLIGHT {
			c.Response().Header().Set("Retry-After", "5")
		}
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"delivered": res.Delivered, "error": res.Error, "event": eventView(res.Event)})
}
