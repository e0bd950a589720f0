package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/workflows"
)

// runTemporalSetup prepares a Temporal server that is not the dev server (which does this
// itself from flags): it creates the namespace if it is missing and registers the payment
// search attributes, then waits until both are in effect. It is idempotent, so a
// deployment can run it before every rollout.
func runTemporalSetup(ctx context.Context, cfg config.Config, args []string, logger *slog.Logger) error {
	fs := flag.NewFlagSet("temporal-setup", flag.ContinueOnError)
	retention := fs.Duration("retention", 30*24*time.Hour, "history retention of closed workflows, for a namespace this command creates")
	timeout := fs.Duration("timeout", 3*time.Minute, "how long to wait for the server to be reachable and the setup to take effect")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	var tc client.Client
	err := retry(ctx, func() error {
		var err error
		tc, err = client.DialContext(ctx, client.Options{HostPort: cfg.TemporalAddr, Namespace: cfg.TemporalNamespace, Logger: quietTemporalLogger{}})
		return err
	})
	if err != nil {
		return fmt.Errorf("temporal at %s: %w", cfg.TemporalAddr, err)
	}
	defer tc.Close()
	ns := cfg.TemporalNamespace
	changed := false // whether this run created or registered anything
	err = retry(ctx, func() error {
		_, err := tc.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
		var notFound *serviceerror.NamespaceNotFound
		if !errors.As(err, &notFound) {
			return err
		}
		_, err = tc.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(*retention),
		})
		var exists *serviceerror.NamespaceAlreadyExists
		if err == nil || errors.As(err, &exists) {
			changed = true
			logger.Info("namespace created", "namespace", ns, "retention", retention.String())
			return errors.New("namespace created, waiting for it to be in effect")
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	err = retry(ctx, func() error {
		have, err := tc.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
		if err != nil {
			return err
		}
		for name := range workflows.SearchAttributeTypes() {
			if _, ok := have.GetCustomAttributes()[name]; !ok {
				changed = true
				if err := registerSearchAttributes(ctx, tc, ns); err != nil {
					return err
				}
				return fmt.Errorf("search attribute %s registered, waiting for it to be in effect", name)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("search attributes in %s: %w", ns, err)
	}
	if changed {
		// Every service of the server reads namespaces (and with SQL visibility the
		// attributes' aliases) from a cache refreshed every 2 s by default; the frontend
		// answering is not proof that history sees them yet.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(namespaceRefreshWait):
		}
	}
	logger.Info("temporal ready", "addr", cfg.TemporalAddr, "namespace", ns, "search_attributes", len(workflows.SearchAttributeTypes()))
	return nil
}

// namespaceRefreshWait outlasts one refresh of the server's namespace cache
// (system.namespaceCacheRefreshInterval, 2 s by default).
const namespaceRefreshWait = 3 * time.Second

// retry calls fn every half second until it succeeds or ctx ends, and returns the last
// error then.
func retry(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// quietTemporalLogger drops the SDK's logs while the server is still coming up.
type quietTemporalLogger struct{}

func (quietTemporalLogger) Debug(string, ...any) {}
func (quietTemporalLogger) Info(string, ...any)  {}
func (quietTemporalLogger) Warn(string, ...any)  {}
func (quietTemporalLogger) Error(string, ...any) {}
