// Package reconcile keeps injected repo-server pods current with the catalog:
// a changed inline plugin.yaml is written to the pod's config annotation (the
// kubelet re-projects it and the sidecar reloads it), anything a running pod
// cannot take makes it stale, which Events, a metric and the status annotation
// say. One replica acts at a time, chosen through a Lease.
//
// What it does about a pod is decided by plan (plan.go), a pure function of
// the pod, the catalog, the pod's proven owner and this replica's memory;
// the executor here reads those, through the caller's context, and carries
// the plan's steps out.
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
	eventConfigUpdated = "PluginConfigUpdated"
	eventStale         = "StalePlugins"
	eventRollout       = "PluginRollout"
	// eventOwnerUnproven is a Warning on the pod: it is stale, rollout is
	// auto, and its owner could not be proven, so nothing is restarted.
	eventOwnerUnproven = "OwnerUnproven"
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
	// rolledRev is the revision this replica last restarted Deployments for
	// (rollout: auto) and rolled the Deployments (by UID) it restarted for
	// it. Plan compares RolledFor with the catalog's revision only, so a
	// restart for an older revision is as good as none: one revision's set
	// is all there is to keep, not every Deployment ever restarted.
	rolledRev string
	rolled    map[types.UID]bool
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
		stale: map[string][]inject.Difference{}, conflicts: newConflicts(o.ConflictBackoff, maxConflictBackoff), unproven: map[string]string{}, rolled: map[types.UID]bool{}}
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
// catalog is loaded. The cache is refilled when the new catalog recognises
// repo-servers differently (podScope.setCatalog).
func (r *Reconciler) CatalogChanged() {
	r.mu.Lock()
	q, s := r.queue, r.scope
	r.mu.Unlock()
	if q == nil {
		return
	}
	// A catalog that recognises repo-servers differently lists every
	// enabled namespace again (its pods arrive as Add events and are
	// queued); the keys below are queued either way.
	s.setCatalog(r.opts.Catalog())
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
	}, r.opts.Catalog())
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

// reconcile brings one pod current, or records and reports that it is
// stale: it reads what the plan needs, plans, and carries the plan out.
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
	return r.sync(ctx, pod)
}

// sync plans for pod and carries the plan out.
func (r *Reconciler) sync(ctx context.Context, pod *corev1.Pod) error {
	key := pod.Namespace + "/" + pod.Name
	return r.execute(ctx, key, pod, plan(r.input(ctx, key, pod)))
}

// input reads what plan needs about pod: the catalog, the owner when a step
// needs it (through ctx, the term's: losing the Lease cancels the lookup),
// and this replica's memory of the pod.
func (r *Reconciler) input(ctx context.Context, key string, pod *corev1.Pod) planInput {
	in := newInput(pod, r.opts.Catalog(), r.self, r.opts.Rollout, time.Now())
	if ownerWanted(in) {
		in.Owner, in.OwnerErr = ProveOwner(ctx, r.opts.Client, pod)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if dep := in.Owner.Deployment; dep != nil && r.rolled[dep.UID] {
		in.RolledFor = r.rolledRev
	}
	in.Unproven = r.unproven[key]
	return in
}

// execute carries out p for the pod at key: the backoff from another
// release first, then each step in order, stopping at the first failed
// write (the queue retries the pod).
func (r *Reconciler) execute(ctx context.Context, key string, pod *corev1.Pod, p podPlan) error {
	switch {
	case p.Forget:
		r.forget(key)
		return nil
	case p.Idle:
		return nil
	}
	r.setStale(key, p.Stale)
	if p.Conflict != "" {
		if wait, started := r.conflicts.hold(key, time.Now()); wait > 0 {
			if started {
				r.metrics.conflicts.Inc()
				r.run(ctx, pod, conflictSteps(pod, p.Conflict, r.self, p.Revision, wait))
			}
			return &backoffError{after: wait}
		}
	}
	if err := r.run(ctx, pod, p.Steps); err != nil {
		return err
	}
	return p.Retry
}

// run carries out steps in order until one fails.
func (r *Reconciler) run(ctx context.Context, pod *corev1.Pod, steps []step) error {
	key := pod.Namespace + "/" + pod.Name
	for _, s := range steps {
		switch {
		case s.PatchPod != nil:
			if err := r.patchPod(ctx, pod, s.PatchPod); err != nil {
				r.metrics.patches.WithLabelValues("error").Inc()
				return err
			}
			r.metrics.patches.WithLabelValues("success").Inc()
		case s.Restart != nil:
			if err := r.restart(ctx, s.Restart); err != nil {
				return err
			}
		case s.Event != nil:
			r.recorder.Event(s.Event.On, s.Event.Type, s.Event.Reason, s.Event.Message)
		case s.Log != nil:
			if s.Log.Warn {
				r.log.Warn(s.Log.Msg, s.Log.Fields...)
			} else {
				r.log.Info(s.Log.Msg, s.Log.Fields...)
			}
		case s.Unproven != "":
			r.mu.Lock()
			r.unproven[key] = s.Unproven
			r.mu.Unlock()
			r.metrics.ownerUnproven.Inc()
		}
	}
	return nil
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

// restart patches the Deployment and remembers the revision it restarted
// it for.
func (r *Reconciler) restart(ctx context.Context, s *restart) error {
	if _, err := r.opts.Client.AppsV1().Deployments(s.Namespace).Patch(ctx, s.Name, types.StrategicMergePatchType, s.Body,
		metav1.PatchOptions{FieldManager: "cmp-injector"}); err != nil {
		return fmt.Errorf("restarting Deployment %s: %w", s.Name, err)
	}
	r.mu.Lock()
	if s.Revision != r.rolledRev {
		r.rolledRev, r.rolled = s.Revision, map[types.UID]bool{}
	}
	r.rolled[s.UID] = true
	r.mu.Unlock()
	r.metrics.rollouts.Inc()
	return nil
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
			case d.Reason == inject.StaleCopyImage, d.Reason == inject.StaleServerSource:
				// The copy init container, or its absence.
				plugin = keys.CopyInitContainer
			case d.Reason == inject.StaleContainerSpec:
				// The only container spec of no plugin: the sockets container's.
				plugin = keys.SocketsContainer
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
