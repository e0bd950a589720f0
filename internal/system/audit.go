package system

import (
	"context"
	"log/slog"

	"github.com/paykit/paykit/audit"
	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/orchestrator"
)

// DialOrchestrator connects to Temporal for a command that starts, signals or queries
// workflows (its metrics on a registry of its own, untraced); closeAll closes the client.
func DialOrchestrator(ctx context.Context, cfg config.Config, logger *slog.Logger) (orch *orchestrator.Orchestrator, closeAll func(), err error) {
	tc, err := DialTemporal(ctx, cfg, logger, NewRegistry(), nil)
	if err != nil {
		return nil, nil, err
	}
	return orchestrator.New(tc, cfg.TaskQueue, cfg.Timing), tc.Close, nil
}

// OpenAuditor builds the auditor of `paykit audit` on MySQL, Alipay and Temporal;
// closeAll closes them.
func OpenAuditor(ctx context.Context, cfg config.Config, logger *slog.Logger) (aud *audit.Auditor, closeAll func(), err error) {
	store, err := OpenStore(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	// The audit's queries share the apps' call limit with the workers (Redis), so that an
	// operator's audit cannot use up an app's quota and throttle its buyers' checkouts.
	rc, err := openRedis(cfg, logger, nil)
	if err != nil {
		CloseStore(store)
		return nil, nil, err
	}
	closeRedis := func() {
		if rc != nil {
			_ = rc.Redis().Close()
		}
	}
	limiter := callLimiter(cfg, rc, logger)
	alipayApps, err := NewAlipayApps(cfg, store, limiter)
	if err != nil {
		closeRedis()
		CloseStore(store)
		return nil, nil, err
	}
	gws, err := NewGateways(ctx, cfg, alipayApps, limiter)
	if err != nil {
		closeRedis()
		CloseStore(store)
		return nil, nil, err
	}
	orch, closeTemporal, err := DialOrchestrator(ctx, cfg, logger)
	if err != nil {
		closeRedis()
		CloseStore(store)
		return nil, nil, err
	}
	aud = &audit.Auditor{Store: store, Gateways: gws, Workflows: orch}
	return aud, func() { closeTemporal(); closeRedis(); CloseStore(store) }, nil
}
