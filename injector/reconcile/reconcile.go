// Package reconcile keeps injected repo-server pods current with the catalog:
// a changed inline plugin.yaml is written to the pod's config annotation (the
// kubelet re-projects it and the sidecar reloads it), anything a running pod
// cannot take makes it stale, which Events, a metric and the status annotation
// say. One replica acts at a time, chosen through a Lease.
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
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
	Log               *zap.Logger
	// Registerer takes the reconciler's metrics.
	Registerer prometheus.Registerer
}

// Reconciler is the day-2 loop of `cmp-injector serve --reconcile`.
type Reconciler struct {
	opts     Options
	log      *zap.Logger
	metrics  *metrics
	recorder record.EventRecorder

	// leading is held by lead for its whole run: a new term starts only
	// once the previous one has stopped its workers.
	leading sync.Mutex
	mu      sync.Mutex
	// queue, pods and namespaces exist while this replica leads.
	queue      workqueue.TypedRateLimitingInterface[string]
	pods       corelisters.PodLister
	namespaces corelisters.NamespaceLister
	// stale is what each pod (namespace/name) lacks, for the gauge.
	stale map[string][]inject.Difference
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
	if _, err := labels.Parse(o.NamespaceSelector); err != nil {
		return nil, fmt.Errorf("reconcile: namespace selector: %w", err)
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	return &Reconciler{opts: o, log: o.Log.Named("reconcile"), metrics: m, stale: map[string][]inject.Difference{}}, nil
}

// CatalogChanged re-checks every injected pod; the server calls it when a new
// catalog is loaded.
func (r *Reconciler) CatalogChanged() {
	r.mu.Lock()
	q, pods := r.queue, r.pods
	r.mu.Unlock()
	if q == nil {
		return
	}
	all, err := pods.List(labels.Everything())
	if err != nil {
		return
	}
	for _, p := range all {
		q.Add(p.Namespace + "/" + p.Name)
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

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: r.opts.Client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	r.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "cmp-injector"})

	// Only pods that opted in and namespaces that are enabled are cached:
	// the informers hold the injected repo-server pods, not the cluster.
	podFactory := informers.NewSharedInformerFactoryWithOptions(r.opts.Client, r.opts.Resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = keys.InjectLabel + "=" + keys.EnabledValue }))
	nsFactory := informers.NewSharedInformerFactoryWithOptions(r.opts.Client, r.opts.Resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = r.opts.NamespaceSelector }))
	podInformer := podFactory.Core().V1().Pods()
	nsInformer := nsFactory.Core().V1().Namespaces()
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "cmp-injector-pods"})
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	_, _ = podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, n any) { enqueue(n) }, DeleteFunc: enqueue,
	})
	// A namespace enabled (again) re-checks its pods.
	_, _ = nsInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			ns, ok := obj.(*corev1.Namespace)
			if !ok {
				return
			}
			pods, _ := podInformer.Lister().Pods(ns.Name).List(labels.Everything())
			for _, p := range pods {
				queue.Add(p.Namespace + "/" + p.Name)
			}
		},
	})
	podFactory.Start(ctx.Done())
	nsFactory.Start(ctx.Done())
	defer podFactory.Shutdown()
	defer nsFactory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), podInformer.Informer().HasSynced, nsInformer.Informer().HasSynced) {
		queue.ShutDown()
		return
	}
	r.mu.Lock()
	r.queue, r.pods, r.namespaces = queue, podInformer.Lister(), nsInformer.Lister()
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.queue, r.pods, r.namespaces = nil, nil, nil
		r.stale = map[string][]inject.Difference{}
		r.mu.Unlock()
		// A follower reports no stale pods: summing over replicas counts each
		// pod once.
		r.metrics.stalePods.Reset()
	}()
	r.CatalogChanged()

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
	r.log.Info("stopped leading")
}

// next handles one queued pod; false once the queue is shut down.
func (r *Reconciler) next(ctx context.Context, q workqueue.TypedRateLimitingInterface[string]) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	if err := r.reconcile(ctx, key); err != nil {
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
	pods, namespaces := r.pods, r.namespaces
	r.mu.Unlock()
	if pods == nil {
		return nil
	}
	pod, err := pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		r.setStale(key, nil)
		return nil
	}
	if err != nil {
		return err
	}
	// Never touch a pod the injector did not inject, one on its way out, or
	// one in a namespace that is not (or no longer) one it injects in.
	if _, ok := pod.Annotations[keys.StatusAnnotation]; !ok || pod.DeletionTimestamp != nil {
		r.setStale(key, nil)
		return nil
	}
	if _, err := namespaces.Get(ns); err != nil {
		r.setStale(key, nil)
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
	if patch == nil {
		return r.rollout(ctx, pod, d, cat)
	}
	if err := r.patchPod(ctx, pod, patch); err != nil {
		r.metrics.patches.WithLabelValues("error").Inc()
		return err
	}
	r.metrics.patches.WithLabelValues("success").Inc()
	r.report(pod, d, cat)
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
func (r *Reconciler) report(pod *corev1.Pod, d *inject.Drift, cat *catalog.Catalog) {
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
	if owner := r.owner(context.Background(), pod); owner != nil {
		r.recorder.Event(owner, corev1.EventTypeWarning, EventStale, fmt.Sprintf("pod %s is %s", pod.Name, msg))
	}
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
