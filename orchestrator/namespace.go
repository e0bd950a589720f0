package orchestrator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/paykit/paykit/workflows"
)

// SetupTemporal prepares the Temporal server at addr when it is not the dev server
// (which does this itself from flags): it creates the namespace ns if it is missing,
// with the history retention given, and registers the payment search attributes, then
// waits until both are in effect, retrying until ctx ends. It is idempotent.
//
// conn carries the connection's TLS and credentials (its HostPort and Namespace are set
// from addr and ns). A TLS handshake the server refuses, or whose certificate does not
// verify, is not retried: no wait mends it.
func SetupTemporal(ctx context.Context, addr, ns string, conn client.Options, retention time.Duration, logger *slog.Logger) error {
	var tc client.Client
	conn.HostPort, conn.Namespace, conn.Logger = addr, ns, quietLogger{}
	err := retry(ctx, func() error {
		var err error
		tc, err = client.DialContext(ctx, conn)
		if err != nil && tlsRefused(err) {
			return permanent{err}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("temporal at %s: %w", addr, err)
	}
	defer tc.Close()
	createdNS, err := ensureNamespace(ctx, tc, ns, retention, logger)
	if err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	createdSA, err := ensureSearchAttributes(ctx, tc, ns)
	if err != nil {
		return fmt.Errorf("search attributes in %s: %w", ns, err)
	}
	if createdNS || createdSA {
		// Every service of the server reads namespaces (and with SQL visibility the
		// attributes' aliases) from a cache refreshed every 2 s by default; the frontend
		// answering is not proof that history sees them yet.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(namespaceRefreshWait):
		}
	}
	return nil
}

// ensureNamespace registers namespace ns unless it exists, and waits until it answers;
// changed says whether this call registered it.
func ensureNamespace(ctx context.Context, tc client.Client, ns string, retention time.Duration, logger *slog.Logger) (changed bool, err error) {
	err = retry(ctx, func() error {
		_, err := tc.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
		var notFound *serviceerror.NamespaceNotFound
		if !errors.As(err, &notFound) {
			return err
		}
		_, err = tc.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(retention),
		})
		var exists *serviceerror.NamespaceAlreadyExists
		if err == nil || errors.As(err, &exists) {
			changed = true
			logger.Info("namespace created", "namespace", ns, "retention", retention.String())
			return errors.New("namespace created, waiting for it to be in effect")
		}
		return err
	})
	return changed, err
}

// ensureSearchAttributes registers the workflows' search attributes missing in ns, and
// waits until they are all listed; changed says whether this call registered any.
func ensureSearchAttributes(ctx context.Context, tc client.Client, ns string) (changed bool, err error) {
	err = retry(ctx, func() error {
		have, err := tc.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
		if err != nil {
			return err
		}
		for name := range workflows.SearchAttributeTypes() {
			if _, ok := have.GetCustomAttributes()[name]; !ok {
				changed = true
				if err := RegisterSearchAttributes(ctx, tc, ns); err != nil {
					return err
				}
				return fmt.Errorf("search attribute %s registered, waiting for it to be in effect", name)
			}
		}
		return nil
	})
	return changed, err
}

// namespaceRefreshWait outlasts one refresh of the server's namespace cache
// (system.namespaceCacheRefreshInterval, 2 s by default).
const namespaceRefreshWait = 3 * time.Second

// permanent is an error retry gives up on at once.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// tlsRefused reports whether a dial failed on TLS: the server's certificate did not
// verify, or the server refused the handshake (no or a wrong client certificate).
func tlsRefused(err error) bool {
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	if errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid) || errors.As(err, &verify) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"x509:", "tls:", "certificate required", "bad certificate", "first record does not look like a TLS handshake"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// retry calls fn every half second until it succeeds or ctx ends, and returns the last
// error then; a permanent error ends it at once.
func retry(ctx context.Context, fn func() error) error {
	var last error
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		last = fn()
		var p permanent
		if errors.As(last, &p) {
			return struct{}{}, backoff.Permanent(p.error)
		}
		return struct{}{}, last
	}, backoff.WithBackOff(backoff.NewConstantBackOff(500*time.Millisecond)), backoff.WithMaxElapsedTime(0))
	if err != nil && ctx.Err() != nil && !errors.As(last, new(permanent)) {
		return fmt.Errorf("%w (last error: %v)", ctx.Err(), last)
	}
	return err
}

// RegisterSearchAttributes adds the payment search attributes to the namespace. An
// unregistered attribute would leave every payment workflow stuck on its first task.
func RegisterSearchAttributes(ctx context.Context, tc client.Client, namespace string) error {
	attrs := map[string]enumspb.IndexedValueType{}
	for name, typ := range workflows.SearchAttributeTypes() {
		switch typ {
		case "Int":
			attrs[name] = enumspb.INDEXED_VALUE_TYPE_INT
		default:
			attrs[name] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
		}
	}
	existing, err := tc.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	for name := range existing.GetCustomAttributes() {
		delete(attrs, name)
	}
	if len(attrs) == 0 {
		return nil
	}
	_, err = tc.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: attrs,
	})
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("register search attributes: %w", err)
	}
	return nil
}

// quietLogger drops the SDK's logs while the server is still coming up.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
