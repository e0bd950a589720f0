package main

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// paykitDeployment is a Deployment of the chart's shape running cmd, its pods labelled
// with build (none if empty), with env on its container.
func paykitDeployment(name, cmd, build, image string, env map[string]string) object {
	l := map[string]string{"app.kubernetes.io/name": "paykit", "app.kubernetes.io/instance": "paykit", "app.kubernetes.io/component": cmd}
	if build != "" {
		l["paykit.dev/worker-build-id"] = build
	}
	c := corev1.Container{Name: cmd, Image: image, Args: []string{cmd}}
	for k, v := range env {
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: v})
	}
	two := int32(2)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.DeploymentSpec{
		Replicas: &two, Selector: &metav1.LabelSelector{MatchLabels: l},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l}, Spec: corev1.PodSpec{Containers: []corev1.Container{c}}},
	}}
	return object{kind: "Deployment", name: name, v: d}
}

func pdbOver(name string, l map[string]string) object {
	return object{kind: "PodDisruptionBudget", name: name, v: &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: l}}}}
}

func versioned(build string) map[string]string {
	return map[string]string{"PAYKIT_TASK_QUEUE": "payments", "PAYKIT_WORKER_VERSIONING": "true", "PAYKIT_WORKER_DEPLOYMENT": "paykit-payments", "PAYKIT_WORKER_BUILD_ID": build}
}

func rainbowIntent(builds ...string) intent {
	var in intent
	in.Worker.Versioning.Enabled = true
	for _, b := range builds {
		in.Worker.Versions = append(in.Worker.Versions, struct {
			BuildID  string `json:"buildId"`
			Tag      string `json:"tag"`
			Replicas *int32 `json:"replicas"`
		}{BuildID: b, Tag: "t-" + b})
	}
	return in
}

func TestWorkerErrors(t *testing.T) {
	api := paykitDeployment("paykit-api", "api", "", "paykit:t", map[string]string{"PAYKIT_TASK_QUEUE": "payments"})
	worker := func(build string, env map[string]string) object {
		return paykitDeployment("paykit-worker-"+build, "worker", build, "paykit:t-"+build, env)
	}
	a, b := worker("a", versioned("a")), worker("b", versioned("b"))
	pdbA := pdbOver("paykit-worker-a", a.v.(*appsv1.Deployment).Spec.Selector.MatchLabels)
	pdbB := pdbOver("paykit-worker-b", b.v.(*appsv1.Deployment).Spec.Selector.MatchLabels)
	unversioned := paykitDeployment("paykit-worker", "worker", "", "paykit:t", map[string]string{"PAYKIT_TASK_QUEUE": "payments"})
	otherQueue := versioned("b")
	otherQueue["PAYKIT_TASK_QUEUE"] = "other"
	otherDeployment := versioned("b")
	otherDeployment["PAYKIT_WORKER_DEPLOYMENT"] = "paykit-other"
	for name, tc := range map[string]struct {
		objects []object
		in      intent
		wantErr string
	}{
		"versioning off, as before":         {[]object{api, unversioned}, intent{}, ""},
		"versioning off, a versioned one":   {[]object{api, a}, intent{}, "want <release>-worker"},
		"versioning off, two workers":       {[]object{api, unversioned, a}, intent{}, "2 worker Deployments, want one"},
		"two builds":                        {[]object{api, a, b, pdbA, pdbB}, rainbowIntent("a", "b"), ""},
		"a build missing":                   {[]object{api, a, pdbA}, rainbowIntent("a", "b"), `no worker Deployment polls as build "b"`},
		"two APIs":                          {[]object{api, paykitDeployment("paykit-api-b", "api", "", "paykit:t", nil), a, pdbA}, rainbowIntent("a"), "2 API Deployments"},
		"another task queue":                {[]object{api, a, worker("b", otherQueue)}, rainbowIntent("a", "b"), `task queue "other"`},
		"another Worker Deployment":         {[]object{api, a, worker("b", otherDeployment)}, rainbowIntent("a", "b"), `PAYKIT_WORKER_DEPLOYMENT="paykit-other"`},
		"one build id twice":                {[]object{api, a, paykitDeployment("paykit-worker-b", "worker", "b", "paykit:t-b", versioned("a"))}, rainbowIntent("a", "b"), `both poll as build "a"`},
		"a selector over both":              {[]object{api, a, paykitDeployment("paykit-worker-b", "worker", "", "paykit:t-b", versioned("b"))}, rainbowIntent("a", "b"), "selector takes the pods of paykit-worker-a"},
		"a disruption budget over both":     {[]object{api, a, b, pdbOver("paykit-worker", map[string]string{"app.kubernetes.io/component": "worker"})}, rainbowIntent("a", "b"), "covers the pods of"},
		"another build's image":             {[]object{api, a, paykitDeployment("paykit-worker-b", "worker", "b", "paykit:t-a", versioned("b"))}, rainbowIntent("a", "b"), "want tag t-b"},
		"the API versioned":                 {[]object{paykitDeployment("paykit-api", "api", "", "paykit:t", versioned("a")), a}, rainbowIntent("a"), "the API sets PAYKIT_WORKER"},
		"versioning on, an unversioned one": {[]object{api, unversioned}, rainbowIntent("a"), "PAYKIT_WORKER_VERSIONING=\"\""},
	} {
		var got []string
		for _, e := range (rendered{objects: tc.objects}).workerErrors(tc.in) {
			got = append(got, e.Error())
		}
		joined := strings.Join(got, "; ")
		switch {
		case tc.wantErr == "" && joined != "":
			t.Errorf("%s: %s", name, joined)
		case !strings.Contains(joined, tc.wantErr):
			t.Errorf("%s: got %q, want an error containing %q", name, joined, tc.wantErr)
		}
	}
}

