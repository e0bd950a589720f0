// Command gendoc writes the configuration reference, config.Reference, into a Markdown
// page between its markers: go generate ./internal/config.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/paykit/paykit/internal/config"
)

func main() {
	out := flag.String("o", "docs/operate/configuration.md", "the page to rewrite")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gendoc:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	page, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	updated, err := config.WithReference(string(page))
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(updated), 0o644)
}
