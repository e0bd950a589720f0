package house_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestDocsLinksResolve walks README.md, CHANGELOG.md, CONTRIBUTING.md (those present) and
// docs/**/*.md and fails on a relative link to a file that does not exist, or to an #anchor that no
// heading of the target page produces (GitHub's rules: lower case, spaces as hyphens,
// punctuation other than - and _ dropped, a repeated heading suffixed -1, -2, …).
func TestDocsLinksResolve(t *testing.T) {
	root := "../.."
	pages := []string{"README.md", "CHANGELOG.md", "CONTRIBUTING.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if os.IsNotExist(err) && path == filepath.Join(root, "docs") {
			return nil
		}
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			pages = append(pages, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{} // page → its anchors
	anchorsOf := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		raw, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		a := map[string]bool{}
		for _, h := range headings(string(raw)) {
			a[h] = true
		}
		anchors[page] = a
		return a
	}
	checked := 0
	for _, page := range pages {
		raw, err := os.ReadFile(filepath.Join(root, page))
		if os.IsNotExist(err) && !strings.HasPrefix(page, "docs/") {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range links(string(raw)) {
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(page), file)))
				if strings.HasPrefix(dest, "../") {
					t.Errorf("%s: link %q leaves the repository", page, target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
					t.Errorf("%s: link %q: no file %s", page, target, dest)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s: link %q: an anchor into a file that is not markdown", page, target)
				continue
			}
			if !anchorsOf(dest)[anchor] {
				t.Errorf("%s: link %q: no heading of %s makes the anchor #%s", page, target, dest, anchor)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the walk read nothing")
	}
}

func TestGitHubAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"Daily statement reconciliation (对账)":      "daily-statement-reconciliation-对账",
		"Redis: one server, Sentinel or a Cluster": "redis-one-server-sentinel-or-a-cluster",
		"Mobile (wap) and app pay":                 "mobile-wap-and-app-pay",
		"`paykit audit` and its_findings":          "paykit-audit-and-its_findings",
		"PaykitAnomalyRecorded":                    "paykitanomalyrecorded",
	} {
		if got := githubAnchor(heading); got != want {
			t.Errorf("githubAnchor(%q) = %q, want %q", heading, got, want)
		}
	}
	if got := headings("# A\n```sh\n# not a heading\n```\n## A\n"); strings.Join(got, " ") != "a a-1" {
		t.Errorf("headings: %q", got)
	}
}

// headings returns the anchors of a page's ATX headings, outside fenced code.
func headings(md string) []string {
	var out []string
	seen := map[string]int{}
	for _, line := range outsideFences(md) {
		m := headingLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		a := githubAnchor(m[1])
		if n := seen[a]; n > 0 {
			seen[a]++
			a = a + "-" + itoa(n)
		} else {
			seen[a] = 1
		}
		out = append(out, a)
	}
	return out
}

var (
	headingLine = regexp.MustCompile(`^#{1,6}\s+(.+?)\s*#*\s*$`)
	linkTarget  = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpan    = regexp.MustCompile("`[^`]*`")
)

// links returns the targets of a page's inline links, outside fenced code and code spans.
func links(md string) []string {
	var out []string
	for _, line := range outsideFences(md) {
		for _, m := range linkTarget.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			out = append(out, m[1])
		}
	}
	return out
}

func outsideFences(md string) []string {
	var out []string
	fence := ""
	for _, line := range strings.Split(md, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		out = append(out, line)
	}
	return out
}

// githubAnchor is the anchor GitHub gives a heading: lower case, spaces as hyphens,
// every punctuation character but - and _ dropped (letters of any script stay).
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
