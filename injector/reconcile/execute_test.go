package reconcile

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// The executor's tests drive sync (plan and execute one pod) against the
// fake clientset, without leading, and read what it wrote, the Events it
// recorded and its metrics.

// syncing is a reconciler whose Events go to a FakeRecorder.
func syncing(t *testing.T, client *fake.Clientset, rollout string) (*testReconciler, *record.FakeRecorder) {
	t.Helper()
	r := newTestReconciler(t, client, "release-a", catR3(t), rollout)
	rec := record.NewFakeRecorder(100)
	r.recorder = rec
	return r, rec
}

func drain(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// TestExecuteStopsAtAFailedWrite: a pod patch the API refuses is counted,
// returned for a retry, and nothing after it (Events, the restart) happens;
// once the API takes it, the pod is patched, reported and restarted once.
func TestExecuteStopsAtAFailedWrite(t *testing.T) {
	repo := newWorkload("argocd", "argocd-repo-server", true)
	pod := injectedPod(t, repo.pod, catR1(t))
	client := fake.NewClientset(repo.dep, repo.rs, pod)
	var refuse atomic.Bool
	refuse.Store(true)
	client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refuse.Load() {
			return true, nil, apierrors.NewConflict(corev1.Resource("pods"), pod.Name, errors.New("changed meanwhile"))
		}
		return false, nil, nil
	})
	count := countPatches(client)
	r, rec := syncing(t, client, RolloutAuto)
	ctx := context.Background()
	if err := r.sync(ctx, pod); !apierrors.IsConflict(err) {
		t.Fatalf("refused patch: %v", err)
	}
	if evs := drain(rec); len(evs) != 0 || count.of("deployments", repo.dep.Name) != 0 {
		t.Errorf("after a failed patch: Events %v, %d restarts", evs, count.of("deployments", repo.dep.Name))
	}
	if got := r.metric(t, "cmp_injector_reconcile_patches_total"); got != 1 {
		t.Errorf("patches_total %v, want 1 (error)", got)
	}
	if got := r.metric(t, "cmp_injector_stale_pods"); got != 1 {
		t.Errorf("stale_pods %v, want 1", got)
	}
	refuse.Store(false)
	if err := r.sync(ctx, pod); err != nil {
		t.Fatal(err)
	}
	evs := strings.Join(drain(rec), "\n")
	for _, want := range []string{"Warning StalePlugins not current", "Warning StalePlugins pod " + pod.Name, "Normal PluginRollout restarting"} {
		if !strings.Contains(evs, want) {
			t.Errorf("no %q in\n%s", want, evs)
		}
	}
	if got := r.metric(t, "cmp_injector_reconcile_rollouts_total"); got != 1 {
		t.Errorf("rollouts_total %v", got)
	}
}

