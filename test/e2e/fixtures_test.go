package e2e

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
	// Named apart from this suite's golden, which marshals and records
	// before it compares.
	goldenfile "github.com/cmp-injector/cmp-injector/test/golden"
)

// catalogFor is the example catalog with the given sidecar mode and namespaces.
func catalogFor(t *testing.T, nativeSidecars bool, namespaces map[string][]string) []byte {
	t.Helper()
	b, err := harness.ExampleCatalog(nativeSidecars, namespaces)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// loadPod reads a pod fixture from testdata.
func loadPod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	pod, err := harness.LoadPod(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// startInjector runs `cmp-injector serve` with catalog and installs the chart's
// webhook pointing at it; both are removed when the test ends.
func startInjector(t *testing.T, catalog []byte, set ...string) *harness.Injector {
	t.Helper()
	dir := t.TempDir()
	in, err := harness.NewInjector(env.bins["cmp-injector"], dir, catalog, env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	// A catalog the chart renders says nativeSidecars: auto, which the
	// injector settles by a dry run through the API (as the admin here; the
	// chart's own RBAC for it is TestNativeSidecarsAuto's).
	in.ExtraArgs = append(in.ExtraArgs, "--kubeconfig="+env.cp.Kubeconfig, "--sidecar-probe-namespace=default")
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop() })
	installWebhook(t, in, set...)
	return in
}

const webhookPath = harness.WebhookConfigurations

// installWebhook applies the chart's MutatingWebhookConfiguration for in.
func installWebhook(t *testing.T, in *harness.Injector, set ...string) {
	t.Helper()
	ca, err := in.CABundle()
	if err != nil {
		t.Fatal(err)
	}
	installWebhookWithCA(t, in, ca, set...)
}

func installWebhookWithCA(t *testing.T, in *harness.Injector, caBundle string, set ...string) {
	t.Helper()
	c := env.cp.Client()
	name, err := c.InstallWebhook(kubeVersion(), in.URL(), caBundle, set...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(webhookPath + "/" + name) })
}

// newNamespace creates a uniquely named namespace with labels.
func newNamespace(t *testing.T, prefix string, labels map[string]string) string {
	t.Helper()
	name := prefix + "-" + strings.ToLower(strings.ReplaceAll(time.Now().Format("150405.000000"), ".", ""))
	if err := env.cp.Client().CreateNamespace(name, labels); err != nil {
		t.Fatal(err)
	}
	return name
}

var enabledNS = map[string]string{keys.NamespaceEnabledLabel: keys.EnabledValue}

