package devstack

import "testing"

// paykit dev starts a redis-server only for one local address; a cluster's list, a URL or
// another host is not its to start (the list once made it start one on port "").
func TestLocalRedisPort(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:6379": "6379", "localhost:6380": "6380", ":6381": "6381", "[::1]:6382": "",
		"127.0.0.1:7001,127.0.0.1:7002": "", "redis://127.0.0.1:6379/0": "", "redis.internal:6379": "", "": "",
	} {
		port, ok := localRedisPort(addr)
		if port != want || ok != (want != "") {
			t.Errorf("localRedisPort(%q) = %q, %v; want %q", addr, port, ok, want)
		}
	}
}
