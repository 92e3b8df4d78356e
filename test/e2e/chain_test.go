package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// The real chain, as a platform engineer runs it: `helm install` of our chart,
// the README's label and patch commands on a Deployment shaped like Argo CD's
// repo-server, the Deployment and ReplicaSet controllers creating the pod, the
// webhook injecting it, and Argo CD's own repo-server (each pinned release)
// rendering Applications through the injected sidecars.

const (
	chainNS     = harness.ArgoNamespace
	repoServer  = harness.RepoServerName
	redisSecret = "chain-redis-password"
)

// patchDeployment patches the repo-server Deployment and returns its new
// generation.
func patchDeployment(t *testing.T, patch string, strategic bool) int64 {
	t.Helper()
	gen, err := env.cp.Client().PatchDeployment(chainNS, repoServer, []byte(patch), strategic)
	if err != nil {
		t.Fatal(err)
	}
	return gen
}

// waitRollout waits for the repo-server's newest ReplicaSet (of generation
// minGeneration or later) to have replicas pods, all stored injected.
func waitRollout(t *testing.T, minGeneration int64, replicas int) harness.Rollout {
	t.Helper()
	start := time.Now()
	r, err := env.cp.Client().WaitRollout(chainNS, repoServer, harness.RepoServerSelector, minGeneration, replicas, true, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ReplicaSet %s: %d injected pod(s) stored %s after the change", r.ReplicaSet.Name, replicas, time.Since(start).Round(time.Millisecond))
	return r
}

func TestRealChain(t *testing.T) {
	rels, err := harness.ArgoReleases()
	if err != nil {
		t.Fatal(err)
	}
	c := env.cp.Client()
	steps, err := harness.ReadReadme(env.repo)
	if err != nil {
		t.Fatal(err)
	}

	// 1. helm install, with the certificate from `cmp-injector certs` in a
	// Secret (there is no cert-manager here), as the chart README describes.
	t0 := time.Now()
	chart, err := env.cp.InstallChart(env.bins["cmp-injector"], filepath.Join(env.root, "hi"), env.logFile,
		"-f", filepath.Join("testdata", "chain", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = chart.Uninstall() }()
	t.Logf("helm install and the injector booted from its Deployment in %s:\n%s", time.Since(t0).Round(time.Millisecond), harness.FirstLines(chart.Output, 6))
	for _, p := range []string{
		"/api/v1/namespaces/" + harness.InjectorNamespace + "/serviceaccounts/" + harness.Release,
		"/api/v1/namespaces/" + harness.InjectorNamespace + "/configmaps/" + harness.Release + "-catalog",
		"/api/v1/namespaces/" + harness.InjectorNamespace + "/services/" + harness.Release,
		harness.DeploymentPath(harness.InjectorNamespace, harness.Release),
		harness.WebhookConfigurations + "/" + harness.Release,
	} {
		if err := c.Get(p, nil); err != nil {
			t.Errorf("helm install did not create %s: %v", p, err)
		}
	}

	// 2. Argo CD's side: Redis, the objects its repo-server reads, and the
	// repo-server Deployment without any of our labels.
	redis, err := harness.StartRedis(filepath.Join(env.root, "redis"), redisSecret, env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer redis.Stop()
	applyArgoCD(t, redis.Addr, rels[0])
	plain := waitPlainRollout(t)

	// 3. The README's label and patch commands.
	if err := c.MergePatch("/api/v1/namespaces/"+chainNS, steps.LabelPatch()); err != nil {
		t.Fatal(err)
	}
	// The apiserver learns of the webhook through an informer: wait until it
	// calls the injector before relying on it.
	waitActive(t, chainNS)
	gen := patchDeployment(t, string(steps.Patch), false)
	r := waitRollout(t, gen, 1)
	if r.ReplicaSet.Name == plain {
		t.Fatal("the README's patch did not start a new rollout")
	}
	readmePlugins := status(t, &r.Pods[0]).Plugins
	t.Logf("README patch: pod %s injected with %v", r.Pods[0].Name, readmePlugins)
	if len(readmePlugins) == 0 {
		t.Fatal("the README's patch injected no plugin")
	}

	t.Run("denied rollout is stuck with the injector's message", func(t *testing.T) {
		gen := patchDeployment(t, `{"spec":{"template":{"metadata":{"annotations":{
			"cmp-injector.io/plugins":"helm, no-such-plugin","image.cmp-injector.io/helm":"evil.example/helm:6.6.6"}}}}}`, false)
		var msg string
		err := harness.Eventually(60*time.Second, 200*time.Millisecond, func() (bool, error) {
			rs, dep, err := c.NewestReplicaSet(chainNS, repoServer, harness.RepoServerSelector)
			if err != nil {
				return false, err
			}
			if dep.Status.ObservedGeneration < gen {
				return false, fmt.Errorf("generation %d not observed", gen)
			}
			events, err := c.Events(chainNS, "ReplicaSet", rs.Name)
			if err != nil {
				return false, err
			}
			for _, e := range events {
				if e.Reason == "FailedCreate" {
					msg = e.Message
					return true, nil
				}
			}
			return false, fmt.Errorf("no FailedCreate event on ReplicaSet %s", rs.Name)
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("as expected, the ReplicaSet reports the denial (FailedCreate): %s", msg)
		for _, want := range []string{"no-such-plugin", "evil.example/helm:6.6.6", "inject.cmp-injector.io"} {
			if !strings.Contains(msg, want) {
				t.Errorf("FailedCreate message lacks %q: %s", want, msg)
			}
		}
		// The rollout cannot make progress: no pod of the new template exists.
		rs, dep, err := c.NewestReplicaSet(chainNS, repoServer, harness.RepoServerSelector)
		if err != nil {
			t.Fatal(err)
		}
		if pods, _ := c.ListPods(chainNS, "pod-template-hash="+rs.Labels["pod-template-hash"]); len(pods) != 0 || dep.Status.UpdatedReplicas != 0 {
			t.Errorf("denied ReplicaSet has %d pods, the Deployment %d updated replicas", len(pods), dep.Status.UpdatedReplicas)
		}
		// Fix the annotation the way a user would: the rollout goes back to
		// the README's template.
		patchDeployment(t, `{"spec":{"template":{"metadata":{"annotations":{"image.cmp-injector.io/helm":null}}}}}`, false)
		patchDeployment(t, string(steps.Patch), false)
	})

	// 4. Argo CD's own repo-server, each pinned release, in the booted pod of
	// a rollout that asks for every plugin the cases use.
	repoURL, commit, err := harness.GitRepo(filepath.Join(t.TempDir(), "git"),
		filepath.Join("testdata", "repo"), filepath.Join("testdata", "chain", "repo"))
	if err != nil {
		t.Fatal(err)
	}
	addArgoSidecar(t, rels[0].Image())
	gen = patchDeployment(t, `{"spec":{"template":{"metadata":{"annotations":{
		"cmp-injector.io/plugins":"helm, kustomize, params, broken"}}}}}`, false)
	argoRelease(t, 0, rels[0], gen, repoURL, commit)

	// The booted pod reported Ready, so the rollout finished: scaling now
	// creates pods of one ReplicaSet only.
	t.Run("three replicas injected identically", func(t *testing.T) {
		r := waitRollout(t, patchDeployment(t, `{"spec":{"replicas":3}}`, false), 3)
		first := r.Pods[0]
		for _, p := range r.Pods[1:] {
			if !reflect.DeepEqual(p.Spec, first.Spec) {
				t.Errorf("pod %s spec differs from %s", p.Name, first.Name)
			}
			if !reflect.DeepEqual(p.Annotations, first.Annotations) {
				t.Errorf("pod %s annotations differ from %s", p.Name, first.Name)
			}
		}
		st := status(t, &first)
		if strings.Join(st.Plugins, ",") != "helm,kustomize,params,broken" || st.Revision != "chain-1" {
			t.Errorf("status %+v", st)
		}
	})
	patchDeployment(t, `{"spec":{"replicas":1}}`, false)
	for i, rel := range rels[1:] {
		gen = patchDeployment(t, fmt.Sprintf(`{"spec":{"template":{"spec":{
			"initContainers":[{"name":"copyutil","image":%[1]q}],
			"containers":[{"name":%[2]q,"image":%[1]q},{"name":%[3]q,"image":%[1]q}]}}}}`,
			rel.Image(), repoServer, argoSidecar), true)
		argoRelease(t, i+1, rel, gen, repoURL, commit)
	}

	// 4b. argo-helm's repo-server, as chart 10.x renders it with the
	// podLabels/podAnnotations opt-in (the install-path golden input), created
	// by a Deployment of its own beside the plain one: Argo CD's repo-server of
	// the newest release renders every case through its injected sidecars.
	argoHelmRelease(t, rels[0], repoURL, commit)

	// 5. helm upgrade with a changed catalog: the running injector serves it
	// once the kubelet (here: the boot) re-projects the ConfigMap.
	t.Run("helm upgrade changes the catalog", func(t *testing.T) {
		if err := chart.Upgrade("--set", "catalog.revision=chain-2"); err != nil {
			t.Fatal(err)
		}
		pod := loadPod(t, "repo-server-pod.yaml")
		err := harness.Eventually(60*time.Second, 100*time.Millisecond, func() (bool, error) {
			got, err := c.CreatePod(chainNS, pod.DeepCopy(), true)
			if err != nil {
				return false, err
			}
			st := status(t, got)
			return st.Revision == "chain-2", fmt.Errorf("status revision %q", st.Revision)
		})
		if err != nil {
			t.Fatal(err)
		}
		// The chart's reconciler, with the chart's RBAC and nothing more (the
		// booted injector holds its service account's token), brings the
		// running repo-server pod to the new revision.
		err = harness.Eventually(60*time.Second, 100*time.Millisecond, func() (bool, error) {
			pods, err := c.ListPods(chainNS, harness.RepoServerSelector)
			if err != nil || len(pods) == 0 {
				return false, fmt.Errorf("%d pods: %w", len(pods), err)
			}
			for _, p := range pods {
				if st := status(t, &p); st.Revision != "chain-2" {
					return false, fmt.Errorf("pod %s at revision %q", p.Name, st.Revision)
				}
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("%v\n%s", err, chart.Injector.Output())
		}
	})

	// 6. helm uninstall leaves no webhook configuration behind: a leftover one
	// with failurePolicy Fail would block every labelled pod.
	t.Run("helm uninstall removes the webhook", func(t *testing.T) {
		if err := chart.Uninstall(); err != nil {
			t.Fatal(err)
		}
		err := c.Get(harness.WebhookConfigurations+"/"+harness.Release, nil)
		var apiErr *harness.APIError
		if err == nil || !errors.As(err, &apiErr) || apiErr.Code != http.StatusNotFound {
			t.Errorf("MutatingWebhookConfiguration %s after uninstall: %v", harness.Release, err)
		}
		// With the injector gone and no configuration left, labelled pods are
		// admitted as they are.
		pod := loadPod(t, "repo-server-pod.yaml")
		if _, err := c.CreatePod(chainNS, pod, true); err != nil {
			t.Errorf("a labelled pod is blocked after uninstall: %v", err)
		}
	})
}

// applyArgoCD creates Argo CD's namespace, the objects its repo-server reads
// (with Redis at redisAddr) and the repo-server Deployment running image,
// without any of our labels.
func applyArgoCD(t *testing.T, redisAddr string, rel harness.ArgoRelease) {
	t.Helper()
	c := env.cp.Client()
	if err := c.CreateNamespace(chainNS, nil); err != nil {
		t.Fatal(err)
	}
	applyArgoConfig(t, chainNS, redisAddr)
	if err := c.ApplyFile(chainNS, filepath.Join("testdata", "chain", "argocd-repo-server.yaml"), rel.RepoServerSubst()); err != nil {
		t.Fatal(err)
	}
}

// applyArgoConfig applies the objects Argo CD's repo-server reads
// (argocd-cm, argocd-cmd-params-cm, the Redis Secret...) into ns, pointing at
// the Redis at redisAddr.
func applyArgoConfig(t *testing.T, ns, redisAddr string) {
	t.Helper()
	if err := env.cp.Client().ApplyFile(ns, filepath.Join("testdata", "chain", "argocd-config.yaml"),
		map[string]string{"REDIS_ADDRESS": redisAddr, "REDIS_PASSWORD": redisSecret}); err != nil {
		t.Fatal(err)
	}
}

// argoConfig starts a Redis for the test (stopped when it ends, its data
// under env.root/name) and applies Argo CD's objects into ns for it.
func argoConfig(t *testing.T, ns, name string) {
	t.Helper()
	redis, err := harness.StartRedis(filepath.Join(env.root, name), redisSecret, env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = redis.Stop() })
	applyArgoConfig(t, ns, redis.Addr)
}

// repoServerPod is a pod of the chain's Argo CD repo-server Deployment
// template (testdata/chain) running image, opted in and asking for plugins.
func repoServerPod(t *testing.T, name, image, plugins string) *corev1.Pod {
	t.Helper()
	pod := templatePod(t, filepath.Join("testdata", "chain", "argocd-repo-server.yaml"))
	pod.Name = name
	pod.Labels[keys.InjectLabel] = keys.EnabledValue
	pod.Annotations = map[string]string{keys.PluginsAnnotation: plugins}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if cs[i].Image == harness.ArgoImage+":latest" {
				cs[i].Image = image
			}
		}
	}
	return pod
}

// argoSidecar is a CMP sidecar made by hand the way Argo CD documents it (and
// the way cmp-injector replaces): Argo CD's own argocd-cmp-server, copied into
// var-files by copyutil, serving the params test plugin under another name.
const argoSidecar = "argo-params"

// addArgoSidecar adds argoSidecar to the repo-server Deployment, with the
// params plugin.yaml of the chart values (renamed) in a ConfigMap, so the same
// requests reach Argo CD's plugin server and ours through Argo CD's repo-server.
func addArgoSidecar(t *testing.T, image string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "chain", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Catalog struct {
			Plugins map[string]struct {
				Config struct {
					Inline map[string]any `json:"inline"`
				} `json:"config"`
			} `json:"plugins"`
		} `json:"catalog"`
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	cfg := values.Catalog.Plugins["params"].Config.Inline
	cfg["metadata"] = map[string]any{"name": argoSidecar}
	pluginYAML, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := env.cp.Client()
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": argoSidecar + "-plugin"}, "data": map[string]string{"plugin.yaml": string(pluginYAML)}}
	if err := c.Apply("/api/v1/namespaces/"+chainNS+"/configmaps", argoSidecar+"-plugin", cm); err != nil {
		t.Fatal(err)
	}
	patchDeployment(t, argoSidecarPatch(image), true)
}

// argoSidecarPatch is the strategic merge patch that adds argoSidecar (running
// image's argocd-cmp-server) to a repo-server Deployment shaped like Argo CD's.
func argoSidecarPatch(image string) string {
	return fmt.Sprintf(`{"spec":{"template":{"spec":{
		"containers":[{"name":%[1]q,"image":%[2]q,"command":["/var/run/argocd/argocd-cmp-server"],
			"securityContext":{"runAsNonRoot":true,"runAsUser":999,"readOnlyRootFilesystem":true,"allowPrivilegeEscalation":false,
				"capabilities":{"drop":["ALL"]},"seccompProfile":{"type":"RuntimeDefault"}},
			"volumeMounts":[{"name":"var-files","mountPath":"/var/run/argocd"},
				{"name":"plugins","mountPath":"/home/argocd/cmp-server/plugins"},
				{"name":%[1]q,"mountPath":"/home/argocd/cmp-server/config/plugin.yaml","subPath":"plugin.yaml"},
				{"name":"%[1]s-tmp","mountPath":"/tmp"}]}],
		"volumes":[{"name":%[1]q,"configMap":{"name":"%[1]s-plugin"}},{"name":"%[1]s-tmp","emptyDir":{}}]}}}}`,
		argoSidecar, image)
}

// argoRelease boots the newest rollout's pod (generation gen) with Argo CD
// release rel's repo-server and runs the Argo CD cases through it; the pod is
// then reported Ready, as the kubelet would once its probes pass.
func argoRelease(t *testing.T, i int, rel harness.ArgoRelease, gen int64, repoURL, commit string) {
	t.Run("Argo CD "+rel.Version, func(t *testing.T) {
		r := waitRollout(t, gen, 1)
		pod := &r.Pods[0]
		if got := pod.Spec.Containers[0].Image; got != rel.Image() {
			t.Fatalf("pod runs %s, want %s", got, rel.Image())
		}
		bootAndRunArgoCases(t, pod, rel, "a"+strconv.Itoa(i), repoURL, commit)
	})
}

// bootAndRunArgoCases boots pod (a stored, injected repo-server pod) with
// release rel's repo-server under env.root/dir, reports it Ready, as the
// kubelet would once its probes pass, and runs the Argo CD cases through it.
func bootAndRunArgoCases(t *testing.T, pod *corev1.Pod, rel harness.ArgoRelease, dir, repoURL, commit string) {
	t.Helper()
	c := env.cp.Client()
	start := time.Now()
	rs, err := harness.BootRepoServer(c, pod, rel, env.bins["cmp-server"], filepath.Join(env.root, dir), env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Stop()
	t.Logf("pod %s booted (copyutil, copy, %d containers running, repo-server healthy) in %s",
		pod.Name, len(rs.Pod.Processes()), time.Since(start).Round(time.Millisecond))
	if err := c.ReportReady(chainNS, pod.Name); err != nil {
		t.Fatal(err)
	}
	argoCases(t, rs, rel, repoURL, commit)
}

// waitPlainRollout waits for the first pod of the unlabelled Deployment:
// stored as Argo CD's manifest made it, not injected.
func waitPlainRollout(t *testing.T) string {
	t.Helper()
	r, err := env.cp.Client().WaitRollout(chainNS, repoServer, harness.RepoServerSelector, 0, 1, false, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return r.ReplicaSet.Name
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// sortedManifests canonicalises manifests (JSON documents) for comparison:
// each re-encoded with sorted keys, the list in order.
func sortedManifests(t *testing.T, ms []string) []string {
	t.Helper()
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		var v any
		if err := json.Unmarshal([]byte(m), &v); err != nil {
			t.Fatalf("manifest is not JSON: %v\n%s", err, m)
		}
		out = append(out, string(mustJSON(v)))
	}
	sort.Strings(out)
	return out
}

// argoHelmName is the argo-helm-shaped Deployment of the chain. Its selector
// and pod labels name it apart from the plain repo-server's, because two
// Deployments whose selectors overlap fight over each other's pods; the
// injector recognises a repo-server by its container, not by these labels.
const argoHelmName = "argo-helm-repo-server"

// argoHelmRelease creates the argo-helm repo-server Deployment (the golden
// input, images of rel, every plugin the cases use, the hand-made Argo CD
// sidecar the parity case compares with), boots its injected pod and runs
// the Argo CD cases through it; the Deployment is deleted afterwards so the
// later steps see the plain repo-server alone.
func argoHelmRelease(t *testing.T, rel harness.ArgoRelease, repoURL, commit string) {
	t.Run("argo-helm repo-server, Argo CD "+rel.Version, func(t *testing.T) {
		c := env.cp.Client()
		b, err := os.ReadFile(filepath.Join(goldenInputs, "argo-helm-repo-server.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		// The chart pins another Argo CD release; the booted binaries are rel's.
		b = []byte(strings.ReplaceAll(string(b), "quay.io/argoproj/argocd:v3.4.4", rel.Image()))
		var dep map[string]any
		if err := yaml.Unmarshal(b, &dep); err != nil {
			t.Fatal(err)
		}
		setPath(t, dep, argoHelmName, "metadata", "name")
		setPath(t, dep, argoHelmName, "spec", "selector", "matchLabels", "app.kubernetes.io/name")
		setPath(t, dep, argoHelmName, "spec", "template", "metadata", "labels", "app.kubernetes.io/name")
		// Quoted, as repoServer.podAnnotations renders a string.
		setPath(t, dep, "helm, kustomize, params, broken", "spec", "template", "metadata", "annotations", "cmp-injector.io/plugins")
		restoreArgoHelmRender(t, dep)
		createServiceAccountOf(t, chainNS, "argo-helm-repo-server.yaml")
		if err := c.Apply("/apis/apps/v1/namespaces/"+chainNS+"/deployments", argoHelmName, dep); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete("/apis/apps/v1/namespaces/" + chainNS + "/deployments/" + argoHelmName) })
		gen, err := c.PatchDeployment(chainNS, argoHelmName, []byte(argoSidecarPatch(rel.Image())), true)
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.WaitRollout(chainNS, argoHelmName, "app.kubernetes.io/name="+argoHelmName, gen, 1, true, 90*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		bootAndRunArgoCases(t, &r.Pods[0], rel, "argo-helm", repoURL, commit)
	})
}

// setPath sets obj's nested field, creating the maps on the way.
func setPath(t *testing.T, obj map[string]any, value any, path ...string) {
	t.Helper()
	if err := unstructured.SetNestedField(obj, value, path...); err != nil {
		t.Fatal(err)
	}
}

// restoreArgoHelmRender adds back what chart 10.x renders on the repo-server
// that the golden input leaves out (injection neither reads nor changes it,
// so the goldens stay small): Argo CD's repo-server exits at start without its
// GnuPG keyring directory, and reaches Redis by the address in
// argocd-cmd-params-cm. Names, keys and paths are the chart's
// (templates/argocd-repo-server/deployment.yaml).
func restoreArgoHelmRender(t *testing.T, dep map[string]any) {
	t.Helper()
	spec := dep["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	mounts := []any{
		map[string]any{"name": "tls-certs", "mountPath": "/app/config/tls"},
		map[string]any{"name": "gpg-keys", "mountPath": "/app/config/gpg/source"},
		map[string]any{"name": "gpg-keyring", "mountPath": "/app/config/gpg/keys"},
		map[string]any{"name": "argocd-repo-server-tls", "mountPath": "/app/config/reposerver/tls"},
	}
	for _, c := range spec["containers"].([]any) {
		c := c.(map[string]any)
		if c["name"] == "repo-server" {
			c["volumeMounts"] = append(c["volumeMounts"].([]any), mounts...)
			// As on the plain repo-server of the chain: Argo CD's documented
			// switch for clusters that do not verify commit signatures (the
			// image's GnuPG is not on a test machine).
			c["env"] = append(c["env"].([]any),
				map[string]any{"name": "ARGOCD_GPG_ENABLED", "value": "false"},
				map[string]any{"name": "REDIS_SERVER", "valueFrom": map[string]any{"configMapKeyRef": map[string]any{
					"name": "argocd-cmd-params-cm", "key": "redis.server", "optional": true}}},
				map[string]any{"name": "REDIS_PASSWORD", "valueFrom": map[string]any{"secretKeyRef": map[string]any{
					"name": "argocd-redis", "key": "auth", "optional": true}}})
		}
	}
	spec["volumes"] = append(spec["volumes"].([]any),
		map[string]any{"name": "tls-certs", "configMap": map[string]any{"name": "argocd-tls-certs-cm"}},
		map[string]any{"name": "gpg-keys", "configMap": map[string]any{"name": "argocd-gpg-keys-cm"}},
		map[string]any{"name": "gpg-keyring", "emptyDir": map[string]any{}},
		map[string]any{"name": "argocd-repo-server-tls", "secret": map[string]any{"secretName": "argocd-repo-server-tls", "optional": true}},
	)
}
