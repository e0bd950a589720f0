// Command helmcheck decodes every object `helm template` rendered from the paykit chart
// strictly into its Kubernetes API type (k8s.io/api, and prometheus-operator's
// monitoring/v1 for the ServiceMonitor and the PrometheusRule), failing on an unknown
// field or kind, and checks what the chart promises: probes on the admin port, resources,
// a PodDisruptionBudget, non-root, a read-only root filesystem and a termination grace
// longer than the shutdown of each Deployment, the migration and temporal-setup hooks,
// each container given only the secrets its command reads, the chart's Secrets deleted
// with the release, the admin port closed to the cluster's pods but the peers named, and
// a PrometheusRule whose groups are deploy/prometheus/alerts.yml's. With -values, each
// rendered NAME.yaml is also checked against what DIR/NAME.yaml, the values file it was
// rendered from, asks for (intent).
//
//	helmcheck -alerts deploy/prometheus/alerts.yml -values deploy/helm/paykit/ci rendered.yaml...
//
// It is its own module (tools/helmcheck) so that neither the Kubernetes API types nor Helm
// enter paykit's go.mod; scripts/helm-check.sh runs it.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"

	monv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// shutdownGrace is the longest paykit api or worker takes to stop after SIGTERM: the API's
// 20 s (cmd/paykit/main.go, runAPI) and the worker's 20 s (internal/system, ShutdownGrace).
const shutdownGrace = 20

