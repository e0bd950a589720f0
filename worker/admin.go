package worker

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paykit/paykit/internal/admin"
)

// AdminHandler serves the worker's operational endpoints (admin.Handler): /healthz,
// /readyz (ready or not only; why not is logged to logger), /metrics and /debug/pprof/.
func AdminHandler(reg *prometheus.Registry, ready func(context.Context) error, logger *slog.Logger) http.Handler {
	return admin.Handler(admin.Options{Metrics: reg, Probe: func(ctx context.Context) admin.Readiness {
		if err := ready(ctx); err != nil {
			logger.WarnContext(ctx, "readiness: a dependency is down", "err", err)
			return admin.Readiness{Ready: false}
		}
		return admin.Readiness{Ready: true}
	}})
}