// TestExecuteRestartFailure: a Deployment patch the API refuses is an
// error and is not remembered, so the next sync restarts it.
func TestExecuteRestartFailure(t *testing.T) {
	repo := newWorkload("argocd", "argocd-repo-server", true)
	pod := staleRecorded(t, injectedPod(t, repo.pod, catR1(t)), catR3(t))
	client := fake.NewClientset(repo.dep, repo.rs, pod)
	var refuse atomic.Bool
	refuse.Store(true)
	client.PrependReactor("patch", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refuse.Load() {
			return true, nil, apierrors.NewServiceUnavailable("etcd is down")
		}
		return false, nil, nil
	})
	r, rec := syncing(t, client, RolloutAuto)
	ctx := context.Background()
	if err := r.sync(ctx, pod); err == nil || !strings.Contains(err.Error(), "restarting Deployment argocd-repo-server") {
		t.Fatalf("refused restart: %v", err)
	}
	if evs := drain(rec); len(evs) != 0 {
		t.Errorf("Events after a failed restart: %v", evs)
	}
	refuse.Store(false)
	if err := r.sync(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := r.sync(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if got := r.metric(t, "cmp_injector_reconcile_rollouts_total"); got != 1 {
		t.Errorf("rollouts_total %v, want 1", got)
	}
	if evs := drain(rec); len(evs) != 1 || !strings.Contains(evs[0], eventRollout) {
		t.Errorf("Events %v", evs)
	}
}

// TestExecuteReportsUnprovenOnce: the attacker's pod is reported once per
// reason; forgetting the pod (it is gone) forgets that too.
func TestExecuteReportsUnprovenOnce(t *testing.T) {
	victim := newWorkload("argocd", "victim-db", false)
	evil := victim.pod.DeepCopy()
	evil.Name = "evil"
	evil = staleRecorded(t, injectedPod(t, evil, catR1(t)), catR3(t))
	client := fake.NewClientset(victim.dep, victim.rs, evil)
	r, rec := syncing(t, client, RolloutAuto)
	ctx := context.Background()
	for range 3 {
		if err := r.sync(ctx, evil); err != nil {
			t.Fatal(err)
		}
	}
	if evs := drain(rec); len(evs) != 1 || !strings.Contains(evs[0], eventOwnerUnproven) || strings.Contains(evs[0], "victim-db\"") {
		t.Errorf("Events %v", evs)
	}
	r.forget("argocd/evil")
	if err := r.sync(ctx, evil); err != nil {
		t.Fatal(err)
	}
	if got := r.metric(t, "cmp_injector_reconcile_owner_unproven_total"); got != 2 {
		t.Errorf("owner_unproven_total %v, want 2 (once, and once after forgetting)", got)
	}
}

// TestExecuteLeavesOthersAlone: a pod the webhook did not inject and one
// with an unreadable status are never written to, and the gauge forgets
// them; no catalog means nothing is done.
func TestExecuteLeavesOthersAlone(t *testing.T) {
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "plain"}}
	broken := repoPod(t, "argocd", "broken", catR1(t))
	broken.Annotations[keys.StatusAnnotation] = "{"
	stale := repoPod(t, "argocd", "stale", catR1(t))
	client := fake.NewClientset(plain, broken, stale)
	count := countPatches(client)
	r, rec := syncing(t, client, RolloutAuto)
	ctx := context.Background()
	r.cat.cat = nil
	if err := r.sync(ctx, stale); err != nil || count.of("pods", "stale") != 0 {
		t.Fatalf("without a catalog: %v, %d patches", err, count.of("pods", "stale"))
	}
	r.cat.cat = catR3(t)
	for _, p := range []*corev1.Pod{plain, broken} {
		if err := r.sync(ctx, p); err != nil {
			t.Fatal(err)
		}
		if n := count.of("pods", p.Name); n != 0 {
			t.Errorf("%s patched %d times", p.Name, n)
		}
	}
	if evs := drain(rec); len(evs) != 0 {
		t.Errorf("Events %v", evs)
	}
	if err := r.sync(ctx, stale); err != nil {
		t.Fatal(err)
	}
	if got := r.metric(t, "cmp_injector_stale_pods"); got != 1 {
		t.Errorf("stale_pods %v, want 1", got)
	}
	gone := stale.DeepCopy()
	gone.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	if err := r.sync(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if got := r.metric(t, "cmp_injector_stale_pods"); got != 0 {
		t.Errorf("stale_pods %v after the pod went, want 0", got)
	}
}

// appsElsewhere is the fake clientset with its apps/v1 client pointed at a
// loopback server instead.
type appsElsewhere struct {
	*fake.Clientset
	apps appsv1client.AppsV1Interface
}

func (c appsElsewhere) AppsV1() appsv1client.AppsV1Interface { return c.apps }

// TestLosingTheLeaseCancelsTheOwnerLookup: the owner lookup of a stale pod
// runs on the term's context, so when the leader can no longer renew its
// Lease the lookup in flight is cancelled and the term ends. The ReplicaSet
// is served by a loopback server that answers only when the request is
// cancelled (or the test ends): an owner lookup on a context of its own
// (context.Background(), as it once was) would hold the worker, and the
// term, until then.
func TestLosingTheLeaseCancelsTheOwnerLookup(t *testing.T) {
	arrived, cancelled, release := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !strings.Contains(req.URL.Path, "/replicasets/") {
			http.NotFound(w, req)
			return
		}
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-req.Context().Done():
			select {
			case cancelled <- struct{}{}:
			default:
			}
		case <-release:
			http.Error(w, "test over", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	apps, err := appsv1client.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}

	repo := newWorkload("argocd", "argocd-repo-server", true)
	pod := staleRecorded(t, injectedPod(t, repo.pod, catR1(t)), catR3(t))
	fc := fake.NewClientset(namespace("argocd", true), pod)
	var lost atomic.Bool
	fc.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if lost.Load() {
			return true, nil, apierrors.NewServiceUnavailable("the API server is unreachable")
		}
		return false, nil, nil
	})
	r := newTestReconciler(t, fc, "release-a", catR3(t), RolloutAuto)
	r.opts.Client = appsElsewhere{Clientset: fc, apps: apps}
	r.opts.LeaseDuration, r.opts.RenewDeadline, r.opts.RetryPeriod = 2*time.Second, time.Second, 100*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	eventually(t, "the owner lookup reaching the API", func() (bool, string) {
		select {
		case <-arrived:
			return true, ""
		default:
			return false, "no request yet"
		}
	})
	lost.Store(true)
	eventually(t, "the lookup cancelled with the term", func() (bool, string) {
		select {
		case <-cancelled:
			return true, ""
		default:
			return false, "still waiting on the ReplicaSet"
		}
	})
	eventually(t, "the term over", func() (bool, string) {
		return r.metric(t, "cmp_injector_reconcile_leader") == 0, "still leading"
	})
}