func main() {
	alerts := flag.String("alerts", "deploy/prometheus/alerts.yml", "the alert rules the PrometheusRule must carry")
	valuesDir := flag.String("values", "", "the directory of the values files the renders came from, by name (default: the chart's defaults)")
	rainbow := flag.Bool("rainbow", false, "the three renders are a rainbow deployment's steps: before, with a new build, with the old build dropped")
	flag.Parse()
	if *rainbow {
		os.Exit(runRainbow(flag.Args()))
	}
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: helmcheck -alerts alerts.yml [-values dir] rendered.yaml...")
		os.Exit(2)
	}
	want, err := readAlerts(*alerts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	failed := false
	for _, name := range flag.Args() {
		raw, err := os.ReadFile(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		var in intent
		if *valuesDir != "" {
			if in, err = readIntent(filepath.Join(*valuesDir, filepath.Base(name))); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		r, errs := check(raw, want, in)
		for _, e := range errs {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, e)
			failed = true
		}
		fmt.Printf("%s: %d objects decoded strictly (%s)\n", name, len(r.objects), strings.Join(r.kinds(), ", "))
	}
	if failed {
		os.Exit(1)
	}
}

// runRainbow decodes the three renders of a rainbow deployment and checks its steps.
func runRainbow(names []string) int {
	if len(names) != 3 {
		fmt.Fprintln(os.Stderr, "usage: helmcheck -rainbow before.yaml during.yaml after.yaml")
		return 2
	}
	var steps []rendered
	for _, name := range names {
		raw, err := os.ReadFile(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		r, errs := decode(raw)
		for _, e := range errs {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, e)
		}
		if len(errs) > 0 {
			return 1
		}
		steps = append(steps, r)
	}
	errs := rainbowErrors(steps[0], steps[1], steps[2])
	for _, e := range errs {
		fmt.Fprintf(os.Stderr, "rainbow %s: %v\n", strings.Join(names, " → "), e)
	}
	if len(errs) > 0 {
		return 1
	}
	fmt.Printf("rainbow %s: a new build adds its worker Deployment and changes nothing else; the drained build's goes alone\n", strings.Join(names, " → "))
	return 0
}

// readAlerts decodes a Prometheus rules file strictly into the PrometheusRule's groups.
func readAlerts(name string) ([]monv1.RuleGroup, error) {
	raw, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var f struct {
		Groups []monv1.RuleGroup `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(f.Groups) == 0 {
		return nil, fmt.Errorf("%s: no rule groups", name)
	}
	return f.Groups, nil
}

type object struct {
	kind, name string
	v          any
}

type rendered struct{ objects []object }

func (r rendered) kinds() []string {
	var ks []string
	for _, o := range r.objects {
		ks = append(ks, o.kind+"/"+o.name)
	}
	return ks
}

func newObject(apiVersion, kind string) (any, error) {
	switch apiVersion + " " + kind {
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}, nil
	case "v1 Service":
		return &corev1.Service{}, nil
	case "v1 Secret":
		return &corev1.Secret{}, nil
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}, nil
	case "batch/v1 Job":
		return &batchv1.Job{}, nil
	case "networking.k8s.io/v1 NetworkPolicy":
		return &networkingv1.NetworkPolicy{}, nil
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return &monv1.ServiceMonitor{}, nil
	case "monitoring.coreos.com/v1 PrometheusRule":
		return &monv1.PrometheusRule{}, nil
	}
	return nil, fmt.Errorf("unexpected kind %q of apiVersion %q", kind, apiVersion)
}

// splitDocuments splits a multi-document YAML stream at its "---" lines.
func splitDocuments(raw []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		if len(bytes.TrimSpace(stripComments(cur.Bytes()))) > 0 {
			docs = append(docs, slices.Clone(cur.Bytes()))
		}
		cur.Reset()
	}
	for line := range bytes.Lines(raw) {
		if t := bytes.TrimRight(line, " \r\n"); bytes.Equal(t, []byte("---")) || bytes.HasPrefix(t, []byte("--- ")) {
			flush()
			continue
		}
		cur.Write(line)
	}
	flush()
	return docs
}

func stripComments(b []byte) []byte {
	var out bytes.Buffer
	for line := range bytes.Lines(b) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out.Write(line)
		}
	}
	return out.Bytes()
}

// check decodes every document of one `helm template` output strictly and checks the
// chart's promises on it, and that it does what its values ask.
func check(raw []byte, alerts []monv1.RuleGroup, in intent) (rendered, []error) {
	r, errs := decode(raw)
	errs = append(errs, r.promises(alerts)...)
	errs = append(errs, r.workerErrors(in)...)
	return r, append(errs, r.intentErrors(in)...)
}

// decode decodes every document of one `helm template` output strictly.
func decode(raw []byte) (rendered, []error) {
	var r rendered
	var errs []error
	for i, doc := range splitDocuments(raw) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			errs = append(errs, fmt.Errorf("document %d: %w", i+1, err))
			continue
		}
		v, err := newObject(tm.APIVersion, tm.Kind)
		if err != nil {
			errs = append(errs, fmt.Errorf("document %d: %w", i+1, err))
			continue
		}
		if err := yaml.UnmarshalStrict(doc, v); err != nil {
			errs = append(errs, fmt.Errorf("document %d (%s): %w", i+1, tm.Kind, err))
			continue
		}
		name := reflect.ValueOf(v).Elem().FieldByName("ObjectMeta").Interface().(metav1.ObjectMeta).Name
		if name == "" {
			errs = append(errs, fmt.Errorf("document %d (%s): no metadata.name", i+1, tm.Kind))
		}
		r.objects = append(r.objects, object{kind: tm.Kind, name: name, v: v})
	}
	return r, errs
}

func (r rendered) promises(alerts []monv1.RuleGroup) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	var pdbs []*policyv1.PodDisruptionBudget
	jobs := map[string]*batchv1.Job{}
	deployments := map[string]bool{}
	for _, o := range r.objects {
		switch v := o.v.(type) {
		case *policyv1.PodDisruptionBudget:
			pdbs = append(pdbs, v)
			if (v.Spec.MinAvailable == nil) == (v.Spec.MaxUnavailable == nil) {
				fail("PodDisruptionBudget %s: want exactly one of minAvailable and maxUnavailable", o.name)
			}
		case *batchv1.Job:
			if c := v.Spec.Template.Spec.Containers; len(c) == 1 && len(c[0].Args) == 1 {
				jobs[c[0].Args[0]] = v
			}
		}
	}
	for _, o := range r.objects {
		switch v := o.v.(type) {
		case *appsv1.Deployment:
			pod := v.Spec.Template.Spec
			if len(pod.Containers) != 1 || len(pod.Containers[0].Args) != 1 {
				fail("Deployment %s: want one container running one paykit command", o.name)
				continue
			}
			deployments[pod.Containers[0].Args[0]] = true
			for _, e := range podErrors(pod) {
				fail("Deployment %s: %v", o.name, e)
			}
			for _, e := range podSecretErrors(pod.Containers[0].Args[0], pod) {
				fail("Deployment %s: %v", o.name, e)
			}
			c := pod.Containers[0]
			if g := pod.TerminationGracePeriodSeconds; g == nil || *g <= shutdownGrace+preStop(c) {
				fail("Deployment %s: terminationGracePeriodSeconds %v, want more than the %d s shutdown plus the preStop pause", o.name, deref(g), shutdownGrace)
			}
			for probe, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
				if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.String() != "admin" {
					fail("Deployment %s: the %s probe is not an HTTP GET on the admin port", o.name, probe)
				}
			}
			if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "admin" }) {
				fail("Deployment %s: no port named admin", o.name)
			}
			if !slices.ContainsFunc(pdbs, func(p *policyv1.PodDisruptionBudget) bool {
				s, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
				return err == nil && !s.Empty() && s.Matches(labels.Set(v.Spec.Template.Labels))
			}) {
				fail("Deployment %s: no PodDisruptionBudget selects its pods", o.name)
			}
		case *batchv1.Job:
			for _, e := range podErrors(v.Spec.Template.Spec) {
				fail("Job %s: %v", o.name, e)
			}
			if c := v.Spec.Template.Spec.Containers; len(c) == 1 && len(c[0].Args) > 0 {
				for _, e := range podSecretErrors(c[0].Args[0], v.Spec.Template.Spec) {
					fail("Job %s: %v", o.name, e)
				}
			} else {
				fail("Job %s: want one container running one paykit command", o.name)
			}
		case *networkingv1.NetworkPolicy:
			for _, e := range networkPolicyErrors(v) {
				fail("NetworkPolicy %s: %v", o.name, e)
			}
		case *monv1.PrometheusRule:
			if !reflect.DeepEqual(v.Spec.Groups, alerts) {
				fail("PrometheusRule %s: its groups differ from the alert rules file's (%s)", o.name, firstDifference(v.Spec.Groups, alerts))
			}
		}
	}
	errs = append(errs, r.scrapeJobErrors(alerts)...)
	errs = append(errs, r.hookSecretErrors()...)
	for _, cmd := range []string{"api", "worker"} {
		if !deployments[cmd] {
			fail("no Deployment runs paykit %s", cmd)
		}
	}
	for i, cmd := range []string{"migrate", "temporal-setup"} {
		j, ok := jobs[cmd]
		if !ok {
			fail("no Job runs paykit %s", cmd)
			continue
		}
		if h := j.Annotations["helm.sh/hook"]; h != "pre-install,pre-upgrade" {
			fail("Job %s: helm.sh/hook %q, want pre-install,pre-upgrade", j.Name, h)
		}
		if w := j.Annotations["helm.sh/hook-weight"]; w != fmt.Sprint(i) {
			fail("Job %s: helm.sh/hook-weight %q, want %d (migrate first)", j.Name, w, i)
		}
	}
	return errs
}

// jobMatcher finds the job label matchers of an alert's expression: job="x" or job=~"x|y".
var jobMatcher = regexp.MustCompile(`\bjob\s*(=~|=)\s*"([^"]*)"`)

// scrapeJobErrors checks that the job label a ServiceMonitor gives each Deployment's pods
// is one the alerts select by, and that every job the alerts select by is some
// Deployment's: otherwise an alert such as PaykitTargetDown would never fire on
// Kubernetes. Without a ServiceMonitor there is nothing to check.
func (r rendered) scrapeJobErrors(alerts []monv1.RuleGroup) []error {
	var monitors []*monv1.ServiceMonitor
	var pods []map[string]string
	for _, o := range r.objects {
		switch v := o.v.(type) {
		case *monv1.ServiceMonitor:
			monitors = append(monitors, v)
		case *appsv1.Deployment:
			pods = append(pods, v.Spec.Template.Labels)
		}
	}
	if len(monitors) == 0 {
		return nil
	}
	var matchers []*regexp.Regexp
	for _, g := range alerts {
		for _, rule := range g.Rules {
			for _, m := range jobMatcher.FindAllStringSubmatch(rule.Expr.String(), -1) {
				// Each alternative of a flat job=~"a|b" is a job some pod must be scraped as.
				patterns := []string{regexp.QuoteMeta(m[2])}
				if m[1] == "=~" {
					patterns = []string{m[2]}
					if !strings.ContainsAny(m[2], "()") {
						patterns = strings.Split(m[2], "|")
					}
				}
				for _, pattern := range patterns {
					re, err := regexp.Compile("^(?:" + pattern + ")$")
					if err != nil {
						return []error{fmt.Errorf("alert %s: job matcher %q: %v", rule.Alert, m[2], err)}
					}
					matchers = append(matchers, re)
				}
			}
		}
	}
	var errs []error
	for _, sm := range monitors {
		var jobs []string
		for _, ep := range sm.Spec.Endpoints {
			for _, pod := range pods {
				job, err := relabelJob(ep.RelabelConfigs, pod)
				if err != nil {
					errs = append(errs, fmt.Errorf("ServiceMonitor %s: %v", sm.Name, err))
					continue
				}
				if !slices.ContainsFunc(matchers, func(re *regexp.Regexp) bool { return re.MatchString(job) }) {
					errs = append(errs, fmt.Errorf("ServiceMonitor %s: pods labelled %v are scraped as job %q, which no alert selects by", sm.Name, pod, job))
				}
				jobs = append(jobs, job)
			}
		}
		for _, re := range matchers {
			if !slices.ContainsFunc(jobs, re.MatchString) {
				errs = append(errs, fmt.Errorf("ServiceMonitor %s: no pod is scraped as a job matching %s, which an alert selects by", sm.Name, re))
			}
		}
	}
	return errs
}

// relabelJob is the job label Prometheus gives a pod with these labels through relabelings
// (replace actions only); without one the job would be the Service's name, which is an
// error here since the alerts name the processes.
func relabelJob(relabelings []monv1.RelabelConfig, pod map[string]string) (string, error) {
	for _, rc := range slices.Backward(relabelings) {
		if rc.TargetLabel != "job" {
			continue
		}
		if rc.Action != "" && !strings.EqualFold(rc.Action, "replace") {
			return "", fmt.Errorf("the job relabeling's action %q is not replace", rc.Action)
		}
		values := make([]string, len(rc.SourceLabels))
		for i, l := range rc.SourceLabels {
			name, ok := strings.CutPrefix(string(l), "__meta_kubernetes_pod_label_")
			if !ok {
				return "", fmt.Errorf("the job relabeling reads %s, not a pod label", l)
			}
			for k, v := range pod {
				if sanitized(k) == name {
					values[i] = v
				}
			}
		}
		sep, regex, repl := ";", "(.*)", "$1"
		if rc.Separator != nil {
			sep = *rc.Separator
		}
		if rc.Regex != "" {
			regex = rc.Regex
		}
		if rc.Replacement != nil {
			repl = *rc.Replacement
		}
		re, err := regexp.Compile("^(?:" + regex + ")$")
		if err != nil {
			return "", fmt.Errorf("the job relabeling's regex: %v", err)
		}
		joined := strings.Join(values, sep)
		m := re.FindStringSubmatchIndex(joined)
		if m == nil {
			return "", fmt.Errorf("the job relabeling's regex does not match %q", joined)
		}
		return string(re.ExpandString(nil, repl, joined, m)), nil
	}
	return "", fmt.Errorf("no relabeling sets the job label, so it would be the Service's name")
}

// sanitized is a Kubernetes label name as Prometheus's service discovery spells it in a
// meta label: every character outside [a-zA-Z0-9_] becomes an underscore.
func sanitized(label string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, label)
}

