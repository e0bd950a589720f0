package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/pprof"

	"github.com/paykit/paykit/internal/config"
)

// startPprof serves net/http/pprof on cfg.PprofAddr, if set, for as long as ctx lives.
// It is off by default: profiles show internals and cost CPU while they are taken, so
// they are for benchmarks and incidents, on a loopback or otherwise private address.
func startPprof(ctx context.Context, cfg config.Config, logger *slog.Logger) {
	if cfg.PprofAddr == "" {
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	logger.Warn("pprof listening", "addr", cfg.PprofAddr)
	go func() {
		if err := serve(ctx, cfg.PprofAddr, mux); err != nil {
			logger.Error("pprof server", "err", err)
		}
	}()
}
