package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/policy"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// policyDifferences are the golden cases whose pod the policy admits
// differently from the webhook, and why; docs/policy-mode.md lists each.
// A case that differs and is not here fails, and so does one here that no
// longer differs.
var policyDifferences = map[string]string{
	"many-unknown-plugins":    "the webhook lists 10 problems of one reason and counts the rest; the policy lists every problem",
	"program-word-with-space": "the policy reads a container's program from its words joined by spaces: one word holding a space is read as two",
	"status-set-at-create":    "a pod created with the status annotation: the webhook checks it against the catalog, the policy adds nothing and admits it",
	// The same, for pods pre-rendered by cmp-injector inject and then
	// changed: the webhook refuses each; the policy admits them as written.
	"prerendered-config-edited":  "a pre-rendered pod whose plugin.yaml annotation was edited: the webhook refuses it, the policy admits it",
	"prerendered-image-tampered": "a pre-rendered pod whose sidecar image was changed: the webhook refuses it, the policy admits it",
	"prerendered-no-copy":        "a pre-rendered pod that lacks a container its status names: the webhook refuses it, the policy admits it",
	"prerendered-status-forged":  "a pod whose status names sidecars it does not have: the webhook refuses it, the policy admits it",
}

const policyAPI = "/apis/admissionregistration.k8s.io/v1"

// servesPolicies reports whether the API server serves MutatingAdmission
// Policy at admissionregistration.k8s.io/v1 (GA in 1.36).
func servesPolicies(t *testing.T) bool {
	t.Helper()
	var list metav1.APIResourceList
	if err := env.cp.Client().Get(policyAPI, &list); err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "mutatingadmissionpolicies" })
}

// policyCase is one golden case of injector/testdata/golden as a pod to
// create.
type policyCase struct {
	name, namespace, catalog string
	pod                      *corev1.Pod
}

// admission is what the API server did with a pod: stored it (dry run) or
// refused it with our message.
type admission struct {
	pod    *corev1.Pod
	denial string
}

func (a admission) kind() string {
	switch {
	case a.pod == nil:
		return "denied"
	case a.pod.Annotations[keys.StatusAnnotation] != "":
		return "injected"
	}
	return "unchanged"
}

func (a admission) String() string {
	if a.pod == nil {
		return "denied: " + a.denial
	}
	b, _ := yaml.Marshal(stableStoredPod(a.pod))
	// The service account admission plugin names the token volume at random.
	return randomTokenVolume.ReplaceAllString(string(b), "kube-api-access-<random>")
}

var randomTokenVolume = regexp.MustCompile(`kube-api-access-[a-z0-9]{5}`)

