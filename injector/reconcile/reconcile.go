// Package reconcile keeps injected repo-server pods current with the catalog:
// a changed inline plugin.yaml is written to the pod's config annotation (the
// kubelet re-projects it and the sidecar reloads it), anything a running pod
// cannot take makes it stale, which Events, a metric and the status annotation
// say. One replica acts at a time, chosen through a Lease.
//
// What it guarantees, and what it trusts: it caches only pods in enabled
// namespaces and only what it reads of them (scope.go); it restarts or names
// a workload only when the cluster proves the workload owns the pod
// (ownership.go); and it backs off from pods another release's reconciler
// patched (conflict.go).
package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// Rollout modes.
const (
	// RolloutOff leaves restarting stale pods to the admin.
	RolloutOff = "off"
	// RolloutAuto restarts the Deployment owning a stale pod by writing the
	// catalog revision into its pod template's annotations.
	RolloutAuto = "auto"
)

// Event reasons.
const (
	EventConfigUpdated = "PluginConfigUpdated"
	EventStale         = "StalePlugins"
	EventRollout       = "PluginRollout"
	// EventOwnerUnproven is a Warning on the pod: it is stale, rollout is
	// auto, and its owner could not be proven, so nothing is restarted.
	EventOwnerUnproven = "OwnerUnproven"
)

// Options configure a Reconciler.
type Options struct {
	Client  kubernetes.Interface
	Catalog func() *catalog.Catalog
	// Lease is where the replicas elect the one that acts.
	LeaseNamespace, LeaseName string
	// Identity names this replica in the Lease; it must differ between replicas.
	Identity                                  string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Resync re-checks every pod this often, whatever changed.
	Resync  time.Duration
	Rollout string
	// NamespaceSelector picks the namespaces to look after: the webhook's
	// namespaceSelector, as a label selector (default: the enabled label).
	NamespaceSelector string
	// ConflictBackoff is the first wait before taking back a pod another
	// release's reconciler patched; each later one doubles (default 10s).
	ConflictBackoff time.Duration
	Log             *zap.Logger
	// Registerer takes the reconciler's metrics.
	Registerer prometheus.Registerer
}

// Reconciler is the day-2 loop of `cmp-injector serve --reconcile`.
type Reconciler struct {
	opts     Options
	log      *zap.Logger
	metrics  *metrics
	recorder record.EventRecorder

	// self names this release in the pods it patches (the Lease's
	// namespace/name: every replica of a release shares it, two releases
	// never do).
	self string
	// nsSelector picks the enabled namespaces.
	nsSelector labels.Selector

	// leading is held by lead for its whole run: a new term starts only
	// once the previous one has stopped its workers.
	leading sync.Mutex
	mu      sync.Mutex
	// queue and scope exist while this replica leads.
	queue workqueue.TypedRateLimitingInterface[string]
	scope *podScope
	// stale is what each pod (namespace/name) lacks, for the gauge.
	stale map[string][]inject.Difference
	// conflicts is each pod's backoff from another release; unproven is the
	// reason last reported for a pod whose owner could not be proven, so it
	// is reported once per reason, not on every event of the pod.
	conflicts *conflicts
	unproven  map[string]string
	// rolled is the revision each Deployment (by UID) was last restarted
	// for (rollout: auto).
	rolled map[types.UID]string
}

