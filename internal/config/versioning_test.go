package config_test

import (
	"strings"
	"testing"

	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/worker"
)

// The worker polls as a Worker Deployment Version only when PAYKIT_WORKER_VERSIONING is
// on; the deployment is named after the task queue unless set, and a build id is
// required (a test binary records no commit) and, like the name, holds no dot.
func TestLoadConfig_WorkerVersioning(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    worker.Versioning
		wantErr string
	}{
		{name: "off by default", env: map[string]string{"PAYKIT_WORKER_BUILD_ID": "b1"}},
		{name: "on", env: map[string]string{"PAYKIT_WORKER_VERSIONING": "true", "PAYKIT_WORKER_BUILD_ID": "b1", "PAYKIT_TASK_QUEUE": "pay.cn"},
			want: worker.Versioning{DeploymentName: "paykit-pay-cn", BuildID: "b1"}},
		{name: "named", env: map[string]string{"PAYKIT_WORKER_VERSIONING": "true", "PAYKIT_WORKER_BUILD_ID": "v0-3-0", "PAYKIT_WORKER_DEPLOYMENT": "shop"},
			want: worker.Versioning{DeploymentName: "shop", BuildID: "v0-3-0"}},
		{name: "no build id recorded", env: map[string]string{"PAYKIT_WORKER_VERSIONING": "true"}, wantErr: "PAYKIT_WORKER_BUILD_ID"},
		{name: "a dot", env: map[string]string{"PAYKIT_WORKER_VERSIONING": "true", "PAYKIT_WORKER_BUILD_ID": "v0.3.0"}, wantErr: "must not contain a dot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Load(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || c.WorkerVersioning != tc.want {
				t.Fatalf("versioning %+v (%v), want %+v", c.WorkerVersioning, err, tc.want)
			}
		})
	}
}