// TestPolicyMatchesWebhook admits every golden case of the webhook through
// the chart's webhook and then through the policies rendered from the same
// catalog, on this API server, and compares what it stores or refuses.
func TestPolicyMatchesWebhook(t *testing.T) {
	if !servesPolicies(t) {
		t.Skipf("kube-apiserver %s does not serve MutatingAdmissionPolicy in %s (GA in 1.36)", env.k8sVer, policyAPI)
	}
	cases := policyCases(t)
	byCatalog := map[string][]policyCase{}
	for _, c := range cases {
		byCatalog[c.catalog] = append(byCatalog[c.catalog], c)
	}
	namespaces := map[string]bool{}
	for _, c := range cases {
		namespaces[c.namespace] = true
	}
	for ns := range namespaces {
		enableNamespace(t, ns)
	}
	// The service accounts the pods name: without them the API server
	// refuses a pod before admission decides anything, in both modes alike,
	// and the case would compare nothing.
	for _, c := range cases {
		if sa := c.pod.Spec.ServiceAccountName; sa != "" {
			if err := env.cp.Client().CreateServiceAccount(c.namespace, sa); err != nil {
				t.Fatal(err)
			}
		}
	}
	differs := map[string]string{}
	kinds := map[string]int{}
	var uncompared []string
	// Time spent in admission per mode (dry-run creates of the same pods),
	// reported, never asserted.
	var spent [2]time.Duration
	var admitted [2]int
	for i, file := range slices.Sorted(maps.Keys(byCatalog)) {
		group := byCatalog[file]
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			cat, err := catalog.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			canary := canaryPod(cat)
			webhook := map[string]admission{}
			t.Run("webhook", func(t *testing.T) {
				startInjector(t, raw)
				waitDenies(t, group[0].namespace, canary, "admission webhook")
				for _, c := range group {
					start := time.Now()
					a := admit(t, c)
					if strings.HasPrefix(a.denial, notOurs) {
						// An object the API server refuses whatever admission
						// decides (two-versions: an annotation key no pod may
						// have) compares nothing.
						uncompared = append(uncompared, c.name)
						t.Logf("case %s is refused by the API server itself, in either mode: %s", c.name, a.denial)
					}
					spent[0] += time.Since(start)
					admitted[0]++
					webhook[c.name] = a
					kinds[a.kind()]++
				}
			})
			if t.Failed() {
				return
			}
			t.Run("policy", func(t *testing.T) {
				// Each catalog's policies bind only pods with their own tag, so
				// one the API server has not yet dropped cannot touch the next
				// catalog's webhook phase.
				tag := fmt.Sprint(i)
				applyPolicy(t, cat, tag)
				waitDenies(t, group[0].namespace, tagged(canary, tag), "ValidatingAdmissionPolicy")
				for _, c := range group {
					want := webhook[c.name]
					c.pod = tagged(c.pod, tag)
					var got admission
					// The two policies reach the API server's cache on their own:
					// a difference is looked at again for two seconds.
					for try := range 4 {
						start := time.Now()
						got = untagged(admit(t, c))
						if try == 0 {
							spent[1] += time.Since(start)
							admitted[1]++
						}
						if got.String() == want.String() {
							break
						}
						time.Sleep(500 * time.Millisecond)
					}
					if got.String() != want.String() {
						differs[c.name] = fmt.Sprintf("webhook:\n%s\npolicy:\n%s", want, got)
					}
				}
				t.Logf("%d cases of %s admitted alike by the webhook and the policy", len(group)-countIn(differs, group), filepath.Base(file))
			})
		})
	}
	for _, name := range slices.Sorted(maps.Keys(differs)) {
		if why, known := policyDifferences[name]; known {
			t.Logf("known difference, case %s (%s):\n%s", name, why, differs[name])
			continue
		}
		t.Errorf("case %s: the policy admits it differently from the webhook:\n%s", name, differs[name])
	}
	for _, name := range slices.Sorted(maps.Keys(policyDifferences)) {
		if _, ok := differs[name]; !ok {
			t.Errorf("case %s is listed in policyDifferences but the policy now admits it as the webhook does: remove it (and from docs/policy-mode.md)", name)
		}
	}
	t.Logf("%d cases (by the webhook: %d injected, %d denied by cmp-injector, %d admitted unchanged, %d refused by the API server itself), %d admitted alike in both modes, %d known differences",
		len(cases), kinds["injected"], kinds["denied"]-len(uncompared), kinds["unchanged"], len(uncompared), len(cases)-len(differs), len(policyDifferences))
	if admitted[0] > 0 && admitted[1] > 0 {
		t.Logf("dry-run create, mean over %d pods: %s through the webhook, %s through the policies",
			admitted[0], (spent[0] / time.Duration(admitted[0])).Round(10*time.Microsecond), (spent[1] / time.Duration(admitted[1])).Round(10*time.Microsecond))
	}
	if len(uncompared) > 1 {
		t.Errorf("%d cases are refused before admission decides (%v): each compares nothing; give their pods what the API server needs (a service account, a valid field)", len(uncompared), uncompared)
	}
	if kinds["injected"] < 30 || kinds["denied"] < 10 {
		t.Errorf("the golden cases no longer exercise both injection and denial: %v", kinds)
	}
}

