package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// goldenInputs are the install-path fixtures the injector's golden tests also
// drive (injector/testdata/golden): one file, so the workloads proven here and
// the goldens cannot drift apart.
const goldenInputs = "../../injector/testdata/golden"

// workloadCollections maps a fixture's kind to its API collection.
var workloadCollections = map[string]string{
	"Deployment":  "/apis/apps/v1/namespaces/%s/deployments",
	"StatefulSet": "/apis/apps/v1/namespaces/%s/statefulsets",
	"Job":         "/apis/batch/v1/namespaces/%s/jobs",
}

// TestInstallPathWorkloads applies Argo CD's workloads as argo-helm 10.x
// renders them with the opt-in in global.podLabels and global.podAnnotations
// (every workload labelled), and the operator's repo-server Deployment, through
// the real Deployment, StatefulSet and Job controllers: every workload's pod
// is admitted, and only the repo-servers' are injected.
func TestInstallPathWorkloads(t *testing.T) {
	startInjector(t, catalogFor(t, true, map[string][]string{"*": {"helm"}}))
	ns := newNamespace(t, "paths", enabledNS)
	waitActive(t, ns)
	admin := env.cp.Client()

	cases := []struct {
		file     string
		injected bool
	}{
		{"argo-helm-repo-server.yaml", true},
		{"operator-repo-server.yaml", true},
		{"argo-helm-global-server.yaml", false},
		{"argo-helm-global-redis.yaml", false},
		{"argo-helm-global-controller.yaml", false},
		{"argo-helm-global-redis-secret-init.yaml", false},
	}
	names := map[string]string{}
	for _, c := range cases {
		b, err := os.ReadFile(filepath.Join(goldenInputs, c.file))
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(b, &obj); err != nil {
			t.Fatal(err)
		}
		meta := obj["metadata"].(map[string]any)
		meta["namespace"] = ns
		createServiceAccountOf(t, ns, c.file)
		kind := obj["kind"].(string)
		coll, ok := workloadCollections[kind]
		if !ok {
			t.Fatalf("%s: no collection for kind %s", c.file, kind)
		}
		if err := admin.Do(http.MethodPost, fmt.Sprintf(coll, ns), nil, obj, nil); err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		tmpl := obj["spec"].(map[string]any)["template"].(map[string]any)
		names[c.file] = tmpl["metadata"].(map[string]any)["labels"].(map[string]any)["app.kubernetes.io/name"].(string)
	}
	for _, c := range cases {
		t.Run(strings.TrimSuffix(c.file, ".yaml"), func(t *testing.T) {
			selector := "app.kubernetes.io/name=" + names[c.file]
			var pods int
			err := harness.Eventually(60*time.Second, 200*time.Millisecond, func() (bool, error) {
				got, err := admin.ListPods(ns, selector)
				if err != nil {
					return false, err
				}
				pods = len(got)
				if pods == 0 {
					return false, errors.New("no pod yet")
				}
				for _, p := range got {
					_, injected := p.Annotations[keys.StatusAnnotation]
					if injected != c.injected {
						return true, fmt.Errorf("pod %s: injected %t, want %t", p.Name, injected, c.injected)
					}
					if !c.injected && len(p.Spec.InitContainers) != 0 {
						return true, fmt.Errorf("pod %s was changed: init containers %v", p.Name, p.Spec.InitContainers)
					}
				}
				return true, nil
			})
			if err != nil {
				// FailedCreate events of the ReplicaSet, StatefulSet or Job
				// carry a denial.
				var events corev1.EventList
				_ = admin.Get("/api/v1/namespaces/"+ns+"/events", &events)
				for _, e := range events.Items {
					if e.Type == "Warning" {
						t.Logf("event %s/%s: %s %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
					}
				}
				t.Fatal(err)
			}
			t.Logf("%d pod(s) of %s admitted, injected: %t", pods, names[c.file], c.injected)
		})
	}
}

// TestOpenShiftAssignedUIDs: with the catalog's runAsUserPolicy Assigned, a
// pod whose containers carry an SCC-style preassigned UID gets sidecars and a
// copy container running as that UID, and a pod that sets none gets injected
// containers that set none either, as the real API server stores them.
func TestOpenShiftAssignedUIDs(t *testing.T) {
	// The catalog the README's OpenShift install renders, in the namespace it
	// enables.
	repo := harness.MustRepoRoot(t)
	b, err := harness.RenderCatalog(filepath.Join(repo, "charts", "cmp-injector"), kubeVersion(),
		"-f", filepath.Join(repo, "deploy", "openshift", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	startInjector(t, b)
	ns := "openshift-gitops"
	if err := env.cp.Client().CreateNamespace(ns, enabledNS); err != nil {
		t.Fatal(err)
	}
	waitActive(t, ns)
	admin := env.cp.Client()

	preassigned := int64(1000680000)
	for _, tc := range []struct {
		name string
		uid  *int64
		want string
	}{
		{"preassigned", &preassigned, "1000680000"},
		{"none-set", nil, "unset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := loadPod(t, "repo-server-pod.yaml")
			pod.Name = "scc-" + tc.name
			for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
				for i := range list {
					list[i].SecurityContext.RunAsUser = tc.uid
				}
			}
			stored, err := admin.CreatePod(ns, pod, false)
			if err != nil {
				t.Fatal(err)
			}
			st := status(t, stored)
			owned := map[string]bool{}
			for _, n := range append(st.InitContainers, st.Containers...) {
				owned[n] = true
			}
			for _, c := range append(stored.Spec.InitContainers, stored.Spec.Containers...) {
				if !owned[c.Name] {
					continue
				}
				got := "unset"
				if c.SecurityContext.RunAsUser != nil {
					got = fmt.Sprint(*c.SecurityContext.RunAsUser)
				}
				if got != tc.want || c.SecurityContext.RunAsNonRoot == nil || !*c.SecurityContext.RunAsNonRoot {
					t.Errorf("%s: runAsUser %s, runAsNonRoot %v; want %s and true", c.Name, got, c.SecurityContext.RunAsNonRoot, tc.want)
				}
			}
		})
	}
}

// TestInstallPathPodsBoot boots the injected containers of the argo-helm and
// operator repo-server pods (the golden inputs' templates, as their
// ReplicaSets create them): the helm sidecar runs its image's cmp-server (the
// library entry's serverPath: no copy container), listens on the chart's
// plugins volume and generates a chart's manifests.
func TestInstallPathPodsBoot(t *testing.T) {
	startInjector(t, catalogFor(t, true, map[string][]string{"*": {"helm"}}))
	ns := newNamespace(t, "pathboot", enabledNS)
	waitActive(t, ns)
	for i, file := range []string{"argo-helm-repo-server.yaml", "operator-repo-server.yaml"} {
		t.Run(strings.TrimSuffix(file, ".yaml"), func(t *testing.T) {
			pod := goldenPod(t, file)
			pod.Name = fmt.Sprintf("path-%d", i)
			createServiceAccountOf(t, ns, file)
			stored := createStored(t, ns, pod)
			booted, sockets, err := harness.BootInjectedPod(stored, env.bins["cmp-server"], filepath.Join(env.root, fmt.Sprintf("pb%d", i)), env.logFile)
			if err != nil {
				t.Fatal(err)
			}
			defer booted.Stop()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cl, err := client.Dial(ctx, filepath.Join(sockets, "helm.sock"))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			reqEnv, err := harness.GuestbookApp(kubeVersion(), nil).Environ()
			if err != nil {
				t.Fatal(err)
			}
			manifests, err := cl.Generate(ctx, client.Request{RepoRoot: filepath.Join("testdata", "repo"), AppRelPath: "apps/guestbook", Env: reqEnv})
			if err != nil {
				t.Fatal(err)
			}
			if all := strings.Join(manifests, "\n"); !strings.Contains(all, `"name":"guestbook-guestbook"`) {
				t.Errorf("manifests:\n%s", all)
			}
			t.Logf("%s: the injected helm sidecar generated %d manifests", file, len(manifests))
		})
	}
}

// goldenPod is the pod a golden input workload's controller would create from
// its template, without the template's ConfigMap volumes and their mounts:
// those are Argo CD's own (ssh known hosts), which neither the pod boot nor
// the test namespaces hold, and injection does not touch them.
func goldenPod(t *testing.T, file string) *corev1.Pod {
	t.Helper()
	pod := templatePod(t, filepath.Join(goldenInputs, file))
	dropped := map[string]bool{}
	var vols []corev1.Volume
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil {
			dropped[v.Name] = true
			continue
		}
		vols = append(vols, v)
	}
	pod.Spec.Volumes = vols
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for j := range list {
			var mounts []corev1.VolumeMount
			for _, m := range list[j].VolumeMounts {
				if !dropped[m.Name] {
					mounts = append(mounts, m)
				}
			}
			list[j].VolumeMounts = mounts
		}
	}
	return pod
}

// templatePod is the pod a workload file's template (a Deployment's, or any
// object with spec.template) describes.
func templatePod(t *testing.T, file string) *corev1.Pod {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var w struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &w); err != nil {
		t.Fatal(err)
	}
	return &corev1.Pod{ObjectMeta: w.Spec.Template.ObjectMeta, Spec: w.Spec.Template.Spec}
}
