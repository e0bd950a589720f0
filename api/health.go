package api

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// Component states shown by /readyz.
const (
	stateOK       = "ok"
	stateDegraded = "degraded" // works, without a fast path
	stateDown     = "down"
)

// healthz reports that the process is alive.
func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz reports whether the dependencies answer. MySQL and Temporal are required;
// Redis is an optional fast path, so its failure (or absence) degrades but does not
// unready. The endpoint is public, so it shows component names and states only; what a
// driver said (addresses, error text) is logged.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{}
	ready := true
	if err := s.store.Ping(ctx); err != nil {
		checks["mysql"], ready = stateDown, false
		s.log.WarnContext(ctx, "readiness: mysql is down", "request_id", requestID(c), "err", err)
	} else {
		checks["mysql"] = stateOK
	}
	if err := s.orch.Ping(ctx); err != nil {
		checks["temporal"], ready = stateDown, false
		s.log.WarnContext(ctx, "readiness: temporal is down", "request_id", requestID(c), "err", err)
	} else {
		checks["temporal"] = stateOK
	}
	if s.cache == nil {
		checks["redis"] = stateDegraded // disabled by configuration: every check goes to MySQL
	} else if err := s.cache.Ping(ctx); err != nil {
		checks["redis"] = stateDegraded
		s.log.WarnContext(ctx, "readiness: redis is unavailable, falling back to MySQL", "request_id", requestID(c), "err", err)
	} else {
		checks["redis"] = stateOK
	}
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
	}
	return c.JSON(status, map[string]any{"ready": ready, "checks": checks})
}
