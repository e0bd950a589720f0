package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/wechatpay"
	"github.com/paykit/paykit/wechatpaysim"
)

type composeService struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"` // "." (the paykit image) or {context, target}
	Profiles    []string          `yaml:"profiles"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	DependsOn   map[string]any    `yaml:"depends_on"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
}

// readCompose reads docker-compose.yml's services.
func readCompose(tb testing.TB) map[string]composeService {
	tb.Helper()
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		tb.Fatal(err)
	}
	var doc struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		tb.Fatalf("docker-compose.yml: %v", err)
	}
	return doc.Services
}

// TestComposeMonitoring keeps the production profile's Prometheus and Grafana consistent
// with the files they mount and the processes they watch: pinned images, every mounted
// file present, the rule files next to the mounted config, every target a paykit process
// of the profile on the port its admin address listens on (and every such process
// scraped), Grafana's
// data source the Prometheus service, its dashboard provider reading the mounted
// dashboards, and each dashboard's panels on that data source.
func TestComposeMonitoring(t *testing.T) {
	services := readCompose(t)
	mounts := func(name string) map[string]string { // container path -> host path
		m := map[string]string{}
		for _, v := range services[name].Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 || !strings.HasPrefix(parts[0], "./") {
				continue
			}
			if _, err := os.Stat("../../" + parts[0]); err != nil {
				t.Errorf("%s mounts %s, which is missing: %v", name, parts[0], err)
			}
			m[parts[1]] = "../../" + parts[0]
		}
		return m
	}
	for _, name := range []string{"prometheus", "grafana"} {
		s, ok := services[name]
		if !ok {
			t.Fatalf("docker-compose.yml has no %s service", name)
		}
		if len(s.Profiles) != 1 || s.Profiles[0] != "production" {
			t.Errorf("%s: profiles %v, want [production]", name, s.Profiles)
		}
		if !regexp.MustCompile(`^[a-z0-9/._-]+:v?[0-9]+\.[0-9]+\.[0-9]+$`).MatchString(s.Image) {
			t.Errorf("%s: image %q is not pinned to a version", name, s.Image)
		}
	}

	// Prometheus: its config, and the rule files it names, mounted side by side.
	pm := mounts("prometheus")
	cfgPath := ""
	for _, arg := range services["prometheus"].Command {
		if v, ok := strings.CutPrefix(arg, "--config.file="); ok {
			cfgPath = v
		}
	}
	hostCfg, ok := pm[cfgPath]
	if !ok {
		t.Fatalf("prometheus: --config.file=%q is not a mounted file (mounts %v)", cfgPath, pm)
	}
	raw, err := os.ReadFile(hostCfg)
	if err != nil {
		t.Fatal(err)
	}
	var prom struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(raw, &prom); err != nil {
		t.Fatalf("%s: %v", hostCfg, err)
	}
	if len(prom.RuleFiles) == 0 {
		t.Errorf("%s loads no rule files", hostCfg)
	}
	for _, rf := range prom.RuleFiles {
		if _, ok := pm[path.Join(path.Dir(cfgPath), rf)]; !ok {
			t.Errorf("prometheus: rule file %s is not mounted next to %s", rf, cfgPath)
		}
	}
	scraped := map[string]bool{}
	jobCommand := map[string]string{"paykit-api": "api", "paykit-worker": "worker"}
	for _, sc := range prom.ScrapeConfigs {
		cmd, ok := jobCommand[sc.JobName]
		if !ok {
			t.Errorf("scrape job %s: want one of paykit-api, paykit-worker (the alerts name them)", sc.JobName)
			continue
		}
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				host, port, _ := net.SplitHostPort(target)
				s, ok := services[host]
				if !ok || profileOf(s) != "production" || len(s.Command) == 0 || s.Command[0] != cmd {
					t.Errorf("scrape job %s: target %s is not a production `paykit %s`", sc.JobName, target, cmd)
					continue
				}
				listen := s.Environment["PAYKIT_API_ADMIN_ADDR"]
				if cmd == "worker" {
					listen = s.Environment["PAYKIT_WORKER_ADMIN_ADDR"]
				}
				if _, p, _ := net.SplitHostPort(listen); p != port {
					t.Errorf("scrape job %s: target %s, but %s listens on %s", sc.JobName, target, host, listen)
				}
				scraped[host] = true
			}
		}
	}
	for name, s := range services {
		if profileOf(s) == "production" && s.Build == "." && len(s.Command) > 0 && (s.Command[0] == "api" || s.Command[0] == "worker") && !scraped[name] {
			t.Errorf("prometheus does not scrape %s", name)
		}
	}

	// Grafana: the data source is the Prometheus service, the provider reads the mounted
	// dashboards, and their panels use the data source.
	gm := mounts("grafana")
	var dsFile struct {
		Datasources []struct {
			UID  string `yaml:"uid"`
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	readYAML(t, gm["/etc/grafana/provisioning/datasources"]+"/prometheus.yml", &dsFile)
	if len(dsFile.Datasources) != 1 || dsFile.Datasources[0].Type != "prometheus" {
		t.Fatalf("grafana data sources %+v, want one prometheus", dsFile.Datasources)
	}
	ds := dsFile.Datasources[0]
	if u, err := url.Parse(ds.URL); err != nil || u.Hostname() != "prometheus" || !slices.Contains(services["prometheus"].Ports, "127.0.0.1:9090:"+u.Port()) {
		t.Errorf("grafana data source %s is not the prometheus service's port 9090", ds.URL)
	}
	var provFile struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, gm["/etc/grafana/provisioning/dashboards"]+"/paykit.yml", &provFile)
	if len(provFile.Providers) != 1 {
		t.Fatalf("grafana dashboard providers %+v, want one", provFile.Providers)
	}
	dashDir, ok := gm[provFile.Providers[0].Options.Path]
	if !ok {
		t.Fatalf("grafana: the provider reads %s, which is not mounted", provFile.Providers[0].Options.Path)
	}
	dashes, err := os.ReadDir(dashDir)
	if err != nil || len(dashes) == 0 {
		t.Fatalf("grafana: no dashboards in %s: %v", dashDir, err)
	}
	for _, d := range dashes {
		raw, err := os.ReadFile(dashDir + "/" + d.Name())
		if err != nil {
			t.Fatal(err)
		}
		var dash struct {
			Panels []struct {
				Title      string `json:"title"`
				Type       string `json:"type"`
				Datasource struct {
					UID string `json:"uid"`
				} `json:"datasource"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(raw, &dash); err != nil {
			t.Fatalf("%s: %v", d.Name(), err)
		}
		for _, p := range dash.Panels {
			if p.Type != "row" && p.Datasource.UID != ds.UID {
				t.Errorf("%s: panel %q uses data source %q, want %q", d.Name(), p.Title, p.Datasource.UID, ds.UID)
			}
		}
	}
}

func readYAML(tb testing.TB, file string, v any) {
	tb.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		tb.Fatalf("%s: %v", file, err)
	}
}

func profileOf(s composeService) string {
	if len(s.Profiles) == 0 {
		return ""
	}
	return s.Profiles[0]
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
	if _, err := config.Load(func(k string) (string, bool) { read[k] = true; return "", false }); err != nil {
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
	// Every `paykit tenant` of the file passes the command's rules: a webhook secret, if
	// given, is long enough, and a notify_url comes with the keyring that seals its secret.
	for name, s := range doc.Services {
		if s.Build != "." || len(s.Command) == 0 || s.Command[0] != "tenant" {
			continue
		}
		f, _, err := parseTenantFlags(config.Config{}, s.Command[1:], strings.NewReader(""), io.Discard)
		if err == nil {
			_, _, err = f.Check()
		}
		if err != nil {
			t.Errorf("%s: paykit %s: %v", name, strings.Join(s.Command, " "), err)
		}
		if f.NotifyURL != "" && s.Environment["PAYKIT_SECRETS_KEYS"] == "" {
			t.Errorf("%s gives a notify_url without PAYKIT_SECRETS_KEYS to seal its webhook secret", name)
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

// inProfile reports whether compose runs s under profile: services without a profile
// run under every one.
func inProfile(s composeService, profile string) bool {
	return len(s.Profiles) == 0 || slices.Contains(s.Profiles, profile)
}

// TestComposeProductionSeedsNoDemoTenant: the demo tenant's API key is public (it is in
// docker-compose.yml and the docs), so only the dev profile creates it; nothing the
// production profile runs creates a tenant or carries the key.
func TestComposeProductionSeedsNoDemoTenant(t *testing.T) {
	services := readCompose(t)
	seeded := false
	for name, s := range services {
		seeds := s.Build == "." && len(s.Command) > 0 && s.Command[0] == "tenant"
		if !seeds && !slices.ContainsFunc(s.Command, func(a string) bool { return strings.Contains(a, demoAPIKey) }) {
			continue
		}
		if inProfile(s, "dev") {
			seeded = true
		}
		if inProfile(s, "production") {
			t.Errorf("%s (profiles %v) runs in the production profile and seeds a tenant: %v", name, s.Profiles, s.Command)
		}
	}
	if !seeded {
		t.Error("the dev profile seeds no demo tenant")
	}
}

// TestComposePublishesOperationsOnLoopbackOnly: in both profiles, only the API's public
// port (and the simulator's) is published on every interface. Temporal's frontend and UI,
// Prometheus and Grafana are published on 127.0.0.1 only, and the admin addresses of the
// paykit processes (readiness, metrics, pprof) are not published at all: Prometheus and
// the health checks reach them inside the network.
func TestComposePublishesOperationsOnLoopbackOnly(t *testing.T) {
	services := readCompose(t)
	loopbackOnly := map[string]bool{"prometheus": true, "grafana": true}
	for name, s := range services {
		operations := loopbackOnly[name] || strings.HasPrefix(s.Image, "temporalio/")
		var admin []string // container ports of the admin addresses
		for _, k := range []string{"PAYKIT_API_ADMIN_ADDR", "PAYKIT_WORKER_ADMIN_ADDR"} {
			if _, p, err := net.SplitHostPort(s.Environment[k]); err == nil {
				admin = append(admin, p)
			}
		}
		for _, spec := range s.Ports {
			parts := strings.Split(spec, ":")
			if len(parts) < 2 || len(parts) > 3 {
				t.Errorf("%s publishes %q: want [ip:]host:container", name, spec)
				continue
			}
			container := parts[len(parts)-1]
			if slices.Contains(admin, container) {
				t.Errorf("%s publishes its admin port %s (%q): readiness, metrics and pprof stay inside the network", name, container, spec)
			}
			if operations && (len(parts) != 3 || parts[0] != "127.0.0.1") {
				t.Errorf("%s publishes %q on every interface, want \"127.0.0.1:%s\"", name, spec, strings.Join(parts[len(parts)-2:], ":"))
			}
		}
	}
	for _, p := range []string{"dev", "production"} {
		found := false
		for _, s := range services {
			found = found || (inProfile(s, p) && strings.HasPrefix(s.Image, "temporalio/") && len(s.Ports) > 0)
		}
		if !found {
			t.Errorf("the %s profile publishes no Temporal port: the check above saw none", p)
		}
	}
}

// TestComposeHealthChecksUseTheAdminAddress: the API's health check asks readiness where
// it is served, on the admin address inside the container.
func TestComposeHealthChecksUseTheAdminAddress(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
			Healthcheck struct {
				Test []string `yaml:"test"`
			} `yaml:"healthcheck"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	n := 0
	for name, s := range doc.Services {
		if len(s.Command) == 0 || s.Command[0] != "api" {
			continue
		}
		n++
		_, port, err := net.SplitHostPort(s.Environment["PAYKIT_API_ADMIN_ADDR"])
		if err != nil {
			t.Errorf("%s: PAYKIT_API_ADMIN_ADDR %q: %v", name, s.Environment["PAYKIT_API_ADMIN_ADDR"], err)
			continue
		}
		if want := "http://127.0.0.1:" + port + "/readyz"; !slices.Contains(s.Healthcheck.Test, want) {
			t.Errorf("%s: health check %v, want one on %s", name, s.Healthcheck.Test, want)
		}
	}
	if n == 0 {
		t.Fatal("no `paykit api` service")
	}
}

// TestComposeProductionTemporalUsesMutualTLS: the production profile's Temporal server
// requires a client certificate on its frontend and internode traffic, and everything that
// talks to it (the paykit processes, temporal-ui) presents one and verifies the server by
// the name in its certificate. All of them read the files from the operator's
// ./deploy/temporal-certs (git-ignored), mounted read-only, under the names
// scripts/temporal-certs.sh writes; the server name is the one that script puts in the
// server's certificate by default.
func TestComposeProductionTemporalUsesMutualTLS(t *testing.T) {
	const certsDir = "./deploy/temporal-certs"
	services := readCompose(t)
	script, err := os.ReadFile("../../scripts/temporal-certs.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`names=\(([a-z0-9.-]+)`).FindSubmatch(script)
	if m == nil {
		t.Fatal("scripts/temporal-certs.sh: no default server name")
	}
	serverName := string(m[1])
	if ignore, err := os.ReadFile("../../.gitignore"); err != nil || !slices.Contains(strings.Split(string(ignore), "\n"), "/deploy/temporal-certs/") {
		t.Errorf(".gitignore must keep %s (private keys) out of git", certsDir)
	}
	// file checks that a setting names a file of the certificates directory, as mounted
	// read-only into the service, under one of the names the script writes.
	file := func(name string, s composeService, key string, want ...string) {
		t.Helper()
		v := s.Environment[key]
		for _, vol := range s.Volumes {
			parts := strings.Split(vol, ":")
			if len(parts) == 3 && parts[0] == certsDir && parts[2] == "ro" && path.Dir(v) == parts[1] {
				if !slices.Contains(want, path.Base(v)) {
					t.Errorf("%s: %s=%s, want one of %v (scripts/temporal-certs.sh)", name, key, v, want)
				}
				return
			}
		}
		t.Errorf("%s: %s=%q is not in %s mounted read-only (volumes %v)", name, key, v, certsDir, s.Volumes)
	}

	server, ok := services["temporal-server"]
	if !ok || profileOf(server) != "production" {
		t.Fatal("no production temporal-server service")
	}
	if server.Environment["TEMPORAL_TLS_REQUIRE_CLIENT_AUTH"] != "true" {
		t.Errorf("temporal-server: TEMPORAL_TLS_REQUIRE_CLIENT_AUTH=%q, want true", server.Environment["TEMPORAL_TLS_REQUIRE_CLIENT_AUTH"])
	}
	for key, want := range map[string]string{
		"TEMPORAL_TLS_SERVER_CA_CERT":  "ca.pem", // internode: clients' CA and servers' CA
		"TEMPORAL_TLS_SERVER_CERT":     "server.pem",
		"TEMPORAL_TLS_SERVER_KEY":      "server-key.pem",
		"TEMPORAL_TLS_FRONTEND_CERT":   "server.pem",
		"TEMPORAL_TLS_FRONTEND_KEY":    "server-key.pem",
		"TEMPORAL_TLS_CLIENT1_CA_CERT": "ca.pem", // the image lists both in clientCaFiles
		"TEMPORAL_TLS_CLIENT2_CA_CERT": "ca.pem",
	} {
		file("temporal-server", server, key, want)
	}
	for _, key := range []string{"TEMPORAL_TLS_INTERNODE_SERVER_NAME", "TEMPORAL_TLS_FRONTEND_SERVER_NAME"} {
		if got := server.Environment[key]; got != serverName {
			t.Errorf("temporal-server: %s=%q, want %q (the name in the server's certificate)", key, got, serverName)
		}
	}

	clients := 0
	for name, s := range services {
		if profileOf(s) != "production" {
			continue
		}
		switch {
		case s.Environment["PAYKIT_TEMPORAL_ADDR"] != "":
			clients++
			if host, _, _ := net.SplitHostPort(s.Environment["PAYKIT_TEMPORAL_ADDR"]); host != "temporal-server" {
				t.Errorf("%s: PAYKIT_TEMPORAL_ADDR=%s", name, s.Environment["PAYKIT_TEMPORAL_ADDR"])
			}
			file(name, s, "PAYKIT_TEMPORAL_TLS_CA_FILE", "ca.pem")
			file(name, s, "PAYKIT_TEMPORAL_TLS_CERT_FILE", "client.pem")
			file(name, s, "PAYKIT_TEMPORAL_TLS_KEY_FILE", "client-key.pem")
			if got := s.Environment["PAYKIT_TEMPORAL_TLS_SERVER_NAME"]; got != serverName {
				t.Errorf("%s: PAYKIT_TEMPORAL_TLS_SERVER_NAME=%q, want %q", name, got, serverName)
			}
		case s.Environment["TEMPORAL_ADDRESS"] != "":
			clients++
			file(name, s, "TEMPORAL_TLS_CA", "ca.pem")
			file(name, s, "TEMPORAL_TLS_CERT", "client.pem")
			file(name, s, "TEMPORAL_TLS_KEY", "client-key.pem")
			if s.Environment["TEMPORAL_TLS_SERVER_NAME"] != serverName || s.Environment["TEMPORAL_TLS_ENABLE_HOST_VERIFICATION"] != "true" {
				t.Errorf("%s: TEMPORAL_TLS_SERVER_NAME=%q TEMPORAL_TLS_ENABLE_HOST_VERIFICATION=%q, want %q and true", name,
					s.Environment["TEMPORAL_TLS_SERVER_NAME"], s.Environment["TEMPORAL_TLS_ENABLE_HOST_VERIFICATION"], serverName)
			}
		}
	}
	if clients < 5 { // temporal-setup, two workers, the API, the UI
		t.Errorf("%d production clients of Temporal checked, want at least 5", clients)
	}
}

// TestDockerComposeLeastPrivilege keeps what docker-compose.yml exposes small: no paykit
// process connects to MySQL as root, root's password is random (nothing uses it), and
// every published port but the API's binds the loopback address only (the simulator's
// control API pays any trade; it was published on every interface).
func TestDockerComposeLeastPrivilege(t *testing.T) {
	services := readCompose(t)
	for name, s := range services {
		if dsn, ok := s.Environment["PAYKIT_MYSQL_DSN"]; ok {
			if user, _, _ := strings.Cut(dsn, ":"); user == "root" || strings.HasPrefix(dsn, "root@") {
				t.Errorf("%s connects to MySQL as root: %s", name, dsn)
			}
		}
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") && !(strings.HasPrefix(name, "api") && p == "8080:8080") {
				t.Errorf("%s publishes %s on every interface; want 127.0.0.1:…", name, p)
			}
		}
	}
	mysql := services["mysql"].Environment
	if _, fixed := mysql["MYSQL_ROOT_PASSWORD"]; fixed || mysql["MYSQL_RANDOM_ROOT_PASSWORD"] != "yes" || mysql["MYSQL_USER"] == "" {
		t.Errorf("mysql: %v; want a random root password and a user of paykit's own", mysql)
	}
}

// TestComposeWechatPayMerchantIsTheSimulators keeps docker-compose.yml's WeChat Pay
// merchant what its keygen job writes and its simulator serves: paykit's settings, read
// from a directory `wechatpaysim keygen` wrote (the file's paths mapped onto it), open a
// Native order at a simulator run as the file runs it, and its signed answers verify.
func TestComposeWechatPayMerchantIsTheSimulators(t *testing.T) {
	svcs := readCompose(t)
	m := regexp.MustCompile(`wechatpaysim keygen -out (\S+)`).FindStringSubmatch(strings.Join(svcs["keygen"].Entrypoint, " "))
	if m == nil {
		t.Fatalf("keygen %v runs no `wechatpaysim keygen -out DIR`", svcs["keygen"].Entrypoint)
	}
	keyDir := m[1]
	sim, ok := svcs["wechatpaysim"]
	if !ok || sim.Environment["WECHATPAYSIM_KEY_DIR"] != keyDir {
		t.Fatalf("the wechatpaysim service's WECHATPAYSIM_KEY_DIR %q, want keygen's %s", sim.Environment["WECHATPAYSIM_KEY_DIR"], keyDir)
	}
	dir := t.TempDir()
	ks, err := wechatpaysim.GenerateKeys("", "", 2048) // keygen's defaults: the file gives no -mchid or -appid
	if err != nil {
		t.Fatal(err)
	}
	if err := ks.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"api", "worker", "api-production", "worker-1"} {
		env := map[string]string{}
		for k, v := range svcs[name].Environment {
			if rest, ok := strings.CutPrefix(v, keyDir+"/"); ok && strings.HasPrefix(k, "WECHATPAY_") {
				v = path.Join(dir, rest)
			}
			env[k] = v
		}
		c, err := config.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ac, err := c.WechatPay.Adapter(c.PublicURL + "/callbacks/wechatpay")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if ac.MchID != ks.MchID || ac.AppID != ks.AppID || ac.MerchantSerialNo != ks.MerchantSerialNo || ac.PublicKeyID != ks.PublicKeyID {
			t.Fatalf("%s: merchant %s, appid %s, serial %s, public key %s; keygen wrote %s, %s, %s, %s", name,
				ac.MchID, ac.AppID, ac.MerchantSerialNo, ac.PublicKeyID, ks.MchID, ks.AppID, ks.MerchantSerialNo, ks.PublicKeyID)
		}
		if u, err := url.Parse(ac.BaseURL); err != nil || u.Host != "wechatpaysim:"+portOf(t, sim.Environment["WECHATPAYSIM_ADDR"]) {
			t.Fatalf("%s: WECHATPAY_BASE_URL %s, want the wechatpaysim service at %s", name, ac.BaseURL, sim.Environment["WECHATPAYSIM_ADDR"])
		}
		if name != "api" {
			continue
		}
		loaded, err := wechatpaysim.LoadKeyDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		cfg := loaded.Config()
		cfg.Merchants[0].KeyMode = sim.Environment["WECHATPAYSIM_KEY_MODE"]
		s, err := wechatpaysim.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		srv := httptest.NewServer(s.Handler())
		t.Cleanup(srv.Close)
		ac.BaseURL = srv.URL
		ctx := context.Background()
		gw, err := wechatpay.New(ctx, ac)
		if err != nil {
			t.Fatal(err)
		}
		h, err := gw.Open(ctx, payment.TradeRequest{PaymentNo: "P20261207compose01", Method: payment.MethodWechatNative,
			Subject: "compose", Amount: 100, ExpireAt: time.Now().Add(15 * time.Minute)})
		if err != nil || h.QRCode == "" {
			t.Fatalf("a Native order at the compose simulator: %+v, %v", h, err)
		}
		if tr, err := gw.Query(ctx, "P20261207compose01"); err != nil || tr.State != payment.TradeWaiting {
			t.Fatalf("its query: %+v, %v", tr, err)
		}
	}
}

func portOf(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%q: %v", addr, err)
	}
	return p
}
