package api

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// healthz reports that the process is alive.
func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz reports whether the dependencies answer. MySQL and Temporal are required;
// Redis is an optional fast path, so its failure degrades but does not unready.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{}
	ready := true
	if err := s.store.Ping(ctx); err != nil {
		checks["mysql"], ready = "down: "+err.Error(), false
	} else {
		checks["mysql"] = "ok"
	}
	if err := s.orch.Ping(ctx); err != nil {
		checks["temporal"], ready = "down: "+err.Error(), false
	} else {
		checks["temporal"] = "ok"
	}
	switch {
	case s.cache == nil:
		checks["redis"] = "not configured"
	case s.cache.Ping(ctx) != nil:
		checks["redis"] = "degraded: unavailable, falling back to MySQL"
	default:
		checks["redis"] = "ok"
	}
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
	}
	return c.JSON(status, map[string]any{"ready": ready, "checks": checks})
}
