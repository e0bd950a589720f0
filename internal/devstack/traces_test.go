package devstack

import (
	"os"
	"path/filepath"
	"testing"
)

// -traces names the span file, defaults to the dev directory's, or turns it off; the
// file starts empty each run.
func TestTraceFile(t *testing.T) {
	dir := t.TempDir()
	own := filepath.Join(dir, "own.jsonl")
	tests := []struct {
		name, flag, want string
	}{
		{name: "default", want: filepath.Join(dir, "traces.jsonl")},
		{name: "a file of its own", flag: own, want: own},
		{name: "off", flag: "off", want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want != "" {
				if err := os.WriteFile(tc.want, []byte("{\"old\":\"span\"}\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := TraceFile(dir, tc.flag)
			if err != nil || got != tc.want {
				t.Fatalf("TraceFile(%q) = %q, %v; want %q", tc.flag, got, err, tc.want)
			}
			if got == "" {
				return
			}
			if b, err := os.ReadFile(got); err != nil || len(b) != 0 {
				t.Fatalf("span file holds %q (%v), want it emptied", b, err)
			}
		})
	}
	if _, err := TraceFile(filepath.Join(dir, "missing"), ""); err == nil {
		t.Fatal("a span file that cannot be written is an error")
	}
}
