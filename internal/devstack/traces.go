package devstack

import (
	"fmt"
	"os"
	"path/filepath"
)

// TraceFile is the span file of `paykit dev` for its -traces flag, emptied so that
// `paykit trace -tenant demo -order 1001` shows this run's payment with no collector to
// run: flag itself, or <dir>/traces.jsonl when it is empty, or none when it is "off".
func TraceFile(dir, flag string) (string, error) {
	file := flag
	switch flag {
	case "off":
		return "", nil
	case "":
		file = filepath.Join(dir, "traces.jsonl")
	}
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		return "", fmt.Errorf("dev: span file: %w", err)
	}
	return file, nil
}