// networkPolicyErrors checks what a NetworkPolicy over paykit's pods promises: the API's
// port open to every peer (Alipay's callbacks come from outside the cluster), the admin
// port (/metrics, /readyz, pprof) only to the peers named, or to none (the kubelet's
// probes come from the node, which a NetworkPolicy does not hold back), and nothing else
// opened.
func networkPolicyErrors(np *networkingv1.NetworkPolicy) []error {
	var errs []error
	httpOpen, adminOpen := false, false
	for _, rule := range np.Spec.Ingress {
		if len(rule.Ports) == 0 {
			errs = append(errs, fmt.Errorf("an ingress rule opens every port"))
		}
		for _, p := range rule.Ports {
			switch p.Port.String() {
			case "http":
				httpOpen = httpOpen || len(rule.From) == 0
			case "admin":
				adminOpen = adminOpen || len(rule.From) == 0 || slices.ContainsFunc(rule.From, everyPeer)
			default:
				errs = append(errs, fmt.Errorf("an ingress rule opens port %s", p.Port.String()))
			}
		}
	}
	if !httpOpen {
		errs = append(errs, fmt.Errorf("the API's http port is not open to every peer"))
	}
	if adminOpen {
		errs = append(errs, fmt.Errorf("the admin port is not restricted to named peers"))
	}
	return errs
}

