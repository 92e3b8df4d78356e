package e2e

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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
	chainNS      = "argocd"
	injectorNS   = "cmp-injector"
	release      = "cmp-injector"
	repoServer   = "argocd-repo-server"
	repoSelector = "app.kubernetes.io/name=argocd-repo-server"
	redisSecret  = "chain-redis-password"
)

var deploymentPath = "/apis/apps/v1/namespaces/" + chainNS + "/deployments/" + repoServer

// readmeSteps are the commands of the README's "Quick start on a real cluster"
// that the chain runs: read from README.md so the docs cannot drift.
type readmeSteps struct {
	labelKey, labelValue string
	patch                []byte
}

func readReadme(t *testing.T) readmeSteps {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var steps readmeSteps
	for _, cmd := range shellCommands(string(b)) {
		switch {
		case len(cmd) == 5 && cmd[0] == "kubectl" && cmd[1] == "label" && cmd[2] == "namespace" && cmd[3] == chainNS:
			steps.labelKey, steps.labelValue, _ = strings.Cut(cmd[4], "=")
		case len(cmd) >= 9 && cmd[0] == "kubectl" && strings.Join(cmd[1:5], " ") == "-n "+chainNS+" patch deployment" && cmd[5] == repoServer:
			if strings.Join(cmd[6:8], " ") != "--type merge" || cmd[8] != "-p" || len(cmd) != 10 {
				t.Fatalf("README's patch command changed shape: %q", cmd)
			}
			steps.patch = []byte(cmd[9])
		}
	}
	if steps.labelKey == "" || steps.patch == nil {
		t.Fatal("README.md has no `kubectl label namespace argocd ...` and `kubectl -n argocd patch deployment argocd-repo-server --type merge -p '...'` commands")
	}
	if !json.Valid(steps.patch) {
		t.Fatalf("README's patch is not JSON: %s", steps.patch)
	}
	return steps
}

