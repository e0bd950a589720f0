package main

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The secrets a paykit container may be given, by what they open.
const (
	secretMySQL    = "the MySQL DSN"
	secretRedis    = "the Redis address"
	secretKeyring  = "the keyring"
	secretAlipay   = "the Alipay keys"
	secretTemporal = "Temporal's credentials"
)

// secretVars are the variables through which paykit reads a secret: inline (from a
// Secret's key) or, for a _FILE one, a file of a mounted Secret.
var secretVars = map[string]string{
	"PAYKIT_MYSQL_DSN":              secretMySQL,
	"PAYKIT_REDIS_ADDR":             secretRedis,
	"PAYKIT_SECRETS_KEYS":           secretKeyring,
	"ALIPAY_APP_PRIVATE_KEY":        secretAlipay,
	"ALIPAY_APP_PRIVATE_KEY_FILE":   secretAlipay,
	"ALIPAY_PUBLIC_KEY":             secretAlipay,
	"ALIPAY_PUBLIC_KEY_FILE":        secretAlipay,
	"ALIPAY_APP_CERT":               secretAlipay,
	"ALIPAY_APP_CERT_FILE":          secretAlipay,
	"ALIPAY_PUBLIC_CERT":            secretAlipay,
	"ALIPAY_PUBLIC_CERT_FILE":       secretAlipay,
	"ALIPAY_ROOT_CERT":              secretAlipay,
	"ALIPAY_ROOT_CERT_FILE":         secretAlipay,
	"PAYKIT_TEMPORAL_TLS_CA_FILE":   secretTemporal,
	"PAYKIT_TEMPORAL_TLS_CERT_FILE": secretTemporal,
	"PAYKIT_TEMPORAL_TLS_KEY_FILE":  secretTemporal,
	"PAYKIT_TEMPORAL_API_KEY":       secretTemporal,
	"PAYKIT_TEMPORAL_API_KEY_FILE":  secretTemporal,
}

// secretsRead are the secrets each paykit command reads: the API and the worker open
// everything (internal/system, Open); migrate only the database
// (internal/system/migrate.go); temporal-setup only the Temporal frontend
// (cmd/paykit/temporalsetup.go). A container given more holds a secret it never uses.
var secretsRead = map[string][]string{
	"api":            {secretMySQL, secretRedis, secretKeyring, secretAlipay, secretTemporal},
	"worker":         {secretMySQL, secretRedis, secretKeyring, secretAlipay, secretTemporal},
	"migrate":        {secretMySQL},
	"temporal-setup": {secretTemporal},
}

// secretsNeeded are the secrets without which a command cannot run in production (its
// defaults are the development machine's).
var secretsNeeded = map[string][]string{
	"api":     {secretMySQL, secretAlipay},
	"worker":  {secretMySQL, secretAlipay},
	"migrate": {secretMySQL},
}

// alipayCertVars are certificate mode's files: all three or none.
var alipayCertVars = []string{"ALIPAY_APP_CERT_FILE", "ALIPAY_PUBLIC_CERT_FILE", "ALIPAY_ROOT_CERT_FILE"}

// podSecretErrors checks the secrets of a pod running paykit cmd: each container gets the
// secrets cmd reads and no other, every file variable names a file its mounts hold (an
// item of a Secret volume), every Secret mounted is read, and no Secret volume is left
// unmounted on the node.
func podSecretErrors(cmd string, pod corev1.PodSpec) []error {
	var errs []error
	read, known := secretsRead[cmd]
	if !known {
		return []error{fmt.Errorf("paykit %s: the checker does not know which secrets it reads (secretsRead)", cmd)}
	}
	mounted := map[string]bool{}
	for _, c := range pod.Containers {
		got, cerrs := containerSecrets(pod, c)
		errs = append(errs, cerrs...)
		for _, class := range sortedKeys(got) {
			if !slices.Contains(read, class) {
				errs = append(errs, fmt.Errorf("container %s gets %s (%s), which paykit %s does not read", c.Name, class, strings.Join(got[class], ", "), cmd))
			}
		}
		for _, class := range secretsNeeded[cmd] {
			if len(got[class]) == 0 {
				errs = append(errs, fmt.Errorf("container %s gets no %s, which paykit %s needs", c.Name, strings.TrimPrefix(class, "the "), cmd))
			}
		}
		for _, m := range c.VolumeMounts {
			mounted[m.Name] = true
		}
	}
	for _, v := range pod.Volumes {
		if v.Secret != nil && !mounted[v.Name] {
			errs = append(errs, fmt.Errorf("volume %s of Secret %s is mounted by no container", v.Name, v.Secret.SecretName))
		}
	}
	return errs
}

