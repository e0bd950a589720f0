package main

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// versioningVars are the worker's Worker Versioning settings (internal/config), which the
// chart sets on each versioned worker Deployment and on nothing else.
var versioningVars = []string{"PAYKIT_WORKER_VERSIONING", "PAYKIT_WORKER_DEPLOYMENT", "PAYKIT_WORKER_BUILD_ID"}

// workerIntent is what a values file asks of the workers.
type workerIntent struct {
	Replicas   *int32 `json:"replicas"`
	Versioning struct {
		Enabled        bool   `json:"enabled"`
		DeploymentName string `json:"deploymentName"`
	} `json:"versioning"`
	Versions []struct {
		BuildID  string `json:"buildId"`
		Tag      string `json:"tag"`
		Replicas *int32 `json:"replicas"`
	} `json:"versions"`
}

// deployments returns the rendered Deployments that run the paykit command cmd.
func (r rendered) deployments(cmd string) []*appsv1.Deployment {
	var ds []*appsv1.Deployment
	for _, o := range r.objects {
		d, ok := o.v.(*appsv1.Deployment)
		if !ok {
			continue
		}
		if c := d.Spec.Template.Spec.Containers; len(c) == 1 && len(c[0].Args) > 0 && c[0].Args[0] == cmd {
			ds = append(ds, d)
		}
	}
	return ds
}

// containerEnv is the plain values of a Deployment's first container's environment.
func containerEnv(d *appsv1.Deployment) map[string]string {
	env := map[string]string{}
	if c := d.Spec.Template.Spec.Containers; len(c) > 0 {
		for _, e := range c[0].Env {
			env[e.Name] = e.Value
		}
	}
	return env
}

// workerErrors checks the API and worker Deployments against what the values ask: one API
// Deployment, never versioned; without versioning one worker Deployment, as the chart
// always rendered it; with versioning one per build listed, each under a name and selector
// of its own, polling the API's task queue as its own build of the same Worker
// Deployment, from its own image tag, with a PodDisruptionBudget of its own.
func (r rendered) workerErrors(in intent) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	apis, workers := r.deployments("api"), r.deployments("worker")
	if len(apis) != 1 {
		fail("%d API Deployments, want one (the API's build never matters to the runs)", len(apis))
	}
	queue := ""
	for _, d := range apis {
		env := containerEnv(d)
		queue = env["PAYKIT_TASK_QUEUE"]
		for _, v := range versioningVars {
			if _, ok := env[v]; ok {
				fail("Deployment %s: the API sets %s", d.Name, v)
			}
		}
	}
	w := in.Worker
	if !w.Versioning.Enabled {
		if len(workers) != 1 {
			fail("versioning off: %d worker Deployments, want one", len(workers))
		}
		for _, d := range workers {
			if !strings.HasSuffix(d.Name, "-worker") || len(d.Spec.Selector.MatchLabels) != 3 || d.Spec.Selector.MatchLabels["app.kubernetes.io/component"] != "worker" {
				fail("versioning off: worker Deployment %s selecting %v, want <release>-worker selecting the release's workers", d.Name, d.Spec.Selector.MatchLabels)
			}
			for _, v := range versioningVars {
				if _, ok := containerEnv(d)[v]; ok {
					fail("versioning off: Deployment %s sets %s", d.Name, v)
				}
			}
		}
		return errs
	}
	if len(workers) != len(w.Versions) {
		fail("versioning on: %d worker Deployments for %d builds in worker.versions", len(workers), len(w.Versions))
	}
	wantDeployment := w.Versioning.DeploymentName
	if wantDeployment == "" {
		wantDeployment = "paykit-" + strings.ReplaceAll(queue, ".", "-")
	}
	byBuild := map[string]*appsv1.Deployment{}
	for _, d := range workers {
		env := containerEnv(d)
		if env["PAYKIT_WORKER_VERSIONING"] != "true" || env["PAYKIT_WORKER_DEPLOYMENT"] != wantDeployment {
			fail("Deployment %s: PAYKIT_WORKER_VERSIONING=%q PAYKIT_WORKER_DEPLOYMENT=%q, want true and %q", d.Name, env["PAYKIT_WORKER_VERSIONING"], env["PAYKIT_WORKER_DEPLOYMENT"], wantDeployment)
		}
		if env["PAYKIT_TASK_QUEUE"] != queue {
			fail("Deployment %s: task queue %q, the API's is %q", d.Name, env["PAYKIT_TASK_QUEUE"], queue)
		}
		build := env["PAYKIT_WORKER_BUILD_ID"]
		if byBuild[build] != nil {
			fail("Deployments %s and %s both poll as build %q", byBuild[build].Name, d.Name, build)
		}
		byBuild[build] = d
	}
	for _, v := range w.Versions {
		d := byBuild[v.BuildID]
		if d == nil {
			fail("no worker Deployment polls as build %q", v.BuildID)
			continue
		}
		if !strings.HasSuffix(d.Name, "-worker-"+v.BuildID) {
			fail("Deployment %s polls as build %s, want it named <release>-worker-%s", d.Name, v.BuildID, v.BuildID)
		}
		if v.Tag != "" && !strings.HasSuffix(d.Spec.Template.Spec.Containers[0].Image, ":"+v.Tag) {
			fail("Deployment %s: image %s, want tag %s", d.Name, d.Spec.Template.Spec.Containers[0].Image, v.Tag)
		}
		want := v.Replicas
		if want == nil {
			want = w.Replicas
		}
		if want != nil && (d.Spec.Replicas == nil || *d.Spec.Replicas != *want) {
			fail("Deployment %s: replicas %v, want %d", d.Name, deref32(d.Spec.Replicas), *want)
		}
	}
	return append(errs, r.disjointWorkers(workers)...)
}

