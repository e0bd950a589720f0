package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/paykit/paykit/internal/config"
)

// The image Docker Compose and the Helm chart run (the Dockerfile's last stage, its default
// target) holds the paykit binary and the CA roots on an empty base, runs as a non-root
// numeric user, and that user is the one the chart's pods run as.
func TestDockerImageIsTheBinaryOnlyAndNonRoot(t *testing.T) {
	raw, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var stage []string // the last stage's instructions
	for line := range strings.Lines(string(raw)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "FROM ") {
			stage = nil
		}
		stage = append(stage, line)
	}
	if len(stage) == 0 || !regexp.MustCompile(`^FROM scratch( AS \w+)?$`).MatchString(stage[0]) {
		t.Fatalf("the last stage starts %q, want FROM scratch", stage[0])
	}
	var copies []string
	user := ""
	for _, in := range stage[1:] {
		f := strings.Fields(in)
		switch f[0] {
		case "COPY":
			copies = append(copies, f[len(f)-1])
		case "USER":
			user = f[1]
		case "ENTRYPOINT", "CMD", "LABEL", "EXPOSE":
		default:
			t.Errorf("the paykit image's stage runs %q", in)
		}
	}
	if want := []string{"/etc/ssl/certs/ca-certificates.crt", "/tmp", "/paykit"}; !slices.Equal(copies, want) {
		t.Errorf("the paykit image copies %v, want %v", copies, want)
	}
	m := regexp.MustCompile(`^([0-9]+):([0-9]+)$`).FindStringSubmatch(user)
	if m == nil || m[1] == "0" {
		t.Fatalf("USER %q, want a numeric non-root uid:gid", user)
	}
	var values struct {
		PodSecurityContext struct {
			RunAsNonRoot bool `yaml:"runAsNonRoot"`
			RunAsUser    int  `yaml:"runAsUser"`
		} `yaml:"podSecurityContext"`
	}
	raw, err = os.ReadFile("../../deploy/helm/paykit/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	if p := values.PodSecurityContext; !p.RunAsNonRoot || m[1] != strconv.Itoa(p.RunAsUser) {
		t.Errorf("the chart's podSecurityContext %+v, want runAsNonRoot and the image's uid %s", p, m[1])
	}
	// A Compose service on the paykit image runs a paykit command (there is no shell to
	// run anything else); the simulators' services name the simulators target.
	for name, s := range readCompose(t) {
		switch b := s.Build.(type) {
		case nil:
		case string:
			if b != "." || len(s.Entrypoint) > 0 || len(s.Command) == 0 || !regexp.MustCompile(`^[a-z-]+$`).MatchString(s.Command[0]) {
				t.Errorf("%s: build %q, entrypoint %v, command %v: want the paykit image running a paykit command", name, b, s.Entrypoint, s.Command)
			}
		case map[string]any:
			if b["context"] != "." || b["target"] != "simulators" {
				t.Errorf("%s: build %v, want the simulators target", name, b)
			}
		default:
			t.Errorf("%s: build %v", name, b)
		}
	}
}

// Every variable the Helm chart sets (its templates and its ci/ values files' env) is one
// paykit reads, as TestDockerCompose checks for docker-compose.yml.
func TestChartSetsOnlyVariablesPaykitReads(t *testing.T) {
	read := map[string]bool{}
	if _, err := config.Load(func(k string) (string, bool) { read[k] = true; return "", false }); err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile(`(?m)^\s*(?:- name: |)((?:PAYKIT|ALIPAY)_[A-Z0-9_]+)\b`)
	files, err := filepath.Glob("../../deploy/helm/paykit/templates/*")
	if err != nil {
		t.Fatal(err)
	}
	values, _ := filepath.Glob("../../deploy/helm/paykit/ci/*.yaml")
	n := 0
	for _, f := range append(files, values...) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range names.FindAllStringSubmatch(string(raw), -1) {
			n++
			if !read[m[1]] {
				t.Errorf("%s sets %s, which paykit does not read", filepath.Base(f), m[1])
			}
		}
	}
	if n < 10 {
		t.Fatalf("found %d variables in the chart", n)
	}
}
