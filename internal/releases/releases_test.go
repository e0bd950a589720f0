package releases_test

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/paykit/paykit/internal/releases"
)

const (
	c1 = "5384221bbc6575d66bf397c68ab974a183c163ac"
	c2 = "e742bbc3bc4672e611e1cb60293c871c3bca77d4"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    []releases.Release
		wantErr string
	}{
		{
			name: "newest first, changes and Unreleased between",
			text: "# Changelog\n\n## Unreleased\n\n### A change\n\n## v0.2.0 (commit " + c2 + ")\n\n### Another\n\n## v0.1.0 (commit " + c1 + ")\n",
			want: []releases.Release{{Version: "v0.2.0", Commit: c2}, {Version: "v0.1.0", Commit: c1}},
		},
		{name: "a short commit", text: "## v0.1.0 (commit 5384221)\n", wantErr: "line 1"},
		{name: "no commit", text: "## v0.1.0\n", wantErr: "line 1"},
		{name: "oldest first", text: "## v0.1.0 (commit " + c1 + ")\n## v0.10.0 (commit " + c2 + ")\n", wantErr: "newest first"},
		{name: "none", text: "# Changelog\n\n## Unreleased\n", wantErr: "no release"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := releases.Parse([]byte(tc.text))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse: %v, %v; want an error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || len(got) != len(tc.want) {
				t.Fatalf("Parse: %v, %v; want %v", got, err, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("Parse: %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// The repository's own changelog parses, and every release it names is a commit of its
// history (CI clones it with its history).
func TestTheChangelogsReleasesAreCommitsOfTheHistory(t *testing.T) {
	raw, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := releases.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if out, err := exec.Command("git", "-C", "../..", "cat-file", "-t", r.Commit).Output(); err != nil || strings.TrimSpace(string(out)) != "commit" {
			t.Errorf("%s: %s is not a commit of this repository: %v %s", r.Version, r.Commit, err, out)
		}
	}
}

// A commit after a release is described by it and the commits since; the release's own
// commit by its version; a commit before every release as unreleased.
func TestDescribe(t *testing.T) {
	ctx := context.Background()
	head := strings.TrimSpace(run(t, "rev-parse", "HEAD"))
	parent := strings.TrimSpace(run(t, "rev-parse", "HEAD~1"))
	n := strings.TrimSpace(run(t, "rev-list", "--count", c1+"..HEAD"))
	tests := []struct {
		name string
		rs   []releases.Release
		want string
	}{
		{name: "cut from HEAD", rs: []releases.Release{{"v9.0.0", head}, {"v0.1.0", c1}}, want: "v9.0.0"},
		{name: "after a release", rs: []releases.Release{{"v0.1.0", c1}}, want: "v0.1.0-" + n + "-g" + head[:7]},
		{name: "a newer release not in its history", rs: []releases.Release{{"v9.0.0", strings.Repeat("0", 40)}, {"v0.1.0", c1}}, want: "v0.1.0-" + n + "-g" + head[:7]},
		{name: "after the parent", rs: []releases.Release{{"v0.3.0", parent}, {"v0.1.0", c1}}, want: "v0.3.0-1-g" + head[:7]},
		{name: "before every release", rs: []releases.Release{{"v9.0.0", strings.Repeat("0", 40)}}, want: "unreleased-g" + head[:7]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := releases.Describe(ctx, "../..", tc.rs)
			if err != nil || got != tc.want {
				t.Fatalf("Describe: %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	raw, _ := os.ReadFile("../../CHANGELOG.md")
	rs, err := releases.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	got, err := releases.Describe(ctx, "../..", rs)
	if err != nil || !regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9]+-g[0-9a-f]{7})?$`).MatchString(got) {
		t.Fatalf("this commit: %q, %v", got, err)
	}
}

func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", "../.."}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return string(out)
}
