package reconcile

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

const testCatalog = `
apiVersion: cmp-injector.io/v1alpha1
kind: PluginCatalog
revision: r1
defaults: {copyImage: cmp-server:1}
plugins:
  helm:
    image: alpine/helm:3.16.2
    allowedImages: ["alpine/helm:*"]
    config:
      inline: {kind: ConfigManagementPlugin, metadata: {name: helm}, spec: {generate: {command: [helm, template, .]}}}
namespaces:
  "*": [helm]
`

// catalogWith is the test catalog at revision rev with each old string
// replaced by new.
func catalogWith(t *testing.T, rev string, replacements ...string) *catalog.Catalog {
	t.Helper()
	y := strings.Replace(testCatalog, "revision: r1", "revision: "+rev, 1)
	for i := 0; i < len(replacements); i += 2 {
		if !strings.Contains(y, replacements[i]) {
			t.Fatalf("test catalog has no %q", replacements[i])
		}
		y = strings.Replace(y, replacements[i], replacements[i+1], 1)
	}
	c, err := catalog.Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Catalogs: r1; r2 changes helm's config only (live); r3 changes its image
// (stale).
func catR1(t *testing.T) *catalog.Catalog { return catalogWith(t, "r1") }
func catR2(t *testing.T) *catalog.Catalog {
	return catalogWith(t, "r2", "[helm, template, .]", "[helm, template, --include-crds, .]")
}
func catR3(t *testing.T) *catalog.Catalog {
	return catalogWith(t, "r3", "image: alpine/helm:3.16.2", "image: alpine/helm:3.17.0")
}

// injectedPod is pod (labels, owner and all) as the webhook stores it with
// catalog cat.
func injectedPod(t *testing.T, pod *corev1.Pod, cat *catalog.Catalog) *corev1.Pod {
	t.Helper()
	in := pod.DeepCopy()
	if in.Labels == nil {
		in.Labels = map[string]string{}
	}
	in.Labels[keys.InjectLabel] = keys.EnabledValue
	if in.Annotations == nil {
		in.Annotations = map[string]string{}
	}
	in.Annotations[keys.PluginsAnnotation] = "helm"
	in.Spec.Containers = []corev1.Container{{Name: keys.RepoServerContainer, Image: "quay.io/argoproj/argocd:v3.1.8"}}
	r := inject.Inject(in, in.Namespace, cat)
	if r.Decision != inject.Injected {
		t.Fatalf("not injected: %s", r.Message())
	}
	return r.Pod
}

// repoPod is a bare injected repo-server pod in ns.
func repoPod(t *testing.T, ns, name string, cat *catalog.Catalog) *corev1.Pod {
	return injectedPod(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, cat)
}

func namespace(name string, enabled bool) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/metadata.name": name}}}
	if enabled {
		ns.Labels[keys.NamespaceEnabledLabel] = keys.EnabledValue
	}
	return ns
}

// catalogVar is the catalog the reconciler reads, behind the lock the
// server's reloader would take.
type catalogVar struct {
	mu  sync.Mutex
	cat *catalog.Catalog
}

func (c *catalogVar) get() *catalog.Catalog { c.mu.Lock(); defer c.mu.Unlock(); return c.cat }

type testReconciler struct {
	*Reconciler
	reg *prometheus.Registry
	cat *catalogVar
}

func newTestReconciler(t *testing.T, client *fake.Clientset, lease string, cat *catalog.Catalog, rollout string) *testReconciler {
	t.Helper()
	reg := prometheus.NewRegistry()
	cv := &catalogVar{cat: cat}
	r, err := New(Options{Client: client, Catalog: cv.get, LeaseNamespace: "cmp-injector", LeaseName: lease, Identity: lease + "-0",
		Rollout: rollout, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return &testReconciler{Reconciler: r, reg: reg, cat: cv}
}

// lead runs the reconciler as the leader until the test ends.
func (r *testReconciler) lead(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Reconciler.lead(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// metric is the value of a counter or gauge (summed over its labels).
func (r *testReconciler) metric(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += value(m)
		}
	}
	return sum
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return 0
}

// eventually polls cond until it holds; the bound only keeps a broken test
// from hanging, it asserts nothing about speed.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	for range 3000 {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never happened; last: %s", what, last)
}

// events are the Events recorded about the object named kind/name.
func events(t *testing.T, client *fake.Clientset, ns, kind, name string) []corev1.Event {
	t.Helper()
	list, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name {
			out = append(out, e)
		}
	}
	return out
}

func eventReasons(evs []corev1.Event) string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Reason+": "+e.Message)
	}
	return strings.Join(out, "\n")
}

// patches counts the patches of resource the client received.
type patches struct {
	mu sync.Mutex
	n  map[string]int
}