func countIn(m map[string]string, cases []policyCase) int {
	n := 0
	for _, c := range cases {
		if _, ok := m[c.name]; ok {
			n++
		}
	}
	return n
}

// policyCases reads the webhook's golden cases, each input's pod (or pod
// template), its namespace and its catalog, and the cases of
// testdata/policy, which aim at what the policy computes differently.
func policyCases(t *testing.T) []policyCase {
	t.Helper()
	golden := readPolicyCases(t, filepath.Join(env.repo, "injector", "testdata", "golden"))
	if len(golden) < 50 {
		t.Fatalf("only %d golden cases found", len(golden))
	}
	return append(golden, readPolicyCases(t, filepath.Join("testdata", "policy"))...)
}

func readPolicyCases(t *testing.T, dir string) []policyCase {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []policyCase
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".yaml")
		if !ok || strings.Contains(name, ".") {
			continue // a golden, catalog or review file
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(b, &obj); err != nil {
			t.Fatal(err)
		}
		api, _ := obj["apiVersion"].(string)
		kind, _ := obj["kind"].(string)
		path, ok := inject.TemplatePath(api, kind)
		if !ok {
			continue // not an object that carries a pod
		}
		podJSON, err := inject.PodJSON(obj, path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		pod := &corev1.Pod{}
		if err := json.Unmarshal(podJSON, pod); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ns := pod.Namespace
		if meta, ok := obj["metadata"].(map[string]any); ok && ns == "" {
			ns, _ = meta["namespace"].(string)
		}
		if ns == "" {
			ns = "policy-no-namespace"
		}
		pod.Namespace, pod.Name, pod.GenerateName = "", "policy-"+name, ""
		if len(pod.Name) > 63 {
			pod.Name = pod.Name[:63]
		}
		cat := filepath.Join(dir, name+".catalog.yaml")
		if _, err := os.Stat(cat); err != nil {
			cat = filepath.Join(env.repo, "injector", "testdata", "catalog.yaml")
		}
		out = append(out, policyCase{name: name, namespace: ns, catalog: cat, pod: pod})
	}
	return out
}

// enableNamespace makes ns exist with the enabled label, whether or not an
// earlier test made it, and takes the label off when the test ends: later
// tests count the enabled namespaces their reconciler watches.
func enableNamespace(t *testing.T, ns string) {
	t.Helper()
	c := env.cp.Client()
	labels := map[string]string{keys.NamespaceEnabledLabel: keys.EnabledValue}
	if err := c.CreateNamespace(ns, labels); err != nil {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
		if err := c.MergePatch("/api/v1/namespaces/"+ns, patch); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		off, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{keys.NamespaceEnabledLabel: nil}}})
		_ = c.MergePatch("/api/v1/namespaces/"+ns, off)
	})
	if err := c.WaitServiceAccount(ns, "default", 30*time.Second); err != nil {
		t.Fatal(err)
	}
}

// admit creates c's pod as a server-side dry run.
func admit(t *testing.T, c policyCase) admission {
	t.Helper()
	got, err := env.cp.Client().CreatePod(c.namespace, c.pod.DeepCopy(), true)
	if err == nil {
		return admission{pod: got}
	}
	var apiErr *harness.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("%s: %v", c.name, err)
	}
	msg := apiErr.Message
	if i := strings.Index(msg, "cmp-injector denied pod: "); i >= 0 {
		return admission{denial: msg[i:]}
	}
	return admission{denial: notOurs + msg}
}

// notOurs marks a refusal that is not cmp-injector's.
const notOurs = "(not ours) "

