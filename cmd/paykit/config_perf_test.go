package main

import (
	"testing"
	"time"
)

func TestLoadConfig_CallbackSignalWaitAndPprof(t *testing.T) {
	tests := []struct {
		name      string
		env       map[string]string
		wantWait  time.Duration
		wantPprof string
	}{
		{"defaults: 5s, no pprof", nil, 5 * time.Second, ""},
		{"overridden", map[string]string{"PAYKIT_CALLBACK_SIGNAL_WAIT": "1m", "PAYKIT_PPROF_ADDR": "127.0.0.1:6060"},
			time.Minute, "127.0.0.1:6060"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LoadConfig(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if err != nil || c.CallbackSignalWait != tc.wantWait || c.PprofAddr != tc.wantPprof {
				t.Fatalf("wait %v, pprof %q (%v); want %v, %q", c.CallbackSignalWait, c.PprofAddr, err, tc.wantWait, tc.wantPprof)
			}
		})
	}
	if _, err := LoadConfig(func(k string) (string, bool) {
		return "soon", k == "PAYKIT_CALLBACK_SIGNAL_WAIT"
	}); err == nil {
		t.Fatal("PAYKIT_CALLBACK_SIGNAL_WAIT=soon accepted")
	}
}