// shellCommands splits the sh code blocks of a Markdown text into commands
// (continuation lines joined, comments dropped) and words (single and double
// quotes as sh reads them, without expansions).
func shellCommands(md string) [][]string {
	var cmds [][]string
	in := false
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(md))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			in = strings.TrimPrefix(line, "```") == "sh"
			continue
		}
		if !in {
			continue
		}
		if i := strings.Index(line, " #"); i >= 0 && !strings.ContainsAny(line[:i], `'"`) {
			line = line[:i]
		}
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			cur.WriteString(strings.TrimSuffix(line, `\`))
			continue
		}
		cur.WriteString(line)
		if words := splitWords(cur.String()); len(words) > 0 {
			cmds = append(cmds, words)
		}
		cur.Reset()
	}
	return cmds
}

func splitWords(s string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				j = len(s) - i - 1
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case ch == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				j = len(s) - i - 1
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case ch == ' ' || ch == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// applyFile creates every object of a multi-document YAML file in ns, after
// replacing each key of subst by its value.
func applyFile(t *testing.T, ns, path string, subst map[string]string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for k, v := range subst {
		s = strings.ReplaceAll(s, k, v)
	}
	c := env.cp.Client()
	for _, doc := range strings.Split(s, "\n---\n") {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		meta, _ := obj["metadata"].(map[string]any)
		if meta == nil {
			continue
		}
		name, _ := meta["name"].(string)
		coll := map[string]string{
			"ConfigMap":  "/api/v1/namespaces/" + ns + "/configmaps",
			"Secret":     "/api/v1/namespaces/" + ns + "/secrets",
			"Deployment": "/apis/apps/v1/namespaces/" + ns + "/deployments",
		}[obj["kind"].(string)]
		if coll == "" {
			t.Fatalf("%s: kind %v is not handled here", path, obj["kind"])
		}
		if err := c.Apply(coll, name, obj); err != nil {
			t.Fatalf("apply %s %s: %v", obj["kind"], name, err)
		}
	}
}

// rollout is the state of the repo-server Deployment's newest ReplicaSet.
type rollout struct {
	rs   appsv1.ReplicaSet
	pods []corev1.Pod
}

// newestReplicaSet is the Deployment's ReplicaSet of its current revision.
func newestReplicaSet(c *harness.Client) (*appsv1.ReplicaSet, *appsv1.Deployment, error) {
	var dep appsv1.Deployment
	if err := c.Get(deploymentPath, &dep); err != nil {
		return nil, nil, err
	}
	var list appsv1.ReplicaSetList
	q := map[string][]string{"labelSelector": {repoSelector}}
	if err := c.Do(http.MethodGet, "/apis/apps/v1/namespaces/"+chainNS+"/replicasets", q, nil, &list); err != nil {
		return nil, nil, err
	}
	rev := dep.Annotations["deployment.kubernetes.io/revision"]
	for i := range list.Items {
		if rev != "" && list.Items[i].Annotations["deployment.kubernetes.io/revision"] == rev {
			return &list.Items[i], &dep, nil
		}
	}
	return nil, &dep, fmt.Errorf("no ReplicaSet of revision %q yet", rev)
}

// waitRollout waits until the newest ReplicaSet (one created after the
// Deployment's generation reached minGeneration) has replicas stored pods, all
// injected.
func waitRollout(t *testing.T, minGeneration int64, replicas int) rollout {
	t.Helper()
	c := env.cp.Client()
	var r rollout
	start := time.Now()
	err := harness.Eventually(90*time.Second, 100*time.Millisecond, func() (bool, error) {
		rs, dep, err := newestReplicaSet(c)
		if err != nil {
			return false, err
		}
		if dep.Status.ObservedGeneration < minGeneration {
			return false, fmt.Errorf("deployment controller has not seen generation %d", minGeneration)
		}
		pods, err := c.ListPods(chainNS, "pod-template-hash="+rs.Labels["pod-template-hash"])
		if err != nil {
			return false, err
		}
		live := pods[:0]
		for _, p := range pods {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		r = rollout{rs: *rs, pods: live}
		if len(live) != replicas {
			return false, fmt.Errorf("ReplicaSet %s has %d of %d pods", rs.Name, len(live), replicas)
		}
		for _, p := range live {
			if _, ok := p.Annotations[keys.StatusAnnotation]; !ok {
				return false, fmt.Errorf("pod %s is not injected", p.Name)
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ReplicaSet %s: %d injected pod(s) stored %s after the change", r.rs.Name, replicas, time.Since(start).Round(time.Millisecond))
	return r
}

// patchDeployment applies a merge patch and returns the Deployment's new
// generation.
func patchDeployment(t *testing.T, patch string, strategic bool) int64 {
	t.Helper()
	c := env.cp.Client()
	var err error
	if strategic {
		err = c.StrategicPatch(deploymentPath, []byte(patch))
	} else {
		err = c.MergePatch(deploymentPath, []byte(patch))
	}
	if err != nil {
		t.Fatalf("patch %s: %v", patch, err)
	}
	var dep appsv1.Deployment
	if err := c.Get(deploymentPath, &dep); err != nil {
		t.Fatal(err)
	}
	return dep.Generation
}

func TestRealChain(t *testing.T) {
	rels, err := harness.ArgoReleases()
	if err != nil {
		t.Fatal(err)
	}
	c := env.cp.Client()
	steps := readReadme(t)

	// 1. helm install, with the certificate from `cmp-injector certs` in a
	// Secret (there is no cert-manager here), as the chart README describes.
	t0 := time.Now()
	helm, err := env.cp.NewHelm(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	secretYAML, err := exec.Command(env.bins["cmp-injector"], "certs", "--service", release, "--namespace", injectorNS,
		"--ip", "127.0.0.1", "--secret-name", release+"-tls").Output()
	if err != nil {
		t.Fatalf("cmp-injector certs: %v", err)
	}
	var secret corev1.Secret
	if err := yaml.UnmarshalStrict(secretYAML, &secret); err != nil {
		t.Fatalf("cmp-injector certs printed no Secret: %v\n%s", err, secretYAML)
	}
	if err := c.CreateNamespace(injectorNS, nil); err != nil {
		t.Fatal(err)
	}
	secret.Namespace = injectorNS
	secret.APIVersion, secret.Kind = "v1", "Secret"
	if err := c.Do(http.MethodPost, "/api/v1/namespaces/"+injectorNS+"/secrets", nil, &secret, nil); err != nil {
		t.Fatal(err)
	}
	// How the apiserver reaches the injector is the harness's business: the
	// booted injector listens on a loopback port, and the chart's webhook.url
	// (its value for out-of-cluster injectors) points there instead of at the
	// Service, which has no endpoints without a kubelet.
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/mutate", port)
	chart := filepath.Join(env.repo, "charts", "cmp-injector")
	values := filepath.Join("testdata", "chain", "values.yaml")
	installed := true
	out, err := helm.Run("install", release, chart, "-n", injectorNS, "--create-namespace", "-f", values,
		"--set", "certificates.mode=secret", "--set", "certificates.secretName="+release+"-tls",
		"--set", "certificates.caBundle="+base64.StdEncoding.EncodeToString(secret.Data["ca.crt"]), "--set", "webhook.url="+url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if installed {
			_, _ = helm.Run("uninstall", release, "-n", injectorNS)
		}
	})
	t.Logf("helm install in %s:\n%s", time.Since(t0).Round(time.Millisecond), firstLines(out, 6))
	for _, p := range []string{
		"/api/v1/namespaces/" + injectorNS + "/serviceaccounts/" + release,
		"/api/v1/namespaces/" + injectorNS + "/configmaps/" + release + "-catalog",
		"/api/v1/namespaces/" + injectorNS + "/services/" + release,
		"/apis/apps/v1/namespaces/" + injectorNS + "/deployments/" + release,
		harness.WebhookConfigurations + "/" + release,
	} {
		if err := c.Get(p, nil); err != nil {
			t.Errorf("helm install did not create %s: %v", p, err)
		}
	}
	in, injPod, err := harness.BootChartInjector(c, injectorNS, release, env.bins["cmp-injector"],
		filepath.Join(env.root, "hi"), port, env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer injPod.Stop()

	// 2. Argo CD's side: Redis, the objects its repo-server reads, and the
	// repo-server Deployment without any of our labels.
	redis, err := harness.StartRedis(filepath.Join(env.root, "redis"), redisSecret, env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer redis.Stop()
	if err := c.CreateNamespace(chainNS, nil); err != nil {
		t.Fatal(err)
	}
	applyFile(t, chainNS, filepath.Join("testdata", "chain", "argocd-config.yaml"),
		map[string]string{"REDIS_ADDRESS": redis.Addr, "REDIS_PASSWORD": redisSecret})
	applyFile(t, chainNS, filepath.Join("testdata", "chain", "argocd-repo-server.yaml"),
		map[string]string{"quay.io/argoproj/argocd:latest": rels[0].Image()})
	plain := waitPlainRollout(t)

	// 3. The README's label and patch commands.
	if err := c.MergePatch("/api/v1/namespaces/"+chainNS,
		[]byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, steps.labelKey, steps.labelValue))); err != nil {
		t.Fatal(err)
	}
	// The apiserver learns of the webhook through an informer: wait until it
	// calls the injector before relying on it.
	waitActive(t, chainNS)
	gen := patchDeployment(t, string(steps.patch), false)
	r := waitRollout(t, gen, 1)
	if r.rs.Name == plain {
		t.Fatal("the README's patch did not start a new rollout")
	}
	readmePlugins := status(t, &r.pods[0]).Plugins
	t.Logf("README patch: pod %s injected with %v", r.pods[0].Name, readmePlugins)
	if len(readmePlugins) == 0 {
		t.Fatal("the README's patch injected no plugin")
	}

	t.Run("denied rollout is stuck with the injector's message", func(t *testing.T) {
		gen := patchDeployment(t, `{"spec":{"template":{"metadata":{"annotations":{
			"cmp-injector.io/plugins":"helm, no-such-plugin","image.cmp-injector.io/helm":"evil.example/helm:6.6.6"}}}}}`, false)
		var msg string
		err := harness.Eventually(60*time.Second, 200*time.Millisecond, func() (bool, error) {
			rs, dep, err := newestReplicaSet(c)
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
		t.Logf("FailedCreate: %s", msg)
		for _, want := range []string{"no-such-plugin", "evil.example/helm:6.6.6", "inject.cmp-injector.io"} {
			if !strings.Contains(msg, want) {
				t.Errorf("FailedCreate message lacks %q: %s", want, msg)
			}
		}
		// The rollout cannot make progress: no pod of the new template exists.
		rs, dep, err := newestReplicaSet(c)
		if err != nil {
			t.Fatal(err)
		}
		if pods, _ := c.ListPods(chainNS, "pod-template-hash="+rs.Labels["pod-template-hash"]); len(pods) != 0 || dep.Status.UpdatedReplicas != 0 {
			t.Errorf("denied ReplicaSet has %d pods, the Deployment %d updated replicas", len(pods), dep.Status.UpdatedReplicas)
		}
		// Fix the annotation the way a user would: the rollout goes back to
		// the README's template.
		patchDeployment(t, `{"spec":{"template":{"metadata":{"annotations":{"image.cmp-injector.io/helm":null}}}}}`, false)
		patchDeployment(t, string(steps.patch), false)
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
		first := r.pods[0]
		for _, p := range r.pods[1:] {
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

	// 5. helm upgrade with a changed catalog: the running injector serves it
	// once the kubelet (here: the boot) re-projects the ConfigMap.
	t.Run("helm upgrade changes the catalog", func(t *testing.T) {
		if _, err := helm.Run("upgrade", release, chart, "-n", injectorNS, "--reuse-values", "--set", "catalog.revision=chain-2"); err != nil {
			t.Fatal(err)
		}
		if err := injPod.Project(); err != nil {
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
	})

	// 6. helm uninstall leaves no webhook configuration behind: a leftover one
	// with failurePolicy Fail would block every labelled pod.
	t.Run("helm uninstall removes the webhook", func(t *testing.T) {
		if _, err := helm.Run("uninstall", release, "-n", injectorNS, "--wait"); err != nil {
			t.Fatal(err)
		}
		installed = false
		err := c.Get(harness.WebhookConfigurations+"/"+release, nil)
		var apiErr *harness.APIError
		if err == nil || !asAPIErr(err, &apiErr) || apiErr.Code != http.StatusNotFound {
			t.Errorf("MutatingWebhookConfiguration %s after uninstall: %v", release, err)
		}
		_ = in.Stop()
		// With the injector gone and no configuration left, labelled pods are
		// admitted as they are.
		pod := loadPod(t, "repo-server-pod.yaml")
		if _, err := c.CreatePod(chainNS, pod, true); err != nil {
			t.Errorf("a labelled pod is blocked after uninstall: %v", err)
		}
	})
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
	patchDeployment(t, fmt.Sprintf(`{"spec":{"template":{"spec":{
		"containers":[{"name":%[1]q,"image":%[2]q,"command":["/var/run/argocd/argocd-cmp-server"],
			"securityContext":{"runAsNonRoot":true,"runAsUser":999,"readOnlyRootFilesystem":true,"allowPrivilegeEscalation":false,
				"capabilities":{"drop":["ALL"]},"seccompProfile":{"type":"RuntimeDefault"}},
			"volumeMounts":[{"name":"var-files","mountPath":"/var/run/argocd"},
				{"name":"plugins","mountPath":"/home/argocd/cmp-server/plugins"},
				{"name":%[1]q,"mountPath":"/home/argocd/cmp-server/config/plugin.yaml","subPath":"plugin.yaml"},
				{"name":"%[1]s-tmp","mountPath":"/tmp"}]}],
		"volumes":[{"name":%[1]q,"configMap":{"name":"%[1]s-plugin"}},{"name":"%[1]s-tmp","emptyDir":{}}]}}}}`,
		argoSidecar, image), true)
}

// argoRelease boots the newest rollout's pod (generation gen) with Argo CD
// release rel's repo-server and runs the Argo CD cases through it; the pod is
// then reported Ready, as the kubelet would once its probes pass.
func argoRelease(t *testing.T, i int, rel harness.ArgoRelease, gen int64, repoURL, commit string) {
	t.Run("Argo CD "+rel.Version, func(t *testing.T) {
		c := env.cp.Client()
		r := waitRollout(t, gen, 1)
		pod := &r.pods[0]
		if got := pod.Spec.Containers[0].Image; got != rel.Image() {
			t.Fatalf("pod runs %s, want %s", got, rel.Image())
		}
		start := time.Now()
		rs, err := harness.BootRepoServer(c, pod, rel, env.bins["cmp-server"],
			filepath.Join(env.root, "a"+strconv.Itoa(i)), env.logFile)
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
	})
}

// waitPlainRollout waits for the first pod of the unlabelled Deployment:
// stored as Argo CD's manifest made it, not injected.
func waitPlainRollout(t *testing.T) string {
	t.Helper()
	c := env.cp.Client()
	var name string
	err := harness.Eventually(60*time.Second, 100*time.Millisecond, func() (bool, error) {
		rs, _, err := newestReplicaSet(c)
		if err != nil {
			return false, err
		}
		pods, err := c.ListPods(chainNS, "pod-template-hash="+rs.Labels["pod-template-hash"])
		if err != nil || len(pods) != 1 {
			return false, fmt.Errorf("ReplicaSet %s: %d pods (%v)", rs.Name, len(pods), err)
		}
		if _, ok := pods[0].Annotations[keys.StatusAnnotation]; ok {
			t.Fatalf("pod %s was injected before anyone asked", pods[0].Name)
		}
		name = rs.Name
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func asAPIErr(err error, target **harness.APIError) bool {
	e, ok := err.(*harness.APIError)
	if ok {
		*target = e
	}
	return ok
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
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