// canaryPod is a repo-server pod asking for a plugin no catalog has: the
// webhook and the policy each refuse it, naming themselves.
func canaryPod(cat *catalog.Catalog) *corev1.Pod {
	ctr := corev1.Container{Name: "canary", Image: "quay.io/argoproj/argocd:v3.6.1", Args: []string{"/usr/local/bin/argocd-repo-server"}}
	if len(cat.Defaults.RepoServerNames) > 0 {
		ctr.Name = cat.Defaults.RepoServerNames[0]
	} else if len(cat.Defaults.RepoServerPrograms) > 0 {
		ctr.Args = []string{cat.Defaults.RepoServerPrograms[0]}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "policy-canary", Labels: map[string]string{keys.InjectLabel: keys.EnabledValue},
			Annotations: map[string]string{keys.PluginsAnnotation: "no-such-plugin-anywhere"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{ctr}},
	}
}

// waitDenies waits until creating canary in ns is refused by who (the
// webhook or the policy): the API server learns of both through informers.
func waitDenies(t *testing.T, ns string, canary *corev1.Pod, who string) {
	t.Helper()
	c := env.cp.Client()
	err := harness.Eventually(30*time.Second, 100*time.Millisecond, func() (bool, error) {
		_, err := c.CreatePod(ns, canary.DeepCopy(), true)
		if err == nil {
			return false, errors.New("the canary was admitted")
		}
		return strings.Contains(err.Error(), who) && strings.Contains(err.Error(), "no-such-plugin-anywhere"), err
	})
	if err != nil {
		t.Fatalf("waiting for %s to refuse the canary: %v", who, err)
	}
}

// policyTagLabel tags the pods one catalog's policies are bound to.
const policyTagLabel = "e2e.cmp-injector.io/policy"

func tagged(pod *corev1.Pod, tag string) *corev1.Pod {
	p := pod.DeepCopy()
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[policyTagLabel] = tag
	return p
}

func untagged(a admission) admission {
	if a.pod != nil {
		delete(a.pod.Labels, policyTagLabel)
		if len(a.pod.Labels) == 0 {
			a.pod.Labels = nil
		}
	}
	return a
}

// applyPolicy installs the policy set rendered from cat, bound to pods
// tagged tag, and removes it when the test ends.
func applyPolicy(t *testing.T, cat *catalog.Catalog, tag string) {
	t.Helper()
	c := env.cp.Client()
	set := policy.Render(cat, policy.Options{Name: "cmp-injector-e2e-" + tag})
	only := metav1.LabelSelectorRequirement{Key: policyTagLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{tag}}
	for _, m := range []*metav1.LabelSelector{set.MutatingBinding.Spec.MatchResources.ObjectSelector, set.ValidatingBinding.Spec.MatchResources.ObjectSelector} {
		m.MatchExpressions = append(m.MatchExpressions, only)
	}
	for _, o := range set.Objects() {
		collection, name := policyPath(o)
		obj := map[string]any{}
		b, _ := json.Marshal(o)
		_ = json.Unmarshal(b, &obj)
		if err := c.Apply(collection, name, obj); err != nil {
			t.Fatalf("apply %s: %v", collection, err)
		}
		t.Cleanup(func() { _ = c.Delete(collection + "/" + name) })
	}
}

// policyPath is where o lives in the API.
func policyPath(o runtime.Object) (collection, name string) {
	b, _ := json.Marshal(o)
	var meta struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(b, &meta)
	plural := strings.ToLower(meta.Kind) + "s"
	if p, ok := strings.CutSuffix(plural, "ys"); ok {
		plural = p + "ies"
	}
	return policyAPI + "/" + plural, meta.Metadata.Name
}

