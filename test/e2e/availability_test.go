package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// TestOnlyRepoServersReachTheWebhook holds the chart's repo-server-pods
// matchCondition (CEL, evaluated by the real API server) and pkg/inject's
// recognition of the repo-server container to one rule, on every pod the
// golden tests know (Argo CD's plain and HA manifests of many releases,
// argo-helm with global.podLabels, the operator, OpenShift...) plus shapes
// of our own. Each pod gets the opt-in label and is created, as a dry run,
// while the injector is down under failurePolicy Fail: a pod pkg/inject would
// inject must be refused (it reached the webhook), every other one must never
// call it, so Argo CD's server, controller, redis and dex do not depend on
// the injector.
func TestOnlyRepoServersReachTheWebhook(t *testing.T) {
	catBytes := catalogFor(t, true, map[string][]string{"*": {"helm"}})
	cat, err := catalog.Parse(catBytes)
	if err != nil {
		t.Fatal(err)
	}
	in := startInjector(t, catBytes)
	ns := newNamespace(t, "avail", enabledNS)
	waitActive(t, ns)
	if err := in.Stop(); err != nil {
		t.Logf("injector exit: %v", err)
	}
	pods := goldenInputPods(t)
	pods = append(pods, recognitionShapes()...)
	c := env.cp.Client()
	var reached, created, other int
	for _, p := range pods {
		pod := p.pod.DeepCopy()
		pod.Namespace = ""
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels[keys.InjectLabel] = keys.EnabledValue
		pod.Name = "p"
		pod.GenerateName = ""
		// The API server's ServiceAccount plugin, which runs before the
		// webhooks, would refuse a service account this namespace lacks.
		pod.Spec.ServiceAccountName, pod.Spec.DeprecatedServiceAccount = "", ""
		want := inject.Inject(pod, ns, cat)
		repoServer := len(want.Reasons) == 0 || want.Reasons[0] != inject.ReasonNotRepoServer
		_, err := c.CreatePod(ns, pod, true)
		calledWebhook := err != nil && strings.Contains(err.Error(), `failed calling webhook "`+keys.WebhookName+`"`)
		switch {
		case repoServer && !calledWebhook:
			t.Errorf("%s: pkg/inject recognises a repo-server (%v), but the API server did not call the webhook: %v", p.from, want.Reasons, err)
		case !repoServer && calledWebhook:
			t.Errorf("%s: not a repo-server for pkg/inject, but it waited for the injector: %v", p.from, err)
		case calledWebhook:
			reached++
		case err == nil:
			created++
		default:
			// Not ours to judge (the fixture is not a valid pod on its own),
			// and the webhook was not called.
			other++
			t.Logf("%s: not a repo-server, refused by the API server for its own reasons: %s", p.from, harness.FirstLines(err.Error(), 1))
		}
	}
	t.Logf("%d pods: %d repo-servers refused with the injector down, %d others created without calling it, %d others refused by validation",
		len(pods), reached, created, other)
	// The golden inputs hold every Argo CD release's repo-server and
	// argo-helm's other workloads (global.podLabels): at least these many.
	if reached < 50 || created < 10 {
		t.Errorf("too few pods of a kind to prove anything: %d repo-servers, %d others created", reached, created)
	}
}

type namedPod struct {
	from string
	pod  *corev1.Pod
}

// goldenInputPods are the pods (and workloads' pod templates) of the golden
// tests' inputs.
func goldenInputPods(t *testing.T) []namedPod {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(env.repo, "injector", "testdata", "golden", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []namedPod
	for _, f := range files {
		if strings.HasSuffix(f, ".golden.yaml") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for i := 0; ; i++ {
			obj := map[string]any{}
			if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				break // inputs of the malformed-input cases
			}
			out = append(out, podsOf(fmt.Sprintf("%s#%d", filepath.Base(f), i), obj)...)
		}
	}
	return out
}

