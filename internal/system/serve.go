package system

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/paykit/paykit/internal/config"
)

// Serve serves h on addr until ctx ends, then shuts the server down within 5 s.
func Serve(ctx context.Context, addr string, h http.Handler) error {
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return fmt.Errorf("listen %s: %w", addr, err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}

// StartPprof serves net/http/pprof on cfg.PprofAddr, if set, for as long as ctx lives.
// It is off by default: profiles show internals and cost CPU while they are taken, so
// they are for benchmarks and incidents, on a loopback or otherwise private address.
func StartPprof(ctx context.Context, cfg config.Config, logger *slog.Logger) {
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
		if err := Serve(ctx, cfg.PprofAddr, mux); err != nil {
			logger.Error("pprof server", "err", err)
		}
	}()
}
