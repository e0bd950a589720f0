package main

import (
	"fmt"
	"os"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// intent is what a values file asks of the chart, as far as the checks need to know; a
// value it leaves out is the chart's default. The checks then ask the render to do it.
type intent struct {
	NetworkPolicy struct {
		// Enabled is on unless the values turn it off.
		Enabled *bool `json:"enabled"`
	} `json:"networkPolicy"`
	MySQL struct {
		// Migrate is the migration's own DSN: inline or a key of an existing Secret.
		Migrate struct {
			DSN            string `json:"dsn"`
			ExistingSecret string `json:"existingSecret"`
			Key            string `json:"key"`
		} `json:"migrate"`
	} `json:"mysql"`
	// Worker is how the workers run: with Worker Versioning, one Deployment per build.
	Worker workerIntent `json:"worker"`
	Alipay struct {
		// Certificates, from an existing Secret, put the default app in certificate mode.
		Certificates struct {
			ExistingSecret string `json:"existingSecret"`
		} `json:"certificates"`
	} `json:"alipay"`
}

// readIntent reads what a values file asks for; it decodes loosely, since the values
// file is the chart's to validate (helm lint --strict).
func readIntent(name string) (intent, error) {
	var in intent
	raw, err := os.ReadFile(name)
	if err != nil {
		return in, err
	}
	if err := yaml.Unmarshal(raw, &in); err != nil {
		return in, fmt.Errorf("%s: %w", name, err)
	}
	return in, nil
}

// workload is a pod template the chart renders: a Deployment's or a Job's.
type workload struct {
	kind, name  string
	cmd         string // the paykit command its container runs
	annotations map[string]string
	labels      map[string]string
	pod         corev1.PodSpec
}

func (r rendered) workloads() []workload {
	var ws []workload
	for _, o := range r.objects {
		var meta metav1.ObjectMeta
		var tmpl corev1.PodTemplateSpec
		switch v := o.v.(type) {
		case *appsv1.Deployment:
			meta, tmpl = v.ObjectMeta, v.Spec.Template
		case *batchv1.Job:
			meta, tmpl = v.ObjectMeta, v.Spec.Template
		default:
			continue
		}
		w := workload{kind: o.kind, name: o.name, annotations: meta.Annotations, labels: tmpl.Labels, pod: tmpl.Spec}
		if c := tmpl.Spec.Containers; len(c) == 1 && len(c[0].Args) > 0 {
			w.cmd = c[0].Args[0]
		}
		ws = append(ws, w)
	}
	return ws
}

// intentErrors checks that the render does what the values ask: a NetworkPolicy over
// every Deployment's pods unless turned off; the migration's own DSN for the migration
// Job alone, or else the API's; certificate mode's three files where asked, and nowhere
// else.
func (r rendered) intentErrors(in intent) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	ws := r.workloads()
	if in.NetworkPolicy.Enabled == nil || *in.NetworkPolicy.Enabled {
		for _, w := range ws {
			if w.kind == "Deployment" && !r.isolated(w.labels) {
				fail("Deployment %s: no NetworkPolicy isolates its pods' ingress, so any pod of the cluster reaches its admin port (pprof, /metrics); networkPolicy.enabled is on by default", w.name)
			}
		}
	}
	var apiDSN, migrateDSN string
	var migrateRef *corev1.SecretKeySelector
	for _, w := range ws {
		switch w.cmd {
		case "api":
			apiDSN, _ = r.dsn(w.pod)
		case "migrate":
			migrateDSN, migrateRef = r.dsn(w.pod)
		}
	}
	m := in.MySQL.Migrate
	switch {
	case migrateRef == nil:
		// No migration Job, or one without a DSN: the Job's own checks say so.
	case m.ExistingSecret != "":
		key := m.Key
		if key == "" {
			key = "mysql-migrate-dsn"
		}
		if migrateRef.Name != m.ExistingSecret || migrateRef.Key != key {
			fail("the migration Job reads PAYKIT_MYSQL_DSN from Secret %s key %s, want mysql.migrate's %s key %s", migrateRef.Name, migrateRef.Key, m.ExistingSecret, key)
		}
	case m.DSN != "":
		if migrateDSN != m.DSN {
			fail("the migration Job's PAYKIT_MYSQL_DSN (Secret %s key %s) is not mysql.migrate.dsn", migrateRef.Name, migrateRef.Key)
		}
	case apiDSN == "":
		// No API: the Deployments' checks say so.
	default:
		if migrateDSN != apiDSN {
			fail("the migration Job's PAYKIT_MYSQL_DSN (Secret %s key %s) is not the API's, and the values name no DSN of its own", migrateRef.Name, migrateRef.Key)
		}
	}
	if m.DSN != "" || m.ExistingSecret != "" {
		if migrateRef != nil && migrateDSN == apiDSN {
			fail("the API reads the migration's own DSN")
		}
	}
	certs := in.Alipay.Certificates.ExistingSecret
	for _, w := range ws {
		for _, c := range w.pod.Containers {
			env := map[string]string{}
			for _, e := range c.Env {
				env[e.Name] = e.Value
			}
			if certs == "" || (w.cmd != "api" && w.cmd != "worker") {
				for _, name := range alipayCertVars {
					if _, ok := env[name]; ok {
						fail("%s %s: container %s sets %s, and the values ask for no certificate mode", w.kind, w.name, c.Name, name)
					}
				}
				continue
			}
			for _, name := range alipayCertVars {
				file, ok := env[name]
				if !ok {
					fail("%s %s: container %s: alipay.certificates.existingSecret asks for certificate mode, and %s is not set", w.kind, w.name, c.Name, name)
					continue
				}
				if mnt, ok := mountOf(c, file); ok {
					if v := volume(w.pod, mnt.Name); v.Secret == nil || v.Secret.SecretName != certs {
						fail("%s %s: container %s: %s=%s is not from Secret %s", w.kind, w.name, c.Name, name, file, certs)
					}
				}
			}
			if _, ok := env["ALIPAY_PUBLIC_KEY_FILE"]; ok {
				fail("%s %s: container %s sets ALIPAY_PUBLIC_KEY_FILE, which certificate mode does not read (and its Secret need not hold)", w.kind, w.name, c.Name)
			}
		}
	}
	return errs
}

