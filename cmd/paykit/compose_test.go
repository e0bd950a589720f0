package main

import (
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type composeService struct {
	Image       string            `yaml:"image"`
	Build       string            `yaml:"build"`
	Profiles    []string          `yaml:"profiles"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	DependsOn   map[string]any    `yaml:"depends_on"`
}

// TestDockerCompose keeps docker-compose.yml consistent with the code, since no Docker runs
// here: every paykit variable it sets is one LoadConfig reads, the dev and production
// profiles never mix (each profile's paykit processes talk to that profile's Temporal),
// production runs two workers and an API after `paykit temporal-setup`, and the Temporal
// images are the server version pinned in tools/go.mod.
func TestDockerCompose(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	read := map[string]bool{}
	if _, err := LoadConfig(func(k string) (string, bool) { read[k] = true; return "", false }); err != nil {
		t.Fatal(err)
	}
	profile := func(s composeService) string {
		if len(s.Profiles) == 0 {
			return ""
		}
		if len(s.Profiles) != 1 || (s.Profiles[0] != "dev" && s.Profiles[0] != "production") {
			t.Errorf("profiles %v: want one of dev, production", s.Profiles)
		}
		return s.Profiles[0]
	}
	commands := map[string][]string{} // profile -> paykit commands it runs
	for name, s := range doc.Services {
		p := profile(s)
		for dep := range s.DependsOn {
			d, ok := doc.Services[dep]
			if !ok {
				t.Errorf("%s depends on %s, which does not exist", name, dep)
			} else if dp := profile(d); dp != "" && dp != p {
				t.Errorf("%s (profile %q) depends on %s (profile %q)", name, p, dep, dp)
			}
		}
		if s.Build != "." || len(s.Command) == 0 || !regexp.MustCompile(`^[a-z-]+$`).MatchString(s.Command[0]) {
			continue
		}
		commands[p] = append(commands[p], s.Command[0])
		for k := range s.Environment {
			if !read[k] {
				t.Errorf("%s sets %s, which paykit does not read", name, k)
			}
		}
		if addr, ok := s.Environment["PAYKIT_TEMPORAL_ADDR"]; ok && p != "" {
			host, _, _ := net.SplitHostPort(addr)
			if tp := profile(doc.Services[host]); tp != p {
				t.Errorf("%s (profile %s) talks to Temporal at %s, a service of profile %q", name, p, addr, tp)
			}
		}
	}
	for cmd, want := range map[string]int{"worker": 2, "api": 1, "temporal-setup": 1} {
		if n := countOf(commands["production"], cmd); n < want {
			t.Errorf("production profile runs %d `paykit %s`, want at least %d", n, cmd, want)
		}
	}
	for cmd, want := range map[string]int{"worker": 1, "api": 1} {
		if n := countOf(commands["dev"], cmd); n != want {
			t.Errorf("dev profile runs %d `paykit %s`, want %d", n, cmd, want)
		}
	}
	if env, err := os.ReadFile("../../.env"); err != nil || !strings.Contains(string(env), "\nCOMPOSE_PROFILES=dev\n") {
		t.Errorf(".env must select the dev profile by default: %q %v", env, err)
	}

	mod, err := os.ReadFile("../../tools/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`go\.temporal\.io/server v(\S+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("tools/go.mod pins no go.temporal.io/server")
	}
	version := string(m[1])
	for image, prefix := range map[string]string{"temporalio/server:": version, "temporalio/admin-tools:": version + "-"} {
		found := false
		for name, s := range doc.Services {
			if tag, ok := strings.CutPrefix(s.Image, image); ok {
				found = true
				if tag != version && !strings.HasPrefix(tag, prefix) {
					t.Errorf("%s runs %s, want the server version tools/go.mod pins (%s)", name, s.Image, version)
				}
			}
		}
		if !found {
			t.Errorf("no service runs %s", image)
		}
	}
}

func countOf(list []string, v string) int {
	n := 0
	for i := slices.Index(list, v); i >= 0; i = slices.Index(list, v) {
		n++
		list = list[i+1:]
	}
	return n
}
