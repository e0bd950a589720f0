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

// Every key paykit writes to Redis starts with PAYKIT_REDIS_KEY_PREFIX ("paykit:" unless
// set), so that two deployments can share one Redis; a prefix with a brace would move a
// Redis Cluster's hash slots, so it is refused; set empty, it is the default.
func TestRedisKeyPrefix(t *testing.T) {
	for _, tc := range []struct {
		set, want, wantErr string
		unset              bool
	}{
		{unset: true, want: "paykit:"},
		{set: "shop-eu:", want: "shop-eu:"},
		{set: "", want: "paykit:"},
		{set: "a{b}:", wantErr: "no braces"},
		{set: "two words", wantErr: "white space"},
		{set: strings.Repeat("p", 65), wantErr: "1 to 64 bytes"},
	} {
		c, err := config.Load(func(k string) (string, bool) {
			if k == "PAYKIT_REDIS_KEY_PREFIX" && !tc.unset {
				return tc.set, true
			}
			return "", false
		})
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("prefix %q: error %v, want one saying %q", tc.set, err, tc.wantErr)
			}
			continue
		}
		if err != nil || c.RedisKeyPrefix != tc.want {
			t.Errorf("prefix %q: %q, %v; want %q", tc.set, c.RedisKeyPrefix, err, tc.want)
		}
	}
}