// New checks the options and registers the metrics.
func New(o Options) (*Reconciler, error) {
	if o.Client == nil || o.Catalog == nil {
		return nil, errors.New("reconcile: a client and a catalog are required")
	}
	if o.LeaseNamespace == "" || o.LeaseName == "" || o.Identity == "" {
		return nil, errors.New("reconcile: the Lease namespace, name and this replica's identity are required")
	}
	switch o.Rollout {
	case "":
		o.Rollout = RolloutOff
	case RolloutOff, RolloutAuto:
	default:
		return nil, fmt.Errorf("reconcile: rollout %q: want %s or %s", o.Rollout, RolloutOff, RolloutAuto)
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = 15 * time.Second
	}
	if o.RenewDeadline <= 0 {
		o.RenewDeadline = 10 * time.Second
	}
	if o.RetryPeriod <= 0 {
		o.RetryPeriod = 2 * time.Second
	}
	if o.Resync <= 0 {
		o.Resync = 10 * time.Minute
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.NamespaceSelector == "" {
		o.NamespaceSelector = keys.NamespaceEnabledLabel + "=" + keys.EnabledValue
	}
	sel, err := labels.Parse(o.NamespaceSelector)
	if err != nil {
		return nil, fmt.Errorf("reconcile: namespace selector: %w", err)
	}
	if o.ConflictBackoff <= 0 {
		o.ConflictBackoff = defaultConflictBackoff
	}
	r := &Reconciler{opts: o, log: o.Log.Named("reconcile"), self: o.LeaseNamespace + "/" + o.LeaseName, nsSelector: sel,
		stale: map[string][]inject.Difference{}, conflicts: newConflicts(o.ConflictBackoff, maxConflictBackoff), unproven: map[string]string{}, rolled: map[types.UID]string{}}
	if r.metrics, err = newMetrics(o.Registerer, r.cached); err != nil {
		return nil, err
	}
	return r, nil
}

// cached is how many namespaces are watched and pods cached now.
func (r *Reconciler) cached() (namespaces, pods int) {
	r.mu.Lock()
	s := r.scope
	r.mu.Unlock()
	if s == nil {
		return 0, 0
	}
	return s.counts()
}

// CatalogChanged re-checks every injected pod; the server calls it when a new
// catalog is loaded.
func (r *Reconciler) CatalogChanged() {
	r.mu.Lock()
	q, s := r.queue, r.scope
	r.mu.Unlock()
	if q == nil {
		return
	}
	for _, key := range s.keys() {
		q.Add(key)
	}
}

// lead runs the informers and workers until ctx ends (leadership lost or the
// server stopping).
func (r *Reconciler) lead(ctx context.Context) {
	r.leading.Lock()
	defer r.leading.Unlock()
	r.log.Info("leading: reconciling injected pods", zap.String("identity", r.opts.Identity), zap.String("rollout", r.opts.Rollout))
	r.metrics.leader.Set(1)
	defer r.metrics.leader.Set(0)
	queue, end, ok := r.startTerm(ctx)
	if !ok {
		end()
		return
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r.next(ctx, queue) {
			}
		}()
	}
	<-ctx.Done()
	queue.ShutDown()
	wg.Wait()
	end()
	r.log.Info("stopped leading")
}

// startTerm starts what a leader needs, the Event recorder, the namespace
// informer and through it the pod informers, and returns the queue of pods to
// reconcile once the namespaces are listed; end stops it all. ok is false
// when ctx ended first.
func (r *Reconciler) startTerm(ctx context.Context) (_ workqueue.TypedRateLimitingInterface[string], end func(), ok bool) {
	ctx, cancel := context.WithCancel(ctx)
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: r.opts.Client.CoreV1().Events("")})
	r.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "cmp-injector"})

	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "cmp-injector-pods"})
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	scope := newPodScope(ctx, r.opts.Client, r.opts.Resync, cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, n any) { enqueue(n) }, DeleteFunc: enqueue,
	})
	// Only namespaces the selector picks are listed and watched; the
	// selector is checked here too, since a namespace that stops matching
	// reaches a watch as a deletion but may reach a resync as an update.
	nsFactory := informers.NewSharedInformerFactoryWithOptions(r.opts.Client, r.opts.Resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = r.opts.NamespaceSelector }),
		informers.WithTransform(stripNamespace))
	nsInformer := nsFactory.Core().V1().Namespaces().Informer()
	onNamespace := func(obj any) {
		ns, ok := obj.(*corev1.Namespace)
		if !ok {
			return
		}
		if r.nsSelector.Matches(labels.Set(ns.Labels)) {
			scope.watch(ns.Name)
			return
		}
		r.dropNamespace(scope, ns.Name)
	}
	_, _ = nsInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onNamespace,
		UpdateFunc: func(_, n any) { onNamespace(n) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if ns, ok := obj.(*corev1.Namespace); ok {
				r.dropNamespace(scope, ns.Name)
			}
		},
	})
	nsFactory.Start(ctx.Done())
	end = func() {
		cancel()
		queue.ShutDown()
		nsFactory.Shutdown()
		scope.stop()
		broadcaster.Shutdown()
		r.mu.Lock()
		r.queue, r.scope = nil, nil
		r.stale = map[string][]inject.Difference{}
		r.unproven = map[string]string{}
		r.mu.Unlock()
		r.conflicts.reset()
		// A follower reports no stale pods: summing over replicas counts each
		// pod once.
		r.metrics.stalePods.Reset()
	}
	r.mu.Lock()
	r.scope = scope
	r.mu.Unlock()
	if !cache.WaitForCacheSync(ctx.Done(), nsInformer.HasSynced) {
		return nil, end, false
	}
	r.mu.Lock()
	r.queue = queue
	r.mu.Unlock()
	r.CatalogChanged()
	return queue, end, true
}

