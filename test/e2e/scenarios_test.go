package e2e

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

var metaZero metav1.Time

// Metric names of the injector that the scenarios read.
const (
	metricRequests = "cmp_injector_requests_total"
	metricInjected = "cmp_injector_injected_total"
)

func metric(t *testing.T, in *harness.Injector, name string, labels ...string) float64 {
	t.Helper()
	m, err := in.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	// A misspelt or renamed metric would read as 0 before and after, and a
	// "the webhook was not called" check would pass whatever happened.
	if harness.Sum(m, name) == 0 {
		t.Fatalf("the injector exports no %s sample yet; is the name right?", name)
	}
	return harness.Sum(m, name, labels...)
}

func apiMessage(t *testing.T, err error) string {
	t.Helper()
	var apiErr *harness.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("want an API error, got %v", err)
	}
	return apiErr.Message
}

// TestInjection drives every admission scenario through the real apiserver with
// native sidecars (the apiserver validates restartPolicy Always on init containers).
func TestInjection(t *testing.T) {
	in := startInjector(t, catalogFor(t, true, map[string][]string{"*": {"helm"}}))
	c := env.cp.Client()
	ns := newNamespace(t, "argocd", enabledNS)
	waitActive(t, ns)

	t.Run("repo-server pod is injected as the golden says", func(t *testing.T) {
		stored := createStored(t, ns, loadPod(t, "repo-server-pod.yaml"))
		golden(t, "repo-server-pod.native.stored."+minorVersion()+".yaml", stableStoredPod(stored))
		inits, _ := containerNames(stored)
		// The library's helm image carries cmp-server (serverPath): no copy.
		if want := []string{"copyutil", "cmp-helm", keys.SocketsContainer}; !slices.Equal(inits, want) {
			t.Errorf("init containers = %v, want %v", inits, want)
		}
		if rp := stored.Spec.InitContainers[slices.Index(inits, "cmp-helm")].RestartPolicy; rp == nil || *rp != corev1.ContainerRestartPolicyAlways {
			t.Errorf("cmp-helm restartPolicy = %v, want Always (native sidecar)", rp)
		}
		if st := status(t, stored); st.Revision != "e2e" || strings.Join(st.Plugins, ",") != "helm" {
			t.Errorf("status = %+v", st)
		}
	})

	t.Run("unlabelled pod is untouched and the webhook is not called", func(t *testing.T) {
		before := metric(t, in, metricRequests)
		got, err := c.CreatePod(ns, loadPod(t, "plain-pod.yaml"), false)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := got.Annotations[keys.StatusAnnotation]; ok || len(got.Spec.InitContainers) != 0 || len(got.Spec.Containers) != 1 {
			t.Errorf("unlabelled pod was changed: %v", got.Spec)
		}
		if after := metric(t, in, metricRequests); after != before {
			t.Errorf("webhook called for an unlabelled pod: requests %v → %v", before, after)
		}
	})

	t.Run("labelled pod in an unlabelled namespace is untouched and the webhook is not called", func(t *testing.T) {
		plainNS := newNamespace(t, "other", nil)
		before := metric(t, in, metricRequests)
		got, err := c.CreatePod(plainNS, loadPod(t, "repo-server-pod.yaml"), false)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := got.Annotations[keys.StatusAnnotation]; ok || len(got.Spec.InitContainers) != 1 {
			t.Errorf("pod in an unlabelled namespace was changed")
		}
		if after := metric(t, in, metricRequests); after != before {
			t.Errorf("webhook called for an unlabelled namespace: requests %v → %v", before, after)
		}
	})

	denials := []struct {
		name, annotation, image string
		want                    []string
	}{
		{name: "plugin not enabled in the namespace", annotation: "helm, kustomize", want: []string{`"kustomize"`, "not enabled", ns}},
		{name: "unknown plugin", annotation: "helm, tanka-nope", want: []string{`"tanka-nope"`, "catalog"}},
		{name: "disallowed image", annotation: "helm", image: "evil.example.com/helm:latest", want: []string{"evil.example.com/helm:latest", "not allowed"}},
		{name: "malformed annotation", annotation: "helm,,Bad_Name!", want: []string{"Bad_Name!"}},
	}
	for _, d := range denials {
		t.Run("denied: "+d.name, func(t *testing.T) {
			pod := loadPod(t, "repo-server-pod.yaml")
			pod.Name = "denied"
			pod.Annotations[keys.PluginsAnnotation] = d.annotation
			if d.image != "" {
				pod.Annotations[keys.ImageAnnotationPrefix+"helm"] = d.image
			}
			_, err := c.CreatePod(ns, pod, false)
			if err == nil {
				t.Fatal("pod was admitted")
			}
			msg := apiMessage(t, err)
			t.Logf("as expected, the pod is denied; the user sees: %s", msg)
			for _, w := range d.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not name %q", msg, w)
				}
			}
			if _, err := c.GetPod(ns, "denied"); err == nil {
				t.Error("a denied pod was stored")
			}
		})
	}

	t.Run("server-side dry-run shows the mutation, stores and counts nothing", func(t *testing.T) {
		// A real injection first, so the counter exists and is known to move.
		counted := loadPod(t, "repo-server-pod.yaml")
		counted.Name = "counted"
		createStored(t, ns, counted)
		before := metric(t, in, metricInjected)
		pod := loadPod(t, "repo-server-pod.yaml")
		pod.Name = "dry"
		got, err := c.CreatePod(ns, pod, true)
		if err != nil {
			t.Fatal(err)
		}
		if st := status(t, got); len(st.Containers)+len(st.InitContainers) == 0 {
			t.Errorf("dry-run response carries no injection: %+v", st)
		}
		if _, err := c.GetPod(ns, "dry"); err == nil {
			t.Error("dry-run pod was stored")
		}
		if after := metric(t, in, metricInjected); after != before {
			t.Errorf("dry-run counted as an injection: %v → %v", before, after)
		}
	})

	t.Run("restricted Pod Security admits the injected pod", func(t *testing.T) {
		psaNS := newNamespace(t, "psa", map[string]string{
			keys.NamespaceEnabledLabel:           keys.EnabledValue,
			"pod-security.kubernetes.io/enforce": "restricted",
		})
		got, err := c.CreatePod(psaNS, loadPod(t, "repo-server-pod.yaml"), false)
		if err != nil {
			t.Fatalf("restricted namespace rejected the injected pod: %v", err)
		}
		status(t, got)
	})
}