func TestRainbowErrors(t *testing.T) {
	api := paykitDeployment("paykit-api", "api", "", "paykit:t", nil)
	a := paykitDeployment("paykit-worker-a", "worker", "a", "paykit:a", versioned("a"))
	b := paykitDeployment("paykit-worker-b", "worker", "b", "paykit:b", versioned("b"))
	pdbA := pdbOver("paykit-worker-a", a.v.(*appsv1.Deployment).Spec.Selector.MatchLabels)
	pdbB := pdbOver("paykit-worker-b", b.v.(*appsv1.Deployment).Spec.Selector.MatchLabels)
	aChanged := paykitDeployment("paykit-worker-a", "worker", "a", "paykit:b", versioned("a"))
	r := func(objs ...object) rendered { return rendered{objects: objs} }
	for name, tc := range map[string]struct {
		before, during, after rendered
		wantErr               string
	}{
		"added beside, then dropped":  {r(api, a, pdbA), r(api, a, pdbA, b, pdbB), r(api, b, pdbB), ""},
		"replaced in place":           {r(api, a, pdbA), r(api, aChanged, pdbA, b, pdbB), r(api, b, pdbB), "changed [Deployment/paykit-worker-a]"},
		"the old one dropped at once": {r(api, a, pdbA), r(api, b, pdbB), r(api, b, pdbB), "a new build: added"},
		"nothing dropped":             {r(api, a, pdbA), r(api, a, pdbA, b, pdbB), r(api, a, pdbA, b, pdbB), "a drained build dropped"},
	} {
		var got []string
		for _, e := range rainbowErrors(tc.before, tc.during, tc.after) {
			got = append(got, e.Error())
		}
		joined := strings.Join(got, "; ")
		switch {
		case tc.wantErr == "" && joined != "":
			t.Errorf("%s: %s", name, joined)
		case !strings.Contains(joined, tc.wantErr):
			t.Errorf("%s: got %q, want an error containing %q", name, joined, tc.wantErr)
		}
	}
}