// everyPeer reports whether a peer is every pod of the cluster (every namespace's, with no
// pod selector) or every address.
func everyPeer(p networkingv1.NetworkPolicyPeer) bool {
	empty := func(s *metav1.LabelSelector) bool {
		return s == nil || (len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0)
	}
	if p.IPBlock != nil {
		return strings.HasSuffix(p.IPBlock.CIDR, "/0")
	}
	return p.NamespaceSelector != nil && empty(p.NamespaceSelector) && empty(p.PodSelector)
}

func deref(p *int64) any {
	if p == nil {
		return "unset"
	}
	return *p
}

func preStop(c corev1.Container) int64 {
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		return c.Lifecycle.PreStop.Sleep.Seconds
	}
	return 0
}

// podErrors checks that every container runs as non-root on a read-only root filesystem,
// with resources requested and a memory limit.
func podErrors(pod corev1.PodSpec) []error {
	var errs []error
	for _, c := range pod.Containers {
		nonRoot := pod.SecurityContext != nil && pod.SecurityContext.RunAsNonRoot != nil && *pod.SecurityContext.RunAsNonRoot
		sc := c.SecurityContext
		if sc != nil && sc.RunAsNonRoot != nil {
			nonRoot = *sc.RunAsNonRoot
		}
		if !nonRoot {
			errs = append(errs, fmt.Errorf("container %s: not runAsNonRoot", c.Name))
		}
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			errs = append(errs, fmt.Errorf("container %s: root filesystem not read-only", c.Name))
		}
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			errs = append(errs, fmt.Errorf("container %s: privilege escalation allowed", c.Name))
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			errs = append(errs, fmt.Errorf("container %s: want cpu and memory requests and a memory limit", c.Name))
		}
	}
	return errs
}

func firstDifference(got, want []monv1.RuleGroup) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d groups, want %d", len(got), len(want))
	}
	for i := range got {
		if reflect.DeepEqual(got[i], want[i]) {
			continue
		}
		if len(got[i].Rules) != len(want[i].Rules) {
			return fmt.Sprintf("group %s: %d rules, want %d", want[i].Name, len(got[i].Rules), len(want[i].Rules))
		}
		for j := range got[i].Rules {
			if !reflect.DeepEqual(got[i].Rules[j], want[i].Rules[j]) {
				return fmt.Sprintf("group %s: rule %s%s differs", want[i].Name, want[i].Rules[j].Alert, want[i].Rules[j].Record)
			}
		}
		return "group " + want[i].Name + " differs"
	}
	return "no difference"
}
