package system

import (
	"context"
	"log/slog"
	"time"

	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/internal/tracing"
)

// SetupTracing starts the process's tracing from cfg (off unless an exporter is set).
func SetupTracing(ctx context.Context, cfg config.Config, service string, logger *slog.Logger) (*tracing.Tracing, error) {
	tr, err := tracing.Setup(ctx, tracing.Options{Service: service, OTLP: cfg.TraceOTLP, File: cfg.TraceFile, FileMaxBytes: cfg.TraceFileMaxBytes})
	if err != nil {
		return nil, err
	}
	if tr.Enabled() {
		logger.Info("tracing on", "service", service, "otlp", cfg.TraceOTLP, "file", cfg.TraceFile)
	}
	return tr, nil
}

// ShutdownTracing exports the spans still buffered, for at most 5 s.
func ShutdownTracing(tr *tracing.Tracing, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		logger.Warn("tracing: spans not exported at shutdown", "err", err)
	}
}
