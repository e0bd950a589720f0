package worker_test

import (
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/worker"
	"github.com/paykit/paykit/workflows"
)

// behaviours records what each registration asks of Worker Versioning.
type behaviours map[string]workflow.VersioningBehavior

func (b behaviours) RegisterWorkflowWithOptions(_ interface{}, o workflow.RegisterOptions) {
	b[o.Name] = o.VersioningBehavior
}

// Under Worker Versioning a payment and a refund run on the build that started them
// (they last minutes to hours, and no other build replays their histories); every other
// workflow moves to the current build, and none is left without a behaviour (a versioned
// worker refuses to register such a workflow, so it would not start).
func TestEveryWorkflowHasAVersioningBehaviour(t *testing.T) {
	got := behaviours{}
	workflows.Register(got)
	if len(got) < 8 {
		t.Fatalf("registered %d workflows: %v", len(got), got)
	}
	for name, b := range got {
		want := workflow.VersioningBehaviorAutoUpgrade
		if name == workflows.PaymentWorkflowName || name == workflows.RefundWorkflowName {
			want = workflow.VersioningBehaviorPinned
		}
		if b != want {
			t.Errorf("%s: behaviour %v, want %v", name, b, want)
		}
	}
}

// A worker polling as a Worker Deployment Version registers every workflow and activity
// (the SDK panics at registration on a workflow without a behaviour), and one without
// versioning still does.
func TestVersionedWorkerRegisters(t *testing.T) {
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, v := range []worker.Versioning{{}, {DeploymentName: "paykit-q", BuildID: "b1"}} {
		if w := worker.New(c, worker.Config{TaskQueue: "q", Versioning: v}, &activities.Activities{}); w == nil {
			t.Fatalf("%+v: no worker", v)
		}
	}
}