// disjointWorkers checks that no worker Deployment's selector takes another's pods (a
// rolling update of one would then scale the other's), and that each PodDisruptionBudget
// over workers covers one build's.
func (r rendered) disjointWorkers(workers []*appsv1.Deployment) []error {
	var errs []error
	for _, a := range workers {
		s, err := metav1.LabelSelectorAsSelector(a.Spec.Selector)
		if err != nil {
			errs = append(errs, fmt.Errorf("Deployment %s: selector: %v", a.Name, err))
			continue
		}
		for _, b := range workers {
			if a != b && s.Matches(labels.Set(b.Spec.Template.Labels)) {
				errs = append(errs, fmt.Errorf("Deployment %s's selector takes the pods of %s", a.Name, b.Name))
			}
		}
	}
	for _, o := range r.objects {
		pdb, ok := o.v.(*policyv1.PodDisruptionBudget)
		if !ok {
			continue
		}
		s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			continue
		}
		var over []string
		for _, d := range workers {
			if s.Matches(labels.Set(d.Spec.Template.Labels)) {
				over = append(over, d.Name)
			}
		}
		if len(over) > 1 {
			errs = append(errs, fmt.Errorf("PodDisruptionBudget %s covers the pods of %v, want one build's", pdb.Name, over))
		}
	}
	return errs
}

func deref32(p *int32) any {
	if p == nil {
		return "unset"
	}
	return *p
}

// rainbowErrors checks a rainbow deployment's three renders: before (the old build's
// workers), during (a new build added) and after (the old build dropped once drained).
// Adding a build adds one worker Deployment and changes nothing else that was there (so
// no old pod restarts); dropping one removes its Deployment and PodDisruptionBudget and
// changes nothing else.
func rainbowErrors(before, during, after rendered) []error {
	var errs []error
	added, removed, changed := diff(before, during)
	if len(added) != 2 || len(removed) != 0 || len(changed) != 0 {
		errs = append(errs, fmt.Errorf("a new build: added %v, removed %v, changed %v; want its Deployment and PodDisruptionBudget added and nothing else touched", added, removed, changed))
	}
	if nb, nd := len(before.deployments("worker")), len(during.deployments("worker")); nd != nb+1 {
		errs = append(errs, fmt.Errorf("a new build: %d worker Deployments, then %d; want one more", nb, nd))
	}
	added, removed, changed = diff(during, after)
	if len(added) != 0 || len(removed) != 2 || len(changed) != 0 {
		errs = append(errs, fmt.Errorf("a drained build dropped: added %v, removed %v, changed %v; want its Deployment and PodDisruptionBudget removed and nothing else touched", added, removed, changed))
	}
	return errs
}

// diff compares two renders by kind and name.
func diff(a, b rendered) (added, removed, changed []string) {
	index := func(r rendered) map[string]any {
		m := map[string]any{}
		for _, o := range r.objects {
			m[o.kind+"/"+o.name] = o.v
		}
		return m
	}
	ia, ib := index(a), index(b)
	for k, v := range ib {
		old, ok := ia[k]
		switch {
		case !ok:
			added = append(added, k)
		case !reflect.DeepEqual(old, v):
			changed = append(changed, k)
		}
	}
	for k := range ia {
		if _, ok := ib[k]; !ok {
			removed = append(removed, k)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	slices.Sort(changed)
	return added, removed, changed
}