// isolated reports whether a NetworkPolicy of the render selects pods with these labels
// for ingress; networkPolicyErrors checks what the policy lets in.
func (r rendered) isolated(pod map[string]string) bool {
	for _, o := range r.objects {
		np, ok := o.v.(*networkingv1.NetworkPolicy)
		if !ok {
			continue
		}
		if len(np.Spec.PolicyTypes) > 0 && !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			continue
		}
		s, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err == nil && s.Matches(labels.Set(pod)) {
			return true
		}
	}
	return false
}

// dsn is the PAYKIT_MYSQL_DSN a pod's container reads: the value, when the chart renders
// the Secret, else the Secret and key it names.
func (r rendered) dsn(pod corev1.PodSpec) (string, *corev1.SecretKeySelector) {
	for _, c := range pod.Containers {
		for _, e := range c.Env {
			if e.Name != "PAYKIT_MYSQL_DSN" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				continue
			}
			ref := e.ValueFrom.SecretKeyRef
			for _, o := range r.objects {
				if s, ok := o.v.(*corev1.Secret); ok && o.name == ref.Name {
					if v, ok := s.StringData[ref.Key]; ok {
						return v, ref
					}
					if v, ok := s.Data[ref.Key]; ok {
						return string(v), ref
					}
				}
			}
			return "Secret " + ref.Name + " key " + ref.Key, ref
		}
	}
	return "", nil
}

func volume(pod corev1.PodSpec, name string) corev1.Volume {
	for _, v := range pod.Volumes {
		if v.Name == name {
			return v
		}
	}
	return corev1.Volume{}
}