// containerSecrets returns the secrets a container gets, each with the variables that
// carry it.
func containerSecrets(pod corev1.PodSpec, c corev1.Container) (map[string][]string, []error) {
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	got := map[string][]string{}
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("container %s: "+format, append([]any{c.Name}, args...)...))
	}
	for _, ef := range c.EnvFrom {
		if ef.SecretRef != nil {
			fail("takes every key of Secret %s as a variable (envFrom)", ef.SecretRef.Name)
		}
	}
	readMounts := map[string]bool{}
	certs := 0
	for _, e := range c.Env {
		class, known := secretVars[e.Name]
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			if !known {
				fail("%s comes from Secret %s, and the checker does not know which secret it is (secretVars)", e.Name, e.ValueFrom.SecretKeyRef.Name)
				continue
			}
			got[class] = append(got[class], fmt.Sprintf("%s from Secret %s key %s", e.Name, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key))
			continue
		}
		if !known || e.Value == "" || (e.Name == "PAYKIT_REDIS_ADDR" && e.Value == "off") {
			continue
		}
		if !strings.HasSuffix(e.Name, "_FILE") {
			got[class] = append(got[class], e.Name+" inline")
			continue
		}
		if slices.Contains(alipayCertVars, e.Name) {
			certs++
		}
		m, ok := mountOf(c, e.Value)
		if !ok {
			fail("%s=%s is in no volume it mounts", e.Name, e.Value)
			continue
		}
		readMounts[m.Name] = true
		v := volumes[m.Name]
		if v.Secret == nil {
			fail("%s=%s is in volume %s, which is not a Secret", e.Name, e.Value, m.Name)
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(e.Value, m.MountPath), "/")
		if len(v.Secret.Items) > 0 && !slices.ContainsFunc(v.Secret.Items, func(k corev1.KeyToPath) bool { return path.Clean(k.Path) == rel }) {
			fail("%s=%s: the volume of Secret %s has no item at %s", e.Name, e.Value, v.Secret.SecretName, rel)
			continue
		}
		got[class] = append(got[class], fmt.Sprintf("%s in Secret %s", e.Name, v.Secret.SecretName))
	}
	if certs != 0 && certs != len(alipayCertVars) {
		fail("sets %d of %s: certificate mode needs all three", certs, strings.Join(alipayCertVars, ", "))
	}
	for _, m := range c.VolumeMounts {
		if v := volumes[m.Name]; v.Secret != nil && !readMounts[m.Name] {
			fail("mounts Secret %s at %s, and no variable names a file of it", v.Secret.SecretName, m.MountPath)
		}
	}
	return got, errs
}

// mountOf is the volume mount holding the file at p: the longest mount path above it.
func mountOf(c corev1.Container, p string) (corev1.VolumeMount, bool) {
	var best corev1.VolumeMount
	found := false
	for _, m := range c.VolumeMounts {
		dir := strings.TrimSuffix(m.MountPath, "/")
		if m.SubPath == "" && strings.HasPrefix(path.Clean(p), dir+"/") && len(dir) >= len(best.MountPath) {
			best, found = m, true
		}
	}
	return best, found
}

// secretRefs are the Secrets a pod's containers read, by name.
func secretRefs(pod corev1.PodSpec) []string {
	var names []string
	for _, c := range pod.Containers {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				names = append(names, e.ValueFrom.SecretKeyRef.Name)
			}
		}
		for _, ef := range c.EnvFrom {
			if ef.SecretRef != nil {
				names = append(names, ef.SecretRef.Name)
			}
		}
	}
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			names = append(names, v.Secret.SecretName)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// hookSecretErrors checks the chart's own Secrets against who reads them. A hook Secret
// is not part of the release: Helm never deletes it (not when the values move to an
// existing Secret, not on helm uninstall), so it must be deleted once its hooks have run
// (hook-succeeded), and only hook Jobs, of the same events and a later weight, may read
// it. The Deployments read the release's own Secret, which Helm deletes with the release;
// a hook Job must not, since it is absent before install and holds the previous values
// before an upgrade.
func (r rendered) hookSecretErrors() []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	secrets := map[string]map[string]string{} // name: annotations
	for _, o := range r.objects {
		if s, ok := o.v.(*corev1.Secret); ok {
			secrets[o.name] = s.Annotations
			if _, hook := s.Annotations["helm.sh/hook"]; !hook {
				continue
			}
			policy := strings.Split(s.Annotations["helm.sh/hook-delete-policy"], ",")
			for _, want := range []string{"before-hook-creation", "hook-succeeded"} {
				if !slices.Contains(policy, want) {
					fail("Secret %s: a hook whose helm.sh/hook-delete-policy lacks %s outlives its use and is never deleted with the release", o.name, want)
				}
			}
		}
	}
	for _, w := range r.workloads() {
		_, isHook := w.annotations["helm.sh/hook"]
		for _, name := range secretRefs(w.pod) {
			ann, ours := secrets[name]
			if !ours {
				continue
			}
			_, secretIsHook := ann["helm.sh/hook"]
			switch {
			case !isHook && secretIsHook:
				fail("%s %s reads Secret %s, a hook: not part of the release, so deleted after the hooks (hook-succeeded) or never", w.kind, w.name, name)
			case isHook && !secretIsHook:
				fail("%s %s, a hook, reads Secret %s, the release's: absent before install, the previous values before an upgrade", w.kind, w.name, name)
			case isHook:
				events := strings.Split(ann["helm.sh/hook"], ",")
				for _, e := range strings.Split(w.annotations["helm.sh/hook"], ",") {
					if !slices.Contains(events, e) {
						fail("%s %s runs on %s, and Secret %s, which it reads, is not written then", w.kind, w.name, e, name)
					}
				}
				if weight(ann) >= weight(w.annotations) {
					fail("%s %s: Secret %s, which it reads, has helm.sh/hook-weight %q, want less than the Job's %q", w.kind, w.name, name, ann["helm.sh/hook-weight"], w.annotations["helm.sh/hook-weight"])
				}
			}
		}
	}
	return errs
}

func weight(annotations map[string]string) int {
	var w int
	fmt.Sscan(annotations["helm.sh/hook-weight"], &w)
	return w
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