// TestRestartsRememberOneRevision: the memory of restarts (which stands in
// for the Deployment's mark where an operator strips it) holds the
// Deployments restarted for the newest revision only, so it does not grow
// with every Deployment ever restarted; each is remembered for its revision.
func TestRestartsRememberOneRevision(t *testing.T) {
	a, b, c := newWorkload("argocd", "repo-a", true), newWorkload("team-b", "repo-b", true), newWorkload("team-c", "repo-c", true)
	client := fake.NewClientset(a.dep, b.dep, c.dep)
	r, _ := syncing(t, client, RolloutAuto)
	ctx := context.Background()
	for _, s := range []struct {
		w   workload
		rev string
	}{{a, "r1"}, {b, "r1"}, {a, "r2"}, {c, "r2"}} {
		if err := r.restart(ctx, &restart{Namespace: s.w.dep.Namespace, Name: s.w.dep.Name, UID: s.w.dep.UID, Revision: s.rev, Body: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{string(a.dep.UID): "r2", string(c.dep.UID): "r2"}
	got := map[string]string{}
	for uid := range r.rolled {
		got[string(uid)] = r.rolledRev
	}
	if !maps.Equal(got, want) {
		t.Errorf("remembered restarts %v, want %v (repo-b's r1 restart is superseded by r2)", got, want)
	}
}

// TestServerSourceChangeRolls: a catalog change that gives every plugin of
// a running pod serverPath (or takes it away from one) is stale: the copy
// init container would go (or come) only with a new pod. It is counted
// under the copy container and, with rollout: auto, the Deployment restarts.
func TestServerSourceChangeRolls(t *testing.T) {
	copied := catR1(t)
	fromImages := catalogWith(t, "r4", "image: alpine/helm:3.16.2", "image: alpine/helm:3.16.2\n    serverPath: /usr/local/bin/cmp-server")
	for _, tc := range []struct {
		name          string
		injected, now *catalog.Catalog
		event         string
	}{
		{"now from images", copied, fromImages, "a new pod runs each image's own and has no copy init container"},
		{"now copied", fromImages, copied, "the catalog has no serverPath for helm, so a new pod has it copied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := newWorkload("argocd", "argocd-repo-server", true)
			pod := injectedPod(t, repo.pod, tc.injected)
			client := fake.NewClientset(repo.dep, repo.rs, pod)
			count := countPatches(client)
			r := newTestReconciler(t, client, "release-a", tc.now, RolloutAuto)
			rec := record.NewFakeRecorder(100)
			r.recorder = rec
			if err := r.sync(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			if evs := strings.Join(drain(rec), "\n"); !strings.Contains(evs, "Warning StalePlugins") || !strings.Contains(evs, tc.event) {
				t.Errorf("Events\n%s\nwant StalePlugins saying %q", evs, tc.event)
			}
			if n := count.of("deployments", repo.dep.Name); n != 1 {
				t.Errorf("%d restarts of the Deployment, want 1", n)
			}
			if got := r.labelled(t, "cmp_injector_stale_pods", map[string]string{"plugin": keys.CopyInitContainer, "reason": string(inject.StaleServerSource)}); got != 1 {
				t.Errorf("stale_pods{plugin=%s,reason=server_source} %v, want 1", keys.CopyInitContainer, got)
			}
		})
	}
}

// labelled is the value of the series of metric name with exactly labels.
func (r *testReconciler) labelled(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if maps.Equal(got, labels) {
				return value(m)
			}
		}
	}
	return 0
}
