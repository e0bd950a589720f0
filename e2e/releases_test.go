package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/internal/releases"
)

// releaseBuild is an earlier release's binaries, built from its commit.
type releaseBuild struct {
	releases.Release
	paykit, alipaysim string
}

// release returns the release named version in CHANGELOG.md.
func release(t *testing.T, version string) releases.Release {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(), "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := releases.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := releases.Find(rs, version)
	if !ok {
		t.Fatalf("CHANGELOG.md records no release %s (it records %v)", version, rs)
	}
	return r
}

// buildRelease builds a release's paykit and alipaysim from its commit in this repository
// (CI clones it with its history): a detached work tree of the commit in a temporary
// directory, removed afterwards, and `go build` there, with the release named as its
// Dockerfile would name it (a release from before the name was read ignores it). The binaries are kept under .artifacts/releases/<commit>/, so
// later runs reuse them.
func buildRelease(t *testing.T, version string) releaseBuild {
	t.Helper()
	r := release(t, version)
	root := repoRoot()
	dir := filepath.Join(root, ".artifacts", "releases", r.Commit)
	b := releaseBuild{Release: r, paykit: filepath.Join(dir, "paykit"), alipaysim: filepath.Join(dir, "alipaysim")}
	if exists(b.paykit) && exists(b.alipaysim) {
		t.Logf("%s (%s): binaries of an earlier run in %s", r.Version, r.Commit[:12], dir)
		return b
	}
	started := time.Now()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join(t.TempDir(), "paykit-"+r.Version)
	git := func(args ...string) error {
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := git("worktree", "add", "--detach", tree, r.Commit); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := git("worktree", "remove", "--force", tree); err != nil {
			t.Error(err)
		}
	}()
	for out, pkg := range map[string]string{b.paykit: "./cmd/paykit", b.alipaysim: "./cmd/alipaysim"} {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		cmd := exec.CommandContext(ctx, "go", "build", "-ldflags", "-X github.com/paykit/paykit/internal/buildinfo.release="+r.Version, "-o", out+".tmp", pkg)
		cmd.Dir = tree
		o, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s at %s: go build %s: %v\n%s", r.Version, r.Commit, pkg, err, o)
		}
		// Renamed into place only once built: a run that stopped part way leaves no binary
		// a later run would take for finished.
		if err := os.Rename(out+".tmp", out); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s (%s): built in a work tree of its commit in %s, kept in %s", r.Version, r.Commit[:12], time.Since(started).Round(time.Second), dir)
	return b
}

func exists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

// Any release's binaries build from its commit, and a second build reuses the first's; the
// work tree is gone afterwards.
func TestBuildRelease(t *testing.T) {
	first := buildRelease(t, "v0.1.0")
	info, err := os.Stat(first.paykit)
	if err != nil {
		t.Fatal(err)
	}
	again := buildRelease(t, "v0.1.0")
	if info2, err := os.Stat(again.paykit); err != nil || !info2.ModTime().Equal(info.ModTime()) {
		t.Fatalf("the second build did not reuse the first's binary: %v", err)
	}
	// v0.1.0 printed its module version first; this build prints the release first (Go
	// records no commit in a work tree added with git worktree, so the line names none).
	out, err := exec.Command(first.paykit, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "paykit (devel), commit ") {
		t.Fatalf("%s version: %v %q; want v0.1.0's line", first.paykit, err, out)
	}
	trees, err := exec.Command("git", "-C", repoRoot(), "worktree", "list").Output()
	if err != nil || strings.Contains(string(trees), "paykit-v0.1.0") {
		t.Fatalf("a release's work tree was left: %v\n%s", err, trees)
	}
}
