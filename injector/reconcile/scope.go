package reconcile

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// The reconciler used to cache every pod labelled cmp-injector.io/inject=true
// in the cluster, whole. Anyone who may create a pod somewhere may set that
// label, so an attack run created 1,000 such pods with a 250 KiB annotation
// each in namespaces that are not enabled: the leader grew from 53 to 490 MB,
// and in a 256 MiB container every replica was OOM-killed in turn as it took
// the Lease. Now the API server does the filtering: one pod informer per
// enabled namespace (the namespaces themselves are watched by the enabled
// label), started and stopped as namespaces are enabled and disabled, so pods
// elsewhere never reach this process; and what is cached of a pod is only
// what the reconciler reads (stripPod), so a large foreign annotation on a
// pod in an enabled namespace is dropped as it arrives.
//
// A third attack run still took the leader from 47 to 640 MB with 1,000
// labelled pods inside an enabled namespace that are not repo-servers, each
// with a 256,000-byte plugins annotation, which was one of the annotations
// kept. Now a pod that is not a repo-server, by the rule the webhook injects
// by (inject.IsRepoServer), is cached as its identity only: the reconciler
// never acts on it. A repo-server keeps the annotations it reads, and a
// plugins annotation longer than the webhook accepts is kept as one shared
// over-long value, never its bytes.

// podScope holds one pod informer per enabled namespace.
type podScope struct {
	ctx     context.Context
	client  kubernetes.Interface
	resync  time.Duration
	handler cache.ResourceEventHandler

	mu sync.Mutex
	ns map[string]*namespacePods

	// cat is the catalog whose repo-server rule the cached pods were
	// stripped by; recognising serialises changing it.
	cat         atomic.Pointer[catalog.Catalog]
	recognising sync.Mutex
}

// namespacePods is the pod informer of one enabled namespace.
type namespacePods struct {
	cancel  context.CancelFunc
	factory informers.SharedInformerFactory
	store   cache.Store
	lister  corelisters.PodNamespaceLister
}

// newPodScope strips pods by cat's repo-server rule (nil: no pod is a
// repo-server, there being nothing to compare one with).
func newPodScope(ctx context.Context, client kubernetes.Interface, resync time.Duration, handler cache.ResourceEventHandler, cat *catalog.Catalog) *podScope {
	s := &podScope{ctx: ctx, client: client, resync: resync, handler: handler, ns: map[string]*namespacePods{}}
	s.cat.Store(cat)
	return s
}

// setCatalog makes cat the catalog pods are stripped by. When its rule
// recognises other pods as repo-servers than the one the cache was filled
// by, the cached pods are wrong both ways (a repo-server held as its identity
// only, or a foreign pod held whole), and a resync replays the cache rather
// than reading the API: every namespace is listed again.
func (s *podScope) setCatalog(cat *catalog.Catalog) {
	s.recognising.Lock()
	defer s.recognising.Unlock()
	if old := s.cat.Swap(cat); inject.SameRepoServerRule(old, cat) {
		return
	}
	for _, n := range s.namespaces() {
		s.restart(n)
	}
}

// namespaces are the names of the namespaces watched now.
func (s *podScope) namespaces() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.ns))
}

// strip is the informers' transform: stripPod by the current rule.
func (s *podScope) strip(obj any) (any, error) { return stripPod(obj, s.cat.Load()) }

// watch starts the pod informer of namespace ns unless it runs. Its initial
// list arrives as Add events, which queue every pod of the namespace: a
// namespace enabled (again) is checked at once.
func (s *podScope) watch(ns string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.ns[ns]; ok || s.ctx.Err() != nil {
		return
	}
	s.ns[ns] = s.startLocked(ns)
}

// startLocked starts the pod informer of ns; s.mu is held.
func (s *podScope) startLocked(ns string) *namespacePods {
	ctx, cancel := context.WithCancel(s.ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(s.client, s.resync,
		informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = keys.InjectLabel + "=" + keys.EnabledValue }),
		informers.WithTransform(s.strip))
	pods := factory.Core().V1().Pods()
	inf := pods.Informer()
	_, _ = inf.AddEventHandler(s.handler)
	factory.Start(ctx.Done())
	return &namespacePods{cancel: cancel, factory: factory, store: inf.GetStore(), lister: pods.Lister().Pods(ns)}
}

// restart replaces the pod informer of ns, if one runs, with a new one: a
// fresh list, stripped by the current rule. A namespace dropped meanwhile
// stays dropped.
func (s *podScope) restart(ns string) {
	s.mu.Lock()
	p, ok := s.ns[ns]
	if !ok || s.ctx.Err() != nil {
		s.mu.Unlock()
		return
	}
	s.ns[ns] = s.startLocked(ns)
	s.mu.Unlock()
	// As forget: wait for the old informer outside the lock.
	p.cancel()
	p.factory.Shutdown()
}