// waitActive waits until the apiserver calls the injector for pods in ns.
func waitActive(t *testing.T, ns string) {
	t.Helper()
	pod := loadPod(t, "repo-server-pod.yaml")
	pod.Name = "probe"
	if err := env.cp.Client().WaitInjecting(ns, pod, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}

// status decodes the injector's status annotation of a stored pod.
func status(t *testing.T, pod *corev1.Pod) *inject.Status {
	t.Helper()
	raw, ok := pod.Annotations[keys.StatusAnnotation]
	if !ok {
		t.Fatalf("pod %s has no %s annotation", pod.Name, keys.StatusAnnotation)
	}
	st := &inject.Status{}
	if err := json.Unmarshal([]byte(raw), st); err != nil {
		t.Fatalf("status annotation %q: %v", raw, err)
	}
	return st
}

// containerNames lists init containers then containers.
func containerNames(pod *corev1.Pod) (inits, main []string) {
	for _, c := range pod.Spec.InitContainers {
		inits = append(inits, c.Name)
	}
	for _, c := range pod.Spec.Containers {
		main = append(main, c.Name)
	}
	return inits, main
}

// stableStoredPod strips what the apiserver makes up per object, so a stored pod
// can be compared with a golden file.
func stableStoredPod(pod *corev1.Pod) *corev1.Pod {
	p := pod.DeepCopy()
	p.ObjectMeta.UID = ""
	p.ObjectMeta.ResourceVersion = ""
	p.ObjectMeta.CreationTimestamp = metaZero
	p.ObjectMeta.ManagedFields = nil
	p.ObjectMeta.Namespace = ""
	p.ObjectMeta.Generation = 0
	p.Status = corev1.PodStatus{}
	return p
}

// golden compares got with testdata/<name>, or rewrites it with -update.
// recordGoldensEnv names a directory where golden records what it has no
// golden file for instead of failing (make e2e-matrix sets it).
const recordGoldensEnv = "E2E_RECORD_GOLDENS"

func golden(t *testing.T, name string, got any) {
	t.Helper()
	b, err := yaml.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", name)
	_, err = os.Stat(path)
	if dir := os.Getenv(recordGoldensEnv); !goldenfile.Update() && os.IsNotExist(err) && dir != "" {
		// make e2e-matrix on a Kubernetes minor with no recorded goldens:
		// what the API server stored is kept for a maintainer to read, not
		// compared with another minor's defaults.
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("no %s for this Kubernetes minor: the stored object is recorded in %s, not compared", path, dir)
		return
	}
	goldenfile.Check(t, path, b)
}

// jsonString is s as a JSON string literal, as it appears in a manifest.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// createStored creates pod in ns and returns it as the apiserver stored it.
func createStored(t *testing.T, ns string, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	c := env.cp.Client()
	got, err := c.CreatePod(ns, pod, false)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := c.GetPod(ns, got.Name)
	if err != nil {
		t.Fatal(err)
	}
	return stored
}

// grantPodEditor gives harness.PodEditor create, get, list and patch on the
// resources (pods and pod subresources) in ns, and returns its client.
func grantPodEditor(t *testing.T, ns string, resources ...string) *harness.Client {
	t.Helper()
	admin := env.cp.Client()
	role := map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": map[string]any{"name": "pods"},
		"rules": []any{map[string]any{"apiGroups": []string{""}, "resources": resources, "verbs": []string{"create", "get", "list", "patch"}}}}
	binding := map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": map[string]any{"name": "pods"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pods"},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": harness.PodEditor}}}
	for coll, obj := range map[string]map[string]any{"roles": role, "rolebindings": binding} {
		if err := admin.Do(http.MethodPost, "/apis/rbac.authorization.k8s.io/v1/namespaces/"+ns+"/"+coll, nil, obj, nil); err != nil {
			t.Fatal(err)
		}
	}
	return env.cp.ClientAs(harness.PodEditor)
}

// createAs creates pod in ns as c, waiting out the moment before a new
// RoleBinding reaches the authorizer's cache.
func createAs(t *testing.T, c *harness.Client, ns string, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	var got *corev1.Pod
	err := harness.Eventually(30*time.Second, 100*time.Millisecond, func() (bool, error) {
		var err error
		got, err = c.CreatePod(ns, pod.DeepCopy(), false)
		var apiErr *harness.APIError
		if errors.As(err, &apiErr) && apiErr.Code == http.StatusForbidden && strings.Contains(apiErr.Message, "cannot create resource") {
			return false, err
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("creating pod %s as %s: %v", pod.Name, harness.PodEditor, err)
	}
	return got
}

// denied asserts that err is the API server's refusal carrying want.
func denied(t *testing.T, what string, err error, want string) {
	t.Helper()
	var apiErr *harness.APIError
	if !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, want) {
		t.Fatalf("%s: %v, want a denial containing %q", what, err, want)
	}
	t.Logf("as expected, %s is denied: %s", what, apiErr.Message)
}

// preRendered is the testdata pod as `cmp-injector inject` renders it for ns
// with in's catalog (a GitOps pipeline's pre-injected pod).
func preRendered(t *testing.T, in *harness.Injector, ns, file string) *corev1.Pod {
	t.Helper()
	out, err := exec.Command(env.bins["cmp-injector"], "inject", "--catalog", in.Catalog, "--namespace", ns,
		"-f", filepath.Join("testdata", file)).Output()
	if err != nil {
		t.Fatalf("cmp-injector inject: %v", err)
	}
	pod := loadPod(t, file)
	if err := yaml.Unmarshal(out, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// olderThan says whether rel is a release before version (e.g. "v3.6.0"); a
// version the binary does not report as semver counts as the newest.
func olderThan(rel harness.ArgoRelease, version string) bool {
	v, err := utilversion.ParseSemantic(rel.Version)
	return err == nil && !v.AtLeast(utilversion.MustParseSemantic(version))
}
