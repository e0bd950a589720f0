package devstack_test

import (
	"strings"
	"testing"

	"github.com/paykit/paykit/internal/devstack"
)

// TestWalkthroughSendsOperationsToTheAdminAddress: readiness and metrics are on the API's
// admin address, which the walk-through names; the public API answers neither.
func TestWalkthroughSendsOperationsToTheAdminAddress(t *testing.T) {
	var b strings.Builder
	devstack.Walkthrough{API: "http://127.0.0.1:8080", Admin: "http://127.0.0.1:8084", Sim: "http://127.0.0.1:8090",
		Merchant: "127.0.0.1:8081", Shop: "127.0.0.1:8082", UIPort: 8233, APIKey: "sk"}.Print(&b)
	out := b.String()
	if !strings.Contains(out, "http://127.0.0.1:8084/readyz") {
		t.Errorf("the walk-through does not name the admin /readyz:\n%s", out)
	}
	for _, wrong := range []string{"8080/readyz", "8080/metrics", "%!"} {
		if strings.Contains(out, wrong) {
			t.Errorf("the walk-through shows %q:\n%s", wrong, out)
		}
	}
}

// TestWalkthroughShowsWechatPayWhenItsSimulatorRuns: the WeChat Pay step, with its
// simulator's address, is printed when dev runs that simulator, and only then.
func TestWalkthroughShowsWechatPayWhenItsSimulatorRuns(t *testing.T) {
	w := devstack.Walkthrough{API: "http://127.0.0.1:8080", Admin: "http://127.0.0.1:8084", Sim: "http://127.0.0.1:8090",
		Merchant: "127.0.0.1:8081", Shop: "127.0.0.1:8082", UIPort: 8233, APIKey: "sk"}
	var without strings.Builder
	w.Print(&without)
	if strings.Contains(without.String(), "wechat") {
		t.Errorf("the walk-through names WeChat Pay with no simulator:\n%s", without.String())
	}
	w.WechatSim = "http://127.0.0.1:8091"
	var with strings.Builder
	w.Print(&with)
	out := with.String()
	for _, want := range []string{`"method":"wechat_native"`, "http://127.0.0.1:8091/_sim/orders/<payment_no>/pay"} {
		if !strings.Contains(out, want) {
			t.Errorf("the walk-through lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "%!") {
		t.Errorf("the walk-through has a formatting error:\n%s", out)
	}
}