// forget stops the pod informer of namespace ns and drops its cache; it
// reports whether one ran.
func (s *podScope) forget(ns string) bool {
	s.mu.Lock()
	p, ok := s.ns[ns]
	delete(s.ns, ns)
	s.mu.Unlock()
	if !ok {
		return false
	}
	p.cancel()
	// Waits for the informer's goroutines, outside the lock: they may be
	// delivering an event to a handler that reads the scope.
	p.factory.Shutdown()
	return true
}

// stop stops every informer.
func (s *podScope) stop() {
	for _, n := range s.namespaces() {
		s.forget(n)
	}
}

// get is the cached pod; ok is false when it is not cached or its namespace
// is not enabled.
func (s *podScope) get(ns, name string) (*corev1.Pod, bool) {
	s.mu.Lock()
	p, ok := s.ns[ns]
	s.mu.Unlock()
	if !ok {
		return nil, false
	}
	pod, err := p.lister.Get(name)
	if err != nil {
		return nil, false
	}
	return pod, true
}

// keys are the namespace/name of every cached pod.
func (s *podScope) keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, p := range s.ns {
		out = append(out, p.store.ListKeys()...)
	}
	return out
}

// counts are the watched namespaces and the cached pods, for the metrics
// that show what the reconciler holds.
func (s *podScope) counts() (namespaces, pods int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.ns {
		pods += len(p.store.ListKeys())
	}
	return len(s.ns), pods
}

// stripPod keeps of a pod what the reconciler reads. A pod that is not a
// repo-server by cat's rule (the webhook's: inject.IsRepoServer) keeps its
// identity only: the reconciler never acts on it, and its labels, spec and
// annotations are whatever its author chose to make the leader hold. A
// repo-server keeps its identity, labels (a ReplicaSet's selector is matched
// against them), owner references, deletion mark, the parts of its spec
// compared with the catalog and the annotations cmp-injector reads;
// managedFields, the status, the rest of the spec and every other annotation
// go. Objects other than pods (a deletion
// tombstone) pass unchanged.
func stripPod(obj any, cat *catalog.Catalog) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	if cat == nil || !inject.IsRepoServer(pod, cat) {
		return &corev1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: metav1.ObjectMeta{
			Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, ResourceVersion: pod.ResourceVersion, DeletionTimestamp: pod.DeletionTimestamp,
		}}, nil
	}
	pod.ManagedFields = nil
	pod.Status = corev1.PodStatus{}
	pod.Annotations = keptAnnotations(pod.Annotations)
	// CheckDrift reads the containers, init containers, volumes and the
	// pod's securityContext (the sidecars' UID); affinity, tolerations,
	// ephemeral containers and the rest of the spec are the author's.
	pod.Spec = corev1.PodSpec{Containers: pod.Spec.Containers, InitContainers: pod.Spec.InitContainers,
		Volumes: pod.Spec.Volumes, SecurityContext: pod.Spec.SecurityContext}
	return pod, nil
}

// oversizedPlugins stands for every plugins annotation longer than the
// webhook accepts: one string shared by all such pods, so a cached pod costs
// a header, not its value. It is itself over the limit, so CheckDrift reads
// it exactly as it reads the value it replaces (no plugin requested).
var oversizedPlugins = strings.Repeat(",", keys.MaxPluginsAnnotationBytes+1)

// keptAnnotations are the status, plugins and reconciler annotations, and
// the config and image annotations of the plugins the status says were
// injected: CheckDrift reads no others.
func keptAnnotations(in map[string]string) map[string]string {
	if len(in) == 0 {
		return in
	}
	out := map[string]string{}
	for _, k := range []string{keys.StatusAnnotation, keys.PluginsAnnotation, keys.ReconcilerAnnotation} {
		if v, ok := in[k]; ok {
			out[k] = v
		}
	}
	if len(out[keys.PluginsAnnotation]) > keys.MaxPluginsAnnotationBytes {
		out[keys.PluginsAnnotation] = oversizedPlugins
	}
	var st inject.Status
	if raw, ok := in[keys.StatusAnnotation]; ok && json.Unmarshal([]byte(raw), &st) == nil {
		for _, p := range st.Plugins {
			for _, k := range []string{keys.ConfigAnnotationPrefix + p, keys.ImageAnnotationPrefix + p} {
				if v, ok := in[k]; ok {
					out[k] = v
				}
			}
		}
	}
	return out
}

// stripNamespace keeps a namespace's name and labels: the selector is all
// the reconciler asks of it.
func stripNamespace(obj any) (any, error) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return obj, nil
	}
	return &corev1.Namespace{TypeMeta: ns.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: ns.Name, UID: ns.UID, ResourceVersion: ns.ResourceVersion, Labels: ns.Labels, DeletionTimestamp: ns.DeletionTimestamp,
	}}, nil
}

// inNamespace reports whether key (namespace/name) is in namespace ns.
func inNamespace(key, ns string) bool { return strings.HasPrefix(key, ns+"/") }
