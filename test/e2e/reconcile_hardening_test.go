package e2e

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// hardeningLabel scopes each test's reconciler to the namespaces the test
// made: the suite's other namespaces, enabled or not, are not its business.
const hardeningLabel = "e2e.cmp-injector.io/hardening"

// hardeningScope is a fresh label value and the --namespace-selector that
// picks the enabled namespaces carrying it.
func hardeningScope() (value, flag string) {
	value = strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
	return value, "--namespace-selector=" + keys.NamespaceEnabledLabel + "=" + keys.EnabledValue + "," + hardeningLabel + "=" + value
}

// TestReconcilerCachesOnlyEnabledNamespaces is the attack run against the
// reconciler's memory: a user who may only create pods, in a namespace that
// is not enabled, creates pods labelled cmp-injector.io/inject=true with a
// 250 KiB annotation each. The reconciler (which used to cache every labelled
// pod of the cluster, whole, and was OOM-killed so) never caches them: its
// metrics count the one repo-server pod of the enabled namespace, after it
// has acted on a catalog change made after the flood. Disabling the
// namespace stops its watch (the API server sends the namespace's deletion to
// the selector's watch).
func TestReconcilerCachesOnlyEnabledNamespaces(t *testing.T) {
	// The attack run's size: 1,000 pods × 250 KiB took a cluster-wide
	// reconciler from 53 to 490 MB, past the chart's memory limit.
	const flood, workers = 1000, 8
	scope, selector := hardeningScope()
	leaseNS := newNamespace(t, "lease", nil)
	cat := map[string]any{}
	if err := yaml.Unmarshal(catalogFor(t, true, map[string][]string{"*": {"helm"}}), &cat); err != nil {
		t.Fatal(err)
	}
	ins := reconcilingInjectors(t, 1, leaseNS, mustYAML(t, cat), selector)
	ns := newNamespace(t, "scope", map[string]string{keys.NamespaceEnabledLabel: keys.EnabledValue, hardeningLabel: scope})
	waitActive(t, ns)
	repo := createStored(t, ns, loadPod(t, "repo-server-pod.yaml"))
	if _, ok := repo.Annotations[keys.StatusAnnotation]; !ok {
		t.Fatal("the repo-server pod was not injected")
	}
	cached := func() (pods, namespaces float64, m servingtest.Samples) {
		s, err := ins[0].Metrics()
		if err != nil {
			t.Fatal(err)
		}
		return s.Sum("cmp_injector_reconcile_cached_pods"), s.Sum("cmp_injector_reconcile_watched_namespaces"), s
	}
	err := harness.Eventually(30*time.Second, 50*time.Millisecond, func() (bool, error) {
		p, n, _ := cached()
		return p == 1 && n == 1, fmt.Errorf("cached pods %v, watched namespaces %v", p, n)
	})
	if err != nil {
		t.Fatal(err)
	}
	_, _, before := cached()

	// Everything about the flood's namespace matches the selector but the
	// enabled label.
	other := newNamespace(t, "flood", map[string]string{hardeningLabel: scope})
	editor := grantPodEditor(t, other, "pods")
	blob := strings.Repeat("x", 250<<10)
	floodPod := func(i int) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("flood-%d", i), Labels: map[string]string{keys.InjectLabel: keys.EnabledValue},
				Annotations: map[string]string{"attacker.example.com/blob": blob}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}},
		}
	}
	start := time.Now()
	// The first waits until the editor's RoleBinding is in force; the rest
	// go in parallel (t.Fatal belongs to this goroutine, so they report with
	// t.Errorf and stop).
	createAs(t, editor, other, floodPod(0))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := 1 + w; i < flood; i += workers {
				if _, err := editor.CreatePod(other, floodPod(i), false); err != nil {
					t.Errorf("creating flood-%d as %s: %v", i, harness.PodEditor, err)
					return
				}
			}
		})
	}
	wg.Wait()
	// Unscheduled pods go at once; the suite's later tests do not carry
	// 250 MB of them in the API server.
	t.Cleanup(func() { _ = env.cp.Client().Delete("/api/v1/namespaces/" + other + "/pods") })
	t.Logf("%d pods × 250 KiB created as %s in %s", flood, harness.PodEditor, time.Since(start).Round(time.Millisecond))
	// A catalog change after the flood: once the reconciler has written it
	// into the repo-server pod, a cluster-wide watch would have delivered
	// every flood pod before it.
	helm := cat["plugins"].(map[string]any)["helm"].(map[string]any)
	spec := helm["config"].(map[string]any)["inline"].(map[string]any)["spec"].(map[string]any)
	spec["init"] = map[string]any{"command": []string{"true"}}
	cat["revision"] = "after-flood"
	setCatalog(t, ins, cat)
	err = harness.Eventually(30*time.Second, 50*time.Millisecond, func() (bool, error) {
		p, err := env.cp.Client().GetPod(ns, repo.Name)
		if err != nil {
			return false, err
		}
		return status(t, p).Revision == "after-flood", fmt.Errorf("status %s", p.Annotations[keys.StatusAnnotation])
	})
	if err != nil {
		t.Fatal(err)
	}
	pods, namespaces, after := cached()
	if pods != 1 || namespaces != 1 {
		t.Errorf("after %d labelled pods of 250 KiB in a namespace that is not enabled: %v pods cached, %v namespaces watched; want 1 and 1",
			flood, pods, namespaces)
	}
	mib := func(s servingtest.Samples, name string) float64 { return s.Sum(name) / (1 << 20) }
	if limit := chartMemoryLimit(t); after.Sum("process_resident_memory_bytes") >= limit {
		t.Errorf("injector RSS %.0f MiB after the flood, at or over the chart's memory limit %.0f MiB",
			mib(after, "process_resident_memory_bytes"), limit/(1<<20))
	}
	t.Logf("flood of %d pods × 250 KiB (%d MiB) in namespace %s: cached pods %v; injector RSS %.0f → %.0f MiB, heap in use %.0f → %.0f MiB",
		flood, flood*250>>10, other, pods, mib(before, "process_resident_memory_bytes"), mib(after, "process_resident_memory_bytes"),
		mib(before, "go_memstats_heap_inuse_bytes"), mib(after, "go_memstats_heap_inuse_bytes"))

	t.Run("a namespace no longer enabled is no longer watched", func(t *testing.T) {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, keys.NamespaceEnabledLabel)
		if err := env.cp.Client().MergePatch("/api/v1/namespaces/"+ns, []byte(patch)); err != nil {
			t.Fatal(err)
		}
		err := harness.Eventually(30*time.Second, 50*time.Millisecond, func() (bool, error) {
			p, n, _ := cached()
			return p == 0 && n == 0, fmt.Errorf("cached pods %v, watched namespaces %v", p, n)
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// TestRolloutRefusesUnprovenOwner is the attack run against rollout: auto. A
// user who may only create pods creates a pod that opts in, with the labels
// and controller reference of a pod of victim-db (a Deployment that never
// asked for plugins). Bound to a node, it ranks above victim-db's unbound pod,
// so victim-db's ReplicaSet keeps it and deletes its own. The webhook injects
// it; the catalog changes so that it is stale. The reconciler restarts the
// repo-server Deployment, whose pods it injected, but not victim-db: its
// ReplicaSet selects the pod and is current, yet victim-db's template does
// not opt in. The pod gets a Warning OwnerUnproven; victim-db gets no Event
// from cmp-injector, and doctor's hint for the pod restarts nothing.
func TestRolloutRefusesUnprovenOwner(t *testing.T) {
	scope, selector := hardeningScope()
	leaseNS := newNamespace(t, "lease", nil)
	cat := map[string]any{}
	if err := yaml.Unmarshal(catalogFor(t, true, map[string][]string{"*": {"helm"}}), &cat); err != nil {
		t.Fatal(err)
	}
	ins := reconcilingInjectors(t, 1, leaseNS, mustYAML(t, cat), selector, "--rollout=auto")
	ns := newNamespace(t, "owner", map[string]string{keys.NamespaceEnabledLabel: keys.EnabledValue, hardeningLabel: scope})
	waitActive(t, ns)
	c := env.cp.Client()
	repoDep, _ := repoServerDeployment(t, ns)

	one := int32(1)
	victim := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "victim-db"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "victim-db"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "victim-db"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "postgres:16"}}}}},
	}
	if err := c.Do(http.MethodPost, "/apis/apps/v1/namespaces/"+ns+"/deployments", nil, victim, victim); err != nil {
		t.Fatal(err)
	}
	var victimPod corev1.Pod
	err := harness.Eventually(60*time.Second, 100*time.Millisecond, func() (bool, error) {
		pods, err := c.ListPods(ns, "app=victim-db")
		if err != nil || len(pods) != 1 || metav1.GetControllerOf(&pods[0]) == nil {
			return false, fmt.Errorf("%d victim-db pods: %w", len(pods), err)
		}
		victimPod = pods[0]
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}

	editor := grantPodEditor(t, ns, "pods")
	evil := loadPod(t, "repo-server-pod.yaml")
	evil.Name = "evil"
	evil.Labels = maps.Clone(victimPod.Labels)
	evil.Labels[keys.InjectLabel] = keys.EnabledValue
	ref := *metav1.GetControllerOf(&victimPod)
	ref.BlockOwnerDeletion = nil
	evil.OwnerReferences = []metav1.OwnerReference{ref}
	evil.Spec.NodeName = "node-of-nowhere"
	stored := createAs(t, editor, ns, evil)
	if _, ok := stored.Annotations[keys.StatusAnnotation]; !ok {
		t.Fatalf("the attacker's pod was not injected: %v", stored.Annotations)
	}
	t.Logf("attacker's pod claims ReplicaSet %s (UID %s) with labels %v", ref.Name, ref.UID, evil.Labels)

	helm := cat["plugins"].(map[string]any)["helm"].(map[string]any)
	helm["image"] = "alpine/helm:3.17.0"
	cat["revision"] = "hardening-image"
	setCatalog(t, ins, cat)
	err = harness.Eventually(60*time.Second, 50*time.Millisecond, func() (bool, error) {
		var d appsv1.Deployment
		if err := c.Get("/apis/apps/v1/namespaces/"+ns+"/deployments/"+repoDep.Name, &d); err != nil {
			return false, err
		}
		got := d.Annotations[keys.RolloutAnnotation]
		return got == "hardening-image", fmt.Errorf("repo-server annotation %s = %q", keys.RolloutAnnotation, got)
	})
	if err != nil {
		t.Fatal(err)
	}
	// The reconciler has decided about the attacker's pod once either its
	// Event is there or victim-db is restarted.
	var d appsv1.Deployment
	err = harness.Eventually(30*time.Second, 100*time.Millisecond, func() (bool, error) {
		if err := c.Get("/apis/apps/v1/namespaces/"+ns+"/deployments/victim-db", &d); err != nil {
			return false, err
		}
		if d.Generation != 1 {
			return true, nil
		}
		evs, err := c.Events(ns, "Pod", "evil")
		if err != nil {
			return false, err
		}
		for _, e := range evs {
			if e.Reason == "OwnerUnproven" {
				t.Logf("Event on the attacker's pod: %s: %s", e.Reason, e.Message)
				return true, nil
			}
		}
		if _, err := c.GetPod(ns, "evil"); err != nil {
			return false, fmt.Errorf("the attacker's pod: %w", err)
		}
		return false, errors.New("no decision yet")
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := d.Spec.Template.Annotations[keys.RestartedAtAnnotation]; ok || d.Generation != 1 {
		t.Errorf("victim-db was restarted on the pod's word: %s=%q, generation %d", keys.RestartedAtAnnotation, got, d.Generation)
	}
	evs, err := c.Events(ns, "Deployment", "victim-db")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		// The Deployment controller's own Events are its business.
		if e.Source.Component == "cmp-injector" || e.ReportingController == "cmp-injector" {
			t.Errorf("Event on victim-db: %s: %s", e.Reason, e.Message)
		}
	}
	if n, _ := metricSum(t, ins, "cmp_injector_reconcile_owner_unproven_total"); n != 1 {
		t.Errorf("owner_unproven_total %v, want 1", n)
	}
	pr, text, _ := doctorPod(t, ins[0], leaseNS, "evil")
	// The hint may quote the ReplicaSet the pod claims, as the pod's claim;
	// it never tells the admin to restart anything.
	if pr.OK || strings.Contains(pr.Hint, "rollout restart") || strings.Contains(pr.Hint, "deployment/victim-db") ||
		!strings.Contains(pr.Hint, "delete pod evil") || !strings.Contains(pr.Hint, "not proven") {
		t.Errorf("doctor on the attacker's pod: %+v\n%s", pr, text)
	}
	t.Logf("doctor's hint for the attacker's pod: %s", pr.Hint)
}

// chartMemoryLimit is the injector container's memory limit in the chart's
// default values, in bytes.
func chartMemoryLimit(t *testing.T) float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.repo, "charts", "cmp-injector", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Resources corev1.ResourceRequirements `json:"resources"`
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	limit, ok := values.Resources.Limits[corev1.ResourceMemory]
	if !ok {
		t.Fatal("the chart sets no memory limit for the injector")
	}
	return float64(limit.Value())
}