func countPatches(client *fake.Clientset) *patches {
	p := &patches{n: map[string]int{}}
	client.PrependReactor("patch", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pa := a.(k8stesting.PatchAction)
		p.mu.Lock()
		p.n[a.GetResource().Resource+"/"+pa.GetName()]++
		p.mu.Unlock()
		return false, nil, nil
	})
	return p
}

func (p *patches) of(resource, name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[resource+"/"+name]
}

func getPod(t *testing.T, client *fake.Clientset, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLiveConfigReachesThePod: a config-only catalog change is written into
// the pod's annotation with the new revision and this release's mark.
func TestLiveConfigReachesThePod(t *testing.T) {
	pod := repoPod(t, "argocd", "repo-1", catR1(t))
	client := fake.NewClientset(namespace("argocd", true), pod)
	r := newTestReconciler(t, client, "release-a", catR2(t), RolloutOff)
	if d, err := inject.CheckDrift(pod, catR1(t)); err != nil || !d.Current() {
		t.Fatalf("the fixture pod is not current with its own catalog: %+v, %v", d, err)
	}
	r.lead(t)
	eventually(t, "the live config update", func() (bool, string) {
		p := getPod(t, client, "argocd", "repo-1")
		return strings.Contains(p.Annotations[keys.ConfigAnnotationPrefix+"helm"], "--include-crds"), fmt.Sprint(p.Annotations)
	})
	p := getPod(t, client, "argocd", "repo-1")
	if got := p.Annotations[keys.ReconcilerAnnotation]; got != "cmp-injector/release-a" {
		t.Errorf("mark %q, want cmp-injector/release-a", got)
	}
	if !strings.Contains(p.Annotations[keys.StatusAnnotation], `"revision":"r2"`) {
		t.Errorf("status %s", p.Annotations[keys.StatusAnnotation])
	}
	eventually(t, "the PluginConfigUpdated Event", func() (bool, string) {
		evs := events(t, client, "argocd", "Pod", "repo-1")
		return strings.Contains(eventReasons(evs), eventConfigUpdated), eventReasons(evs)
	})
}

// TestRolloutOnlyForProvenOwner: with rollout: auto, a stale pod that a
// user who may only create pods made, claiming victim-db's ReplicaSet (its
// labels and controller reference copied from a victim-db pod), restarts
// nothing and names no workload; the pod gets a Warning Event saying its owner
// could not be proven. The real repo-server Deployment's stale pod restarts
// it, with the Events on the Deployment.
func TestRolloutOnlyForProvenOwner(t *testing.T) {
	r1 := catR1(t)
	repo := newWorkload("argocd", "argocd-repo-server", true)
	victim := newWorkload("argocd", "victim-db", false)
	repoPod := injectedPod(t, repo.pod, r1)
	// The webhook injects the attacker's pod like any other that opts in.
	evil := victim.pod.DeepCopy()
	evil.Name = "evil"
	evil = injectedPod(t, evil, r1)
	client := fake.NewClientset(namespace("argocd", true), repo.dep, repo.rs, repoPod, victim.dep, victim.rs, evil)
	count := countPatches(client)
	r := newTestReconciler(t, client, "release-a", catR3(t), RolloutAuto)
	r.lead(t)

	// Either way, the reconciler has decided about the attacker's pod once
	// its Event is there or victim-db is patched.
	eventually(t, "a decision about the attacker's pod", func() (bool, string) {
		evs := events(t, client, "argocd", "Pod", "evil")
		return strings.Contains(eventReasons(evs), eventOwnerUnproven) || count.of("deployments", "victim-db") > 0, eventReasons(evs)
	})
	eventually(t, "the repo-server's restart", func() (bool, string) {
		d, err := client.AppsV1().Deployments("argocd").Get(context.Background(), repo.dep.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return d.Annotations[keys.RolloutAnnotation] == "r3" && d.Spec.Template.Annotations[keys.RestartedAtAnnotation] != "",
			fmt.Sprint(d.Annotations, d.Spec.Template.Annotations)
	})
	eventually(t, "the rollout Event on the repo-server Deployment", func() (bool, string) {
		evs := events(t, client, "argocd", "Deployment", repo.dep.Name)
		return strings.Contains(eventReasons(evs), eventRollout), eventReasons(evs)
	})
	if n := count.of("deployments", "victim-db"); n != 0 {
		t.Errorf("victim-db was patched %d times", n)
	}
	if evs := events(t, client, "argocd", "Deployment", "victim-db"); len(evs) != 0 {
		t.Errorf("Events name victim-db:\n%s", eventReasons(evs))
	}
	evs := events(t, client, "argocd", "Pod", "evil")
	if msg := eventReasons(evs); strings.Contains(msg, "victim-db\"") || !strings.Contains(msg, "does not opt its pods in") {
		t.Errorf("the pod's Events: %s", msg)
	}
	if got := r.metric(t, "cmp_injector_reconcile_owner_unproven_total"); got != 1 {
		t.Errorf("owner_unproven_total %v, want 1", got)
	}
	if got := r.metric(t, "cmp_injector_reconcile_rollouts_total"); got != 1 {
		t.Errorf("rollouts_total %v, want 1", got)
	}
	t.Logf("attacker's pod: %s", eventReasons(evs))
}

// TestRolloutSurvivesAnOperator: the restart is kubectl's restartedAt, which
// argocd-operator keeps in the pod template; an operator that strips our own
// annotations (the revision mark on the Deployment) does not make the
// reconciler restart the Deployment again for the same revision.
func TestRolloutSurvivesAnOperator(t *testing.T) {
	r1 := catR1(t)
	repo := newWorkload("argocd", "argocd-repo-server", true)
	pod := injectedPod(t, repo.pod, r1)
	client := fake.NewClientset(namespace("argocd", true), repo.dep, repo.rs, pod)
	count := countPatches(client)
	r := newTestReconciler(t, client, "release-a", catR3(t), RolloutAuto)
	// The pod is synced directly, without leading (whose loop would roll too).
	r.recorder = record.NewFakeRecorder(10)
	d, err := inject.CheckDrift(pod, catR3(t))
	if err != nil || len(d.Stale) == 0 {
		t.Fatalf("the fixture is not stale under r3: %+v, %v", d, err)
	}
	ctx := context.Background()
	if err := r.sync(ctx, pod); err != nil {
		t.Fatal(err)
	}
	dep, err := client.AppsV1().Deployments("argocd").Get(ctx, repo.dep.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dep.Spec.Template.Annotations[keys.RestartedAtAnnotation] == "" || dep.Annotations[keys.RolloutAnnotation] != "r3" {
		t.Fatalf("restart: template %v, metadata %v", dep.Spec.Template.Annotations, dep.Annotations)
	}
	if _, ok := dep.Spec.Template.Annotations[keys.RolloutAnnotation]; ok {
		t.Errorf("the template carries %s, which an operator strips (undoing the rollout)", keys.RolloutAnnotation)
	}
	// The operator's next reconcile keeps *kubernetes.io* keys only.
	delete(dep.Annotations, keys.RolloutAnnotation)
	if _, err := client.AppsV1().Deployments("argocd").Update(ctx, dep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.sync(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if n := count.of("deployments", repo.dep.Name); n != 1 {
		t.Errorf("the Deployment was patched %d times for one revision, want 1", n)
	}
}

// TestOldPodsOfARolloutAreNoSuspects: once the reconciler has restarted a
// Deployment, its pods belong to a ReplicaSet the rollout replaces. One of
// them reconciled again (any change to it, its status as it terminates) is
// not a pod with an unproven owner: no Warning, no count, no second restart.
func TestOldPodsOfARolloutAreNoSuspects(t *testing.T) {
	repo := newWorkload("argocd", "argocd-repo-server", true)
	pod := injectedPod(t, repo.pod, catR1(t))
	client := fake.NewClientset(namespace("argocd", true), repo.dep, repo.rs, pod)
	count := countPatches(client)
	r := newTestReconciler(t, client, "release-a", catR3(t), RolloutAuto)
	rec := record.NewFakeRecorder(20)
	r.recorder = rec
	ctx := context.Background()
	if err := r.sync(ctx, pod); err != nil {
		t.Fatal(err)
	}
	dep, err := client.AppsV1().Deployments("argocd").Get(ctx, repo.dep.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dep.Spec.Template.Annotations[keys.RestartedAtAnnotation] == "" {
		t.Fatalf("not restarted: %v", dep.Spec.Template.Annotations)
	}
	// What the Deployment controller does next: a ReplicaSet for the new
	// template becomes the current one, with the next revision.
	next := repo.rs.DeepCopy()
	next.Name, next.UID, next.ResourceVersion = repo.dep.Name+"-def", "rs-def-uid", ""
	next.Annotations = map[string]string{keys.DeploymentRevisionAnnotation: "3"}
	next.Spec.Template = *dep.Spec.Template.DeepCopy()
	next.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "def"
	if _, err := client.AppsV1().ReplicaSets("argocd").Create(ctx, next, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dep.Annotations[keys.DeploymentRevisionAnnotation] = "3"
	if _, err := client.AppsV1().Deployments("argocd").Update(ctx, dep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.sync(ctx, getPod(t, client, "argocd", pod.Name)); err != nil {
		t.Fatal(err)
	}
	close(rec.Events)
	for e := range rec.Events {
		if strings.Contains(e, eventOwnerUnproven) {
			t.Errorf("an old pod of the rollout is reported: %s", e)
		}
	}
	if got := r.metric(t, "cmp_injector_reconcile_owner_unproven_total"); got != 0 {
		t.Errorf("owner_unproven_total %v, want 0", got)
	}
	if n := count.of("deployments", repo.dep.Name); n != 1 {
		t.Errorf("the Deployment was patched %d times, want 1", n)
	}
}
