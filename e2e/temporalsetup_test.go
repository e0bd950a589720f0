package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/paykit/paykit/workflows"
)

// TestTemporalSetup: `paykit temporal-setup` registers every search attribute the
// workflows set, with its type, in a fresh namespace of the dev server, and running it
// again changes nothing and succeeds.
func TestTemporalSetup(t *testing.T) {
	ctx := context.Background()
	ns := "setup-" + randHex(4)
	if _, err := env.tc.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	setup := func() (string, error) {
		cmd := exec.Command(env.paykitBin, "temporal-setup")
		cmd.Env = append(append(os.Environ(), env.temporalEnv...), "PAYKIT_TEMPORAL_ADDR="+env.temporalAddr, "PAYKIT_TEMPORAL_NAMESPACE="+ns)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// A namespace just registered takes a moment to reach every service.
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := setup()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("temporal-setup: %v\n%s", err, out)
		}
		time.Sleep(time.Second)
	}
	if out, err := setup(); err != nil {
		t.Fatalf("temporal-setup a second time: %v\n%s", err, out)
	}
	got, err := env.tc.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	for name, typ := range workflows.SearchAttributeTypes() {
		have, ok := got.GetCustomAttributes()[name]
		if !ok || !strings.EqualFold(strings.TrimPrefix(have.String(), "INDEXED_VALUE_TYPE_"), typ) {
			t.Errorf("search attribute %s: %v (registered %v), want %s", name, have, ok, typ)
		}
	}
}