// TestPolicyModeChart installs the chart with mode=policy by helm, runs its
// Deployment's pod as the kubelet would (cmp-injector policy --apply --watch,
// with the chart's RBAC through its service account token), and shows that
// the API server injects and refuses repo-server pods by itself: with that
// pod stopped and the Deployment scaled to zero, and only a catalog change
// waiting for it to come back.
func TestPolicyModeChart(t *testing.T) {
	if !servesPolicies(t) {
		t.Skipf("kube-apiserver %s does not serve MutatingAdmissionPolicy in %s (GA in 1.36)", env.k8sVer, policyAPI)
	}
	c := env.cp.Client()
	const ns, release = "cmp-injector-policy", "cmp-injector-policy"
	dir := filepath.Join(env.root, "policy-chart")
	helm, err := env.cp.NewHelm(filepath.Join(dir, "helm"))
	if err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(env.repo, "charts", "cmp-injector")
	out, err := helm.Run("install", release, chart, "-n", ns, "--create-namespace",
		"--set", "mode=policy", "--set", "replicaCount=1", "--set", "catalog.revision=policy-1")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("helm install --set mode=policy:\n%s", harness.FirstLines(out, 4))
	t.Cleanup(func() {
		_, _ = helm.Run("uninstall", release, "-n", ns)
		// The policies are the injector's (server-side apply), not helm's;
		// without the chart's bindings they match nothing.
		_ = c.Delete(policyAPI + "/mutatingadmissionpolicies/" + release)
		_ = c.Delete(policyAPI + "/validatingadmissionpolicies/" + release)
	})
	for _, p := range []string{policyAPI + "/mutatingadmissionpolicybindings/" + release, policyAPI + "/validatingadmissionpolicybindings/" + release} {
		if err := c.Get(p, nil); err != nil {
			t.Errorf("helm install did not create %s: %v", p, err)
		}
	}
	var apiErr *harness.APIError
	if err := c.Get(harness.WebhookConfigurations+"/"+release, nil); !errors.As(err, &apiErr) || apiErr.Code != 404 {
		t.Errorf("policy mode installed a MutatingWebhookConfiguration (get: %v)", err)
	}

	appNS := "argocd"
	enableNamespace(t, appNS)
	repoServer := func(name, plugins string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{keys.InjectLabel: keys.EnabledValue},
				Annotations: map[string]string{keys.PluginsAnnotation: plugins}},
			Spec: corev1.PodSpec{AutomountServiceAccountToken: new(bool), Containers: []corev1.Container{{
				Name: "argocd-repo-server", Image: "quay.io/argoproj/argocd:v3.6.1", Args: []string{"/usr/local/bin/argocd-repo-server"}}}},
		}
	}
	injectedAt := func(revision string) {
		t.Helper()
		err := harness.Eventually(60*time.Second, 200*time.Millisecond, func() (bool, error) {
			got, err := c.CreatePod(appNS, repoServer("policy-probe", "helm, kustomize"), true)
			if err != nil {
				return false, err
			}
			st := got.Annotations[keys.StatusAnnotation]
			return strings.Contains(st, `"revision":"`+revision+`"`), fmt.Errorf("status %q", st)
		})
		if err != nil {
			t.Fatalf("a repo-server pod is not injected at catalog revision %s: %v", revision, err)
		}
	}
	metricsPort, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	boot := func() *harness.BootedPod {
		t.Helper()
		pod := bootable(t, ns, release)
		kubeconfig := filepath.Join(dir, "serviceaccount.kubeconfig")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitServiceAccount(ns, pod.Spec.ServiceAccountName, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := c.ServiceAccountKubeconfig(ns, pod.Spec.ServiceAccountName, kubeconfig); err != nil {
			t.Fatal(err)
		}
		booted, err := harness.BootPod(pod, harness.BootOptions{
			Root: filepath.Join(dir, "pod"), Run: func(string) bool { return true },
			Entrypoints: map[string][]string{harness.InjectorImage: {env.bins["cmp-injector"]}},
			Objects:     c, LogTo: env.logFile,
			Rewrite: func(_ corev1.Container, argv []string) []string {
				// Every booted pod shares loopback: its metrics port moves.
				for i, a := range argv {
					if strings.HasPrefix(a, "--metrics-listen=") {
						argv[i] = "--metrics-listen=127.0.0.1:" + strconv.Itoa(metricsPort)
					}
				}
				return append(argv, "--kubeconfig="+kubeconfig, "--poll-interval=200ms")
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		// Ready once the catalog's policies are applied, as the kubelet's
		// readiness probe asks.
		err = harness.Eventually(30*time.Second, 100*time.Millisecond, func() (bool, error) {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", metricsPort))
			if err != nil {
				return false, err
			}
			_ = resp.Body.Close()
			return resp.StatusCode == http.StatusOK, fmt.Errorf("/readyz %s", resp.Status)
		})
		if err != nil {
			t.Fatal(err)
		}
		return booted
	}

	// 1. The Deployment's pod writes the policies; the API server injects.
	booted := boot()
	injectedAt("policy-1")
	// The validating policy reaches the API server's cache on its own,
	// after or before the mutating one: its denial is waited for too.
	err = harness.Eventually(30*time.Second, 200*time.Millisecond, func() (bool, error) {
		_, err := c.CreatePod(appNS, repoServer("policy-denied", "helm, nope"), true)
		if err == nil {
			return false, errors.New("admitted")
		}
		return strings.Contains(err.Error(), `cmp-injector denied pod: plugin "nope" is not in the catalog`), err
	})
	if err != nil {
		t.Errorf("a pod asking for an unknown plugin: %v; want the catalog's denial", err)
	}

	// 2. The injector is down: its pod stopped, the Deployment at zero.
	booted.Stop()
	if _, err := c.PatchDeployment(ns, release, []byte(`{"spec":{"replicas":0}}`), false); err != nil {
		t.Fatal(err)
	}
	stored, err := c.CreatePod(appNS, repoServer("policy-stored", "helm"), false)
	if err != nil {
		t.Fatalf("with the injector scaled to zero: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete("/api/v1/namespaces/" + appNS + "/pods/policy-stored") })
	inits, _ := containerNames(stored)
	if !slices.Contains(inits, "cmp-helm") || stored.Annotations[keys.StatusAnnotation] == "" {
		t.Errorf("with the injector scaled to zero the stored pod is not injected: init containers %v", inits)
	}

	// doctor reads the mode off the cluster, and the policies as complete
	// for the catalog.
	doctor := func(want ...string) {
		t.Helper()
		out, err := exec.Command(env.bins["cmp-injector"], "doctor", "--kubeconfig", env.cp.Kubeconfig, "--namespace", ns).CombinedOutput()
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				t.Errorf("doctor (%v) does not say %q:\n%s", err, w, out)
			}
		}
	}
	doctor("policy mode: the API server injects with MutatingAdmissionPolicy "+release, release+" is complete for the catalog (revision policy-1")

	// 3. A catalog change waits for the injector, and then takes effect.
	if _, err := helm.Run("upgrade", release, chart, "-n", ns, "--reuse-values", "--set", "catalog.revision=policy-2", "--set", "replicaCount=1"); err != nil {
		t.Fatal(err)
	}
	injectedAt("policy-1")
	doctor(release + " was rendered from catalog revision policy-1; the catalog is at policy-2")
	booted = boot()
	defer booted.Stop()
	injectedAt("policy-2")
	doctor(release + " is complete for the catalog (revision policy-2")
	// The reconciler (reconciler.enabled, on by default) brings the pod the
	// policy injected at policy-1 current with policy-2, as it does pods the
	// webhook injected.
	err = harness.Eventually(60*time.Second, 200*time.Millisecond, func() (bool, error) {
		pod, err := c.GetPod(appNS, "policy-stored")
		if err != nil {
			return false, err
		}
		st := pod.Annotations[keys.StatusAnnotation]
		return strings.Contains(st, `"revision":"policy-2"`), fmt.Errorf("status %s", st)
	})
	if err != nil {
		t.Errorf("the reconciler did not bring the injected pod to the new catalog: %v", err)
	}
}

// bootable is the pod Deployment ns/name would create.
func bootable(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	var dep struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := env.cp.Client().Get(harness.DeploymentPath(ns, name), &dep); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: dep.Spec.Template.ObjectMeta, Spec: dep.Spec.Template.Spec}
	pod.Namespace, pod.Name = ns, name+"-booted"
	return pod
}
