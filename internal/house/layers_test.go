package house_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The API's side of the house (api, checkout, inbox) never depends on workflow or
// activity code: it speaks to the runs through the messages of package runs and the
// orchestrator's interface. `go list -deps` reads the whole import graph, tests left
// out. Before, checkout and inbox imported workflows for the run's input, the checkout's
// answer and the notification payload, and so api took in every workflow and activity.
func TestAPISideImportsNoWorkflowOrActivityCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../../api", "../../checkout", "../../inbox").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{modulePath + "/workflows", modulePath + "/activities"} {
			if dep == banned {
				t.Errorf("the API side depends on %s", dep)
			}
		}
	}
}