// dropNamespace stops watching a namespace that is no longer enabled (or
// gone) and forgets what its pods were.
func (r *Reconciler) dropNamespace(scope *podScope, ns string) {
	if !scope.forget(ns) {
		return
	}
	r.mu.Lock()
	for key := range r.stale {
		if inNamespace(key, ns) {
			delete(r.stale, key)
		}
	}
	for key := range r.unproven {
		if inNamespace(key, ns) {
			delete(r.unproven, key)
		}
	}
	r.publishStaleLocked()
	r.mu.Unlock()
	r.conflicts.forgetNamespace(ns)
	r.log.Info("namespace no longer enabled: its pods are not looked after", zap.String("namespace", ns))
}

// next handles one queued pod; false once the queue is shut down.
func (r *Reconciler) next(ctx context.Context, q workqueue.TypedRateLimitingInterface[string]) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	err := r.reconcile(ctx, key)
	var wait *backoffError
	if errors.As(err, &wait) {
		q.Forget(key)
		q.AddAfter(key, wait.after)
		return true
	}
	if err != nil {
		r.log.Warn("reconcile failed; retrying", zap.String("pod", key), zap.Error(err))
		q.AddRateLimited(key)
		return true
	}
	q.Forget(key)
	return true
}

// reconcile brings one pod current, or records and reports that it is stale.
func (r *Reconciler) reconcile(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	r.mu.Lock()
	scope := r.scope
	r.mu.Unlock()
	if scope == nil {
		return nil
	}
	// Only pods of enabled namespaces are cached: a pod that is not is gone,
	// or in a namespace that is not (or no longer) one the injector injects in.
	pod, ok := scope.get(ns, name)
	if !ok {
		r.forget(key)
		return nil
	}
	// Never touch a pod the injector did not inject or one on its way out.
	if _, ok := pod.Annotations[keys.StatusAnnotation]; !ok || pod.DeletionTimestamp != nil {
		r.forget(key)
		return nil
	}
	cat := r.opts.Catalog()
	if cat == nil {
		return nil
	}
	d, err := inject.CheckDrift(pod, cat)
	if err != nil {
		r.log.Warn("injected pod has an unreadable status; leaving it alone", zap.String("pod", key), zap.Error(err))
		r.setStale(key, nil)
		return nil
	}
	r.setStale(key, d.Stale)
	patch := d.Patch(pod)
	// Another release's mark matters only when this one would act on the
	// pod: patch it, or (rollout: auto) restart its Deployment.
	wouldAct := patch != nil || (r.opts.Rollout == RolloutAuto && len(d.Stale) > 0)
	if other := otherWriter(pod, r.self); other != "" && wouldAct {
		if wait, started := r.conflicts.hold(key, time.Now()); wait > 0 {
			if started {
				r.metrics.conflicts.Inc()
				msg := fmt.Sprintf("last patched by the reconciler of release %s, whose catalog differs from this one's (revision %s); "+
					"leaving the pod to it for %s instead of patching it back. Two cmp-injector releases look after this namespace: "+
					"narrow their namespace selectors so that one does", other, cat.Revision, wait)
				r.log.Warn("another release's reconciler patched this pod; backing off", zap.String("pod", key),
					zap.String("release", other), zap.String("self", r.self), zap.Duration("wait", wait))
				r.recorder.Event(pod, corev1.EventTypeWarning, EventConflict, msg)
			}
			return &backoffError{after: wait}
		}
		// Waited long enough: take the pod back (and mark it ours, below).
		// The other release, if it runs, now waits twice as long as before.
		if patch == nil {
			patch = map[string]string{}
		}
	}
	if patch == nil {
		return r.rollout(ctx, pod, d, cat)
	}
	patch[keys.ReconcilerAnnotation] = r.self
	if err := r.patchPod(ctx, pod, patch); err != nil {
		r.metrics.patches.WithLabelValues("error").Inc()
		return err
	}
	r.metrics.patches.WithLabelValues("success").Inc()
	r.report(ctx, pod, d, cat)
	return r.rollout(ctx, pod, d, cat)
}

