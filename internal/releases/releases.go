// Package releases reads the release line CHANGELOG.md records: each release is a heading
// `## vX.Y.Z (commit <full hash>)` naming the commit of main it was cut from, newest first
// (a tag may not travel with every clone; the heading does). Describe names a commit's
// build after it, as `git describe` would after a tag.
package releases

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
)

// Release is one release and the commit it was cut from.
type Release struct {
	Version string
	Commit  string
}

var (
	heading      = regexp.MustCompile(`^## (v[0-9]+\.[0-9]+\.[0-9]+) \(commit ([0-9a-f]{40})\)$`)
	looksLikeOne = regexp.MustCompile(`^## v[0-9]`)
)

// Parse returns the releases of a changelog, newest first. A heading that starts like a
// release's and does not name a version and a full commit is an error, as is a version
// that is not older than the one above it.
func Parse(changelog []byte) ([]Release, error) {
	var rs []Release
	sc := bufio.NewScanner(bytes.NewReader(changelog))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), " \t")
		if !looksLikeOne.MatchString(line) {
			continue
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("changelog line %d: %q: want ## vX.Y.Z (commit <40 hex digits>)", n, line)
		}
		r := Release{Version: m[1], Commit: m[2]}
		if len(rs) > 0 && !older(r.Version, rs[len(rs)-1].Version) {
			return nil, fmt.Errorf("changelog line %d: %s is listed below %s, want the newest first", n, r.Version, rs[len(rs)-1].Version)
		}
		rs = append(rs, r)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("changelog: no release heading")
	}
	return rs, nil
}

// older reports whether version a comes before b (both vX.Y.Z).
func older(a, b string) bool {
	var x, y [3]int
	_, _ = fmt.Sscanf(a, "v%d.%d.%d", &x[0], &x[1], &x[2])
	_, _ = fmt.Sscanf(b, "v%d.%d.%d", &y[0], &y[1], &y[2])
	for i := range x {
		if x[i] != y[i] {
			return x[i] < y[i]
		}
	}
	return false
}

// Find returns the release named version.
func Find(rs []Release, version string) (Release, bool) {
	for _, r := range rs {
		if r.Version == version {
			return r, true
		}
	}
	return Release{}, false
}

// Describe names the build of the commit checked out in the git work tree dir: the
// version of the release cut from it, or else `<newest release it descends from>-<n>-g<short
// commit>` (n commits after it), or `unreleased-g<short commit>` if it descends from none.
func Describe(ctx context.Context, dir string, rs []Release) (string, error) {
	head, err := git(ctx, dir, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	for _, r := range rs {
		if r.Commit == head {
			return r.Version, nil
		}
	}
	for _, r := range rs {
		if _, err := git(ctx, dir, "merge-base", "--is-ancestor", r.Commit, head); err != nil {
			continue // not an ancestor, or not in this clone's history
		}
		n, err := git(ctx, dir, "rev-list", "--count", r.Commit+".."+head)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s-%s-g%s", r.Version, n, head[:7]), nil
	}
	return "unreleased-g" + head[:7], nil
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}
