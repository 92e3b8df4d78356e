package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	goruntime "runtime"
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// bigAnnotation is the attack run's: 250 KiB on each pod.
const bigAnnotation = "attacker.example.com/blob"

var blob = strings.Repeat("x", 250<<10)

// TestStripPod: the cache keeps what CheckDrift and the ownership proof read
// and drops the rest; the decisions on a stripped pod are those on the pod.
func TestStripPod(t *testing.T) {
	r1 := catR1(t)
	pod := repoPod(t, "argocd", "repo-1", r1)
	pod.Labels["app"] = "repo"
	pod.OwnerReferences = controllerRef("apps/v1", "ReplicaSet", "repo-abc", "rs-uid")
	pod.Annotations[bigAnnotation] = blob
	pod.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = `{"big":"json"}`
	pod.Annotations[keys.ImageAnnotationPrefix+"helm"] = "alpine/helm:3.16.3"
	// Config and image annotations of a plugin the pod does not run are not
	// read by anything.
	pod.Annotations[keys.ConfigAnnotationPrefix+"other"] = blob
	pod.Annotations[keys.ImageAnnotationPrefix+"other"] = "x"
	pod.Annotations[keys.ReconcilerAnnotation] = "cmp-injector/release-a"
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{}}`)}}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Message: blob}
	pod.Spec.Tolerations = []corev1.Toleration{{Key: blob}}
	pod.Spec.NodeSelector = map[string]string{"big": blob}
	pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Args: []string{blob}}}}
	before := pod.DeepCopy()

	got, err := stripPod(pod.DeepCopy(), r1)
	if err != nil {
		t.Fatal(err)
	}
	s := got.(*corev1.Pod)
	want := map[string]string{}
	for _, k := range []string{keys.StatusAnnotation, keys.PluginsAnnotation, keys.ConfigAnnotationPrefix + "helm",
		keys.ImageAnnotationPrefix + "helm", keys.ReconcilerAnnotation} {
		want[k] = before.Annotations[k]
	}
	if !maps.Equal(s.Annotations, want) {
		t.Errorf("kept annotations %v, want the keys of %v", slicesOfKeys(s.Annotations), slicesOfKeys(want))
	}
	if s.ManagedFields != nil || s.Status.Phase != "" || s.Status.Message != "" {
		t.Errorf("managedFields %v, status %+v survived", s.ManagedFields, s.Status.Phase)
	}
	if s.Spec.Tolerations != nil || s.Spec.NodeSelector != nil || s.Spec.EphemeralContainers != nil {
		t.Error("spec fields the reconciler does not read survived")
	}
	if !maps.Equal(s.Labels, before.Labels) || len(s.OwnerReferences) != 1 || s.Name != before.Name || s.Namespace != before.Namespace {
		t.Errorf("identity, labels or owner lost: %+v", s.ObjectMeta)
	}
	for _, c := range []*catalog.Catalog{catR1(t), catR2(t), catR3(t)} {
		cat := c.Revision
		d1, err1 := inject.CheckDrift(before, c)
		d2, err2 := inject.CheckDrift(s, c)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !maps.Equal(d1.Patch(before), d2.Patch(s)) || d1.StaleMessage() != d2.StaleMessage() {
			t.Errorf("catalog %s: the stripped pod is judged differently: %v / %v vs %v / %v",
				cat, d1.Patch(before), d1.StaleMessage(), d2.Patch(s), d2.StaleMessage())
		}
	}
	if got, _ := stripPod("tombstone", r1); got != "tombstone" {
		t.Errorf("a non-pod changed: %v", got)
	}
}

func slicesOfKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestForeignPodsNeverReachTheCache is the attack run's in small: pods that
// opt in, each with a 250 KiB annotation, in a namespace that is not enabled,
// never reach the reconciler's cache, nor does such an annotation on a pod
// of an enabled namespace; the heap does not grow by what they carry.
func TestForeignPodsNeverReachTheCache(t *testing.T) {
	const foreign = 200
	r1 := catR1(t)
	objs := []runtime.Object{namespace("argocd", true), namespace("tenant", false)}
	for i := range 2 {
		p := repoPod(t, "argocd", fmt.Sprintf("repo-%d", i), r1)
		if i == 1 {
			p.Annotations[bigAnnotation] = blob
		}
		objs = append(objs, p)
	}
	for i := range foreign {
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: fmt.Sprintf("flood-%d", i),
			Labels: map[string]string{keys.InjectLabel: keys.EnabledValue}, Annotations: map[string]string{bigAnnotation: blob}}})
	}
	client := fake.NewClientset(objs...)
	decodeLists(client)
	// A live change, so that the reconciler's patches show it has seen the
	// enabled namespace's pods.
	r := newTestReconciler(t, client, "release-a", catR2(t), RolloutOff)
	heapBefore := heapInUse()
	r.lead(t)
	eventually(t, "both repo-server pods updated", func() (bool, string) {
		n := 0
		for i := range 2 {
			if p := getPod(t, client, "argocd", fmt.Sprintf("repo-%d", i)); strings.Contains(p.Annotations[keys.StatusAnnotation], `"revision":"r2"`) {
				n++
			}
		}
		return n == 2, fmt.Sprintf("%d updated", n)
	})
	heapAfter := heapInUse()

	if got := r.metric(t, "cmp_injector_reconcile_cached_pods"); got != 2 {
		t.Errorf("%v pods cached, want the 2 of the enabled namespace", got)
	}
	if got := r.metric(t, "cmp_injector_reconcile_watched_namespaces"); got != 1 {
		t.Errorf("%v namespaces watched, want 1", got)
	}
	for _, ns := range []string{"tenant", ""} {
		if _, ok := r.scopeNow().get(ns, "flood-0"); ok {
			t.Errorf("a pod of namespace %q is cached", ns)
		}
	}
	cached, ok := r.scopeNow().get("argocd", "repo-1")
	if !ok {
		t.Fatal("repo-1 is not cached")
	}
	if _, ok := cached.Annotations[bigAnnotation]; ok {
		t.Error("the 250 KiB annotation of a pod in an enabled namespace is cached")
	}
	payload := uint64(foreign+1) * uint64(len(blob))
	grew := int64(heapAfter) - int64(heapBefore)
	t.Logf("foreign annotations: %d MiB in the API; the reconciler's heap grew by %.1f MiB (cached pods %v)",
		payload>>20, float64(grew)/(1<<20), r.metric(t, "cmp_injector_reconcile_cached_pods"))
	// Holding the foreign pods would take all of payload; what a leader
	// needs besides is a few MiB.
	if grew > int64(payload/4) {
		t.Errorf("the heap grew by %d MiB for %d MiB of foreign annotations", grew>>20, payload>>20)
	}
}

// decodeLists makes the fake's pod lists fresh objects, as decoding an API
// server's answer makes them: the fake's own copies share their strings with
// what it stores, so a cache holding them would cost nothing on the heap.
func decodeLists(client *fake.Clientset) {
	react := k8stesting.ObjectReaction(client.Tracker())
	client.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		_, obj, err := react(a)
		if err != nil {
			return true, nil, err
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return true, nil, err
		}
		out := &corev1.PodList{}
		return true, out, json.Unmarshal(b, out)
	})
}

// scopeNow is the current term's scope.
func (r *Reconciler) scopeNow() *podScope {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.scope
}

// TestNamespaceScope: disabling a namespace stops its informer and forgets
// its pods (cache and stale gauge); enabling it again looks after them again.
func TestNamespaceScope(t *testing.T) {
	ns := namespace("argocd", true)
	client := fake.NewClientset(ns, repoPod(t, "argocd", "repo-1", catR1(t)))
	r := newTestReconciler(t, client, "release-a", catR3(t), RolloutOff)
	r.lead(t)
	state := func() (cached, watched, stale float64) {
		return r.metric(t, "cmp_injector_reconcile_cached_pods"), r.metric(t, "cmp_injector_reconcile_watched_namespaces"),
			r.metric(t, "cmp_injector_stale_pods")
	}
	want := func(what string, cached, watched, stale float64) {
		t.Helper()
		eventually(t, what, func() (bool, string) {
			c, w, s := state()
			return c == cached && w == watched && s == stale, fmt.Sprintf("cached %v, watched %v, stale %v", c, w, s)
		})
	}
	want("the stale pod looked after", 1, 1, 1)
	set := func(enabled bool) {
		n := namespace("argocd", enabled)
		if _, err := client.CoreV1().Namespaces().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	set(false)
	want("the namespace dropped", 0, 0, 0)
	set(true)
	want("the namespace watched again", 1, 1, 1)
	if err := client.CoreV1().Namespaces().Delete(context.Background(), "argocd", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want("the deleted namespace dropped", 0, 0, 0)
}

// TestOptedInPodsThatAreNotRepoServersCostTheirIdentity is issue 37's item 4
// in small: in an enabled namespace, 1,000 pods that opt in (the label) but
// are not repo-servers, each with a 256,000-byte plugins annotation, must not
// be held whole: the attack run took the leader from 47 to 640 MB. The
// transform is called as the informer calls it, on freshly decoded pods.
func TestOptedInPodsThatAreNotRepoServersCostTheirIdentity(t *testing.T) {
	const pods, annotationBytes = 1000, 256000
	r1 := catR1(t)
	transform := func(obj any) (any, error) { return stripPod(obj, r1) }
	kept := make([]any, 0, pods)
	before := heapInUse()
	for i := range pods {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: fmt.Sprintf("flood-%d", i), UID: "uid",
				Labels:      map[string]string{keys.InjectLabel: keys.EnabledValue},
				Annotations: map[string]string{keys.PluginsAnnotation: strings.Repeat("a", annotationBytes)}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx", Command: []string{"nginx"}}}},
		}
		got, err := transform(pod)
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, got)
	}
	after := heapInUse()
	grew := int64(after) - int64(before)
	t.Logf("%d opted-in pods that are not repo-servers, %d-byte plugins annotation each: %.1f MiB retained",
		pods, annotationBytes, float64(grew)/(1<<20))
	if grew > 20<<20 {
		t.Errorf("%d MiB retained for %d pods that are not repo-servers, want < 20 MiB", grew>>20, pods)
	}
	goruntime.KeepAlive(kept)
	s := kept[0].(*corev1.Pod)
	if s.Name != "flood-0" || s.Namespace != "argocd" || s.UID != "uid" || s.Labels != nil || s.Annotations != nil || len(s.Spec.Containers) != 0 {
		t.Errorf("a pod that is not a repo-server is cached as more than its identity: %+v", s)
	}
}

// TestOversizedPluginsAnnotation: a repo-server whose plugins annotation is
// longer than the webhook accepts is cached with one shared stand-in, not
// its bytes, and judged as the pod is; a pod with no catalog to recognise it
// by is cached as its identity.
func TestOversizedPluginsAnnotation(t *testing.T) {
	r1 := catR1(t)
	pod := repoPod(t, "argocd", "repo-1", r1)
	pod.Annotations[keys.PluginsAnnotation] = strings.Repeat("helm,", 60000)
	before := pod.DeepCopy()
	got, err := stripPod(pod.DeepCopy(), r1)
	if err != nil {
		t.Fatal(err)
	}
	s := got.(*corev1.Pod)
	if v := s.Annotations[keys.PluginsAnnotation]; len(v) != keys.MaxPluginsAnnotationBytes+1 || unsafe.StringData(v) != unsafe.StringData(oversizedPlugins) {
		t.Errorf("the oversized annotation is kept as %d bytes of its own", len(v))
	}
	for _, c := range []*catalog.Catalog{catR1(t), catR2(t), catR3(t)} {
		d1, err1 := inject.CheckDrift(before, c)
		d2, err2 := inject.CheckDrift(s, c)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !maps.Equal(d1.Patch(before), d2.Patch(s)) || d1.StaleMessage() != d2.StaleMessage() {
			t.Errorf("catalog %s: judged differently: %v / %v vs %v / %v", c.Revision, d1.Patch(before), d1.StaleMessage(), d2.Patch(s), d2.StaleMessage())
		}
	}
	if got, _ := stripPod(before.DeepCopy(), nil); got.(*corev1.Pod).Annotations != nil {
		t.Error("without a catalog a pod is cached with its annotations")
	}
}

// TestCatalogThatRecognisesOtherRepoServersRefillsTheCache: a pod cached as
// its identity by a catalog that does not take it for a repo-server is read
// again, whole, once the catalog does; a resync alone would replay the
// stripped copy for ever.
func TestCatalogThatRecognisesOtherRepoServersRefillsTheCache(t *testing.T) {
	client := fake.NewClientset(namespace("argocd", true), repoPod(t, "argocd", "repo-1", catR1(t)))
	blind := catalogWith(t, "r2", "defaults: {copyImage: cmp-server:1}",
		"defaults: {copyImage: cmp-server:1, repoServerContainer: {names: [not-this-one], programs: []}}")
	r := newTestReconciler(t, client, "release-a", blind, RolloutOff)
	r.lead(t)
	eventually(t, "repo-1 cached", func() (bool, string) {
		s := r.scopeNow()
		if s == nil {
			return false, "not leading"
		}
		_, ok := s.get("argocd", "repo-1")
		return ok, "not cached"
	})
	if p, _ := r.scopeNow().get("argocd", "repo-1"); p.Annotations != nil {
		t.Fatalf("a pod the catalog does not take for a repo-server is cached with annotations %v", slicesOfKeys(p.Annotations))
	}
	r.cat.mu.Lock()
	r.cat.cat = catR2(t)
	r.cat.mu.Unlock()
	r.CatalogChanged()
	eventually(t, "repo-1 updated to r2", func() (bool, string) {
		st := getPod(t, client, "argocd", "repo-1").Annotations[keys.StatusAnnotation]
		return strings.Contains(st, `"revision":"r2"`), st
	})
}