// patchPod sets the annotations with a merge patch carrying the pod's
// resourceVersion: a pod changed meanwhile is a conflict, retried on the new
// version, never overwritten.
func (r *Reconciler) patchPod(ctx context.Context, pod *corev1.Pod, ann map[string]string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": pod.ResourceVersion, "annotations": ann,
	}})
	if err != nil {
		return err
	}
	_, err = r.opts.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: "cmp-injector"})
	return err
}

// report logs and sends Events for what the patch changed.
func (r *Reconciler) report(ctx context.Context, pod *corev1.Pod, d *inject.Drift, cat *catalog.Catalog) {
	key := pod.Namespace + "/" + pod.Name
	if len(d.Live) > 0 {
		names := slices.Sorted(maps.Keys(d.Live))
		msg := fmt.Sprintf("catalog revision %s: plugin.yaml updated (%v); the sidecars reload it without a restart", cat.Revision, names)
		r.log.Info("plugin config updated live", zap.String("pod", key), zap.String("revision", cat.Revision), zap.Strings("annotations", names))
		r.recorder.Event(pod, corev1.EventTypeNormal, EventConfigUpdated, msg)
	}
	// Reported once per change, not once per resync: the status already
	// lists these differences when they were reported before.
	if len(d.Stale) == 0 || slices.Equal(d.Recorded.Stale, d.Stale) {
		return
	}
	msg := fmt.Sprintf("not current with catalog revision %s until restarted: %s", cat.Revision, d.StaleMessage())
	r.log.Warn("injected pod is stale", zap.String("pod", key), zap.String("revision", cat.Revision), zap.String("differences", d.StaleMessage()))
	r.recorder.Event(pod, corev1.EventTypeWarning, EventStale, msg)
	// The workload hears of it only when it is proven to own the pod: an
	// Event on someone else's Deployment is what the pod's word alone could
	// otherwise produce.
	owner, err := ProveOwner(ctx, r.opts.Client, pod)
	switch {
	case err != nil:
		r.log.Warn("cannot read the stale pod's owner; the Event is on the pod only", zap.String("pod", key), zap.Error(err))
	case owner.Ref != nil:
		r.recorder.Event(owner.Ref, corev1.EventTypeWarning, EventStale, fmt.Sprintf("pod %s is %s", pod.Name, msg))
	case owner.Reason != "":
		r.log.Info("the stale pod's owner is not proven; the Event is on the pod only", zap.String("pod", key), zap.String("reason", owner.Reason))
	}
}

// forget drops what is known of a pod that is gone or no longer looked after.
func (r *Reconciler) forget(key string) {
	r.setStale(key, nil)
	r.conflicts.forget(key)
	r.mu.Lock()
	delete(r.unproven, key)
	r.mu.Unlock()
}

// setStale records a pod's stale differences (nil: none) and recomputes the
// gauge from all of them.
func (r *Reconciler) setStale(key string, diffs []inject.Difference) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(diffs) == 0 {
		delete(r.stale, key)
	} else {
		r.stale[key] = diffs
	}
	r.publishStaleLocked()
}

// publishStaleLocked sets the gauge from r.stale; r.mu is held.
func (r *Reconciler) publishStaleLocked() {
	counts := map[[2]string]int{}
	for _, ds := range r.stale {
		seen := map[[2]string]bool{}
		for _, d := range ds {
			plugin := d.Plugin
			switch {
			case plugin != "":
			case d.Reason == inject.StaleCopyImage:
				plugin = keys.CopyInitContainer
			default:
				plugin = keys.RepoServerContainer
			}
			k := [2]string{plugin, string(d.Reason)}
			if !seen[k] {
				seen[k] = true
				counts[k]++
			}
		}
	}
	r.metrics.stalePods.Reset()
	for k, n := range counts {
		r.metrics.stalePods.WithLabelValues(k[0], k[1]).Set(float64(n))
	}
}