func podsOf(from string, obj map[string]any) []namedPod {
	if items, ok := obj["items"].([]any); ok {
		var out []namedPod
		for i, it := range items {
			if m, ok := it.(map[string]any); ok {
				out = append(out, podsOf(fmt.Sprintf("%s.items[%d]", from, i), m)...)
			}
		}
		return out
	}
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	path, ok := inject.TemplatePath(apiVersion, kind)
	if !ok {
		return nil
	}
	b, err := inject.PodJSON(obj, path)
	if err != nil {
		return nil
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(b, pod); err != nil || len(pod.Spec.Containers) == 0 {
		return nil
	}
	if _, done := pod.Annotations[keys.StatusAnnotation]; done {
		return nil // pre-rendered: its own tests cover it
	}
	name := kind
	if md, ok := obj["metadata"].(map[string]any); ok {
		if n, ok := md["name"].(string); ok {
			name += "/" + n
		}
	}
	return []namedPod{{from + " " + name, pod}}
}

// recognitionShapes are containers that only the program rule recognises, or
// that look close to a repo-server without being one.
func recognitionShapes() []namedPod {
	shape := func(name string, command, args []string) namedPod {
		return namedPod{fmt.Sprintf("shape %s %q %q", name, command, args), &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: name, Image: "quay.io/argoproj/argocd:v3.6.1", Command: command, Args: args}}}}}
	}
	return []namedPod{
		shape("main", []string{"/usr/local/bin/argocd-repo-server"}, nil),
		shape("main", nil, []string{"argocd-repo-server", "--loglevel", "info"}),
		shape("main", []string{"tini", "--"}, []string{"/usr/local/bin/argocd-repo-server"}),
		shape("main", []string{"sh", "-c", "exec argocd-repo-server --port 8081"}, nil),
		shape("main", []string{"uid_entrypoint.sh"}, []string{"argocd-repo-server", "--redis", "r:6379"}),
		shape("repo-server", nil, nil),
		shape("argocd-repo-server", []string{"sleep"}, []string{"1d"}),
		// Not repo-servers: the server and the controller name the
		// repo-server's address; the image alone says nothing.
		shape("server", []string{"argocd-server"}, []string{"--repo-server", "argocd-repo-server:8081"}),
		shape("controller", []string{"argocd-application-controller"}, []string{"--repo-server=argocd-repo-server:8081"}),
		shape("main", nil, nil),
		shape("redis", []string{"redis-server"}, []string{"--save", ""}),
	}
}

// TestSelfExclusionIsNotALabel: the chart's exclude-cmp-injector condition
// used to skip any pod whose labels named cmp-injector, so a user who may
// only patch pods could label an injected pod, swap its sidecar's image
// unreviewed, and label it back. Now a label decides nothing: the injector's
// own pods are recognised by their namespace and service account as well,
// and an injected pod's updates are always reviewed.
func TestSelfExclusionIsNotALabel(t *testing.T) {
	startInjector(t, catalogFor(t, true, map[string][]string{"*": {"helm"}}))
	ns := newNamespace(t, "self", enabledNS)
	waitActive(t, ns)
	editor := grantPodEditor(t, ns, "pods")
	pod := loadPod(t, "repo-server-pod.yaml")
	createAs(t, editor, ns, pod)
	podPath := "/api/v1/namespaces/" + ns + "/pods/" + pod.Name
	selfLabel := `{"metadata":{"labels":{"app.kubernetes.io/name":"cmp-injector"}}}`
	if err := editor.StrategicPatch(podPath, []byte(selfLabel)); err != nil {
		t.Fatalf("a label of its own is the pod author's business: %v", err)
	}
	err := editor.StrategicPatch(podPath, []byte(`{"spec":{"initContainers":[{"name":"cmp-helm","image":"evil/anything:1"}]}}`))
	var apiErr *harness.APIError
	if !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, `image "evil/anything:1" of container "cmp-helm" is not allowed`) {
		t.Fatalf("sidecar image swapped under the injector's label: %v", err)
	}
	t.Logf("as expected, the label switches nothing off: %s", apiErr.Message)

	// That the injector's own pod (release namespace, its service account
	// and its label) still skips the webhook is not shown here: the
	// release namespace, cmp-injector, is the one other tests install the
	// chart into, and a namespace cannot be made and removed in between.
}
