package config_test

import (
	"strings"
	"testing"

	"github.com/paykit/paykit/internal/config"
)

// PAYKIT_REDIS_ADDR names one server or a cluster's nodes, PAYKIT_REDIS_CLUSTER makes one
// address a cluster's, PAYKIT_REDIS_MASTER_NAME makes the addresses Sentinels; a cluster
// with a Sentinel master is refused.
func TestRedisDeployment(t *testing.T) {
	for _, tc := range []struct {
		env      map[string]string
		kind     string
		disabled bool
		wantErr  string
	}{
		{nil, "single", false, ""},
		{map[string]string{"PAYKIT_REDIS_ADDR": "off"}, "", true, ""},
		{map[string]string{"PAYKIT_REDIS_ADDR": "a:7001,b:7002,c:7003"}, "cluster", false, ""},
		{map[string]string{"PAYKIT_REDIS_ADDR": "cfg:6379", "PAYKIT_REDIS_CLUSTER": "true"}, "cluster", false, ""},
		{map[string]string{"PAYKIT_REDIS_ADDR": "s1:26379,s2:26379", "PAYKIT_REDIS_MASTER_NAME": "paykit"}, "sentinel", false, ""},
		{map[string]string{"PAYKIT_REDIS_CLUSTER": "true", "PAYKIT_REDIS_MASTER_NAME": "paykit"}, "", false, "exclude each other"},
		{map[string]string{"PAYKIT_REDIS_CLUSTER": "yes please"}, "", false, "PAYKIT_REDIS_CLUSTER"},
		{map[string]string{"PAYKIT_REDIS_ADDR": " , "}, "", false, "PAYKIT_REDIS_ADDR: redis: no address"},
		{map[string]string{"PAYKIT_REDIS_ADDR": "redis://:s3cret@a:1,b:2"}, "", false, "not URLs"},
	} {
		c, err := config.Load(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want one saying %q", tc.env, err, tc.wantErr)
			} else if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%v: the error shows the password: %v", tc.env, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.env, err)
			continue
		}
		if tc.disabled {
			if c.RedisAddr != "" {
				t.Errorf("%v: Redis %q, want disabled", tc.env, c.RedisAddr)
			}
			continue
		}
		if got := c.Redis().Kind(); got != tc.kind {
			t.Errorf("%v: %s, want %s", tc.env, got, tc.kind)
		}
	}
}
