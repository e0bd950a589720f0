package api

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/paykit/paykit/internal/admin"
)

// Component states shown by /readyz.
const (
	stateOK       = "ok"
	stateDegraded = "degraded" // works, without a fast path
	stateDown     = "down"
)

// healthz reports that the process is alive. It stays on the public listener for load
// balancers: it pings nothing and shows nothing.
func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// AdminHandler serves the API's operational endpoints (admin.Handler): /healthz,
// /readyz, /metrics and /debug/pprof/, for a listener apart from the public one.
func (s *Server) AdminHandler() http.Handler {
	return admin.Handler(admin.Options{Metrics: s.metrics.registry, Probe: s.ready, ReadyFor: s.cfg.ReadyFor})
}

// ready reports whether the dependencies answer. MySQL and Temporal are required; Redis
// is an optional fast path, so its failure (or absence) degrades but does not unready.
// The answer shows component names and states only; what a driver said (addresses,
// error text) is logged.
func (s *Server) ready(ctx context.Context) admin.Readiness {
	checks := map[string]string{}
	ready := true
	if err := s.store.Ping(ctx); err != nil {
		checks["mysql"], ready = stateDown, false
		s.log.WarnContext(ctx, "readiness: mysql is down", "err", err)
	} else {
		checks["mysql"] = stateOK
	}
	if err := s.orch.Ping(ctx); err != nil {
		checks["temporal"], ready = stateDown, false
		s.log.WarnContext(ctx, "readiness: temporal is down", "err", err)
	} else {
		checks["temporal"] = stateOK
	}
	if s.cache == nil {
		checks["redis"] = stateDegraded // disabled by configuration: every check goes to MySQL
	} else if err := s.cache.Ping(ctx); err != nil {
		checks["redis"] = stateDegraded
		s.log.WarnContext(ctx, "readiness: redis is unavailable, falling back to MySQL", "err", err)
	} else {
		checks["redis"] = stateOK
	}
	return admin.Readiness{Ready: ready, Checks: checks}
}
