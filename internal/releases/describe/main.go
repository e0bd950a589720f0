// Command describe prints the release the checked-out commit builds as, from
// CHANGELOG.md's release headings (package releases): the value a build passes to
// `-ldflags -X github.com/paykit/paykit/internal/buildinfo.release=...`.
//
//	go run ./internal/releases/describe
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/paykit/paykit/internal/releases"
)

func main() {
	raw, err := os.ReadFile("CHANGELOG.md")
	if err != nil {
		fmt.Fprintln(os.Stderr, "describe: run it at the repository's root:", err)
		os.Exit(2)
	}
	rs, err := releases.Parse(raw)
	if err != nil {
		fmt.Fprintln(os.Stderr, "describe:", err)
		os.Exit(1)
	}
	v, err := releases.Describe(context.Background(), ".", rs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "describe:", err)
		os.Exit(1)
	}
	fmt.Println(v)
}
