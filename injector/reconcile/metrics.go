package reconcile

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	stalePods     *prometheus.GaugeVec
	patches       *prometheus.CounterVec
	rollouts      prometheus.Counter
	leader        prometheus.Gauge
	conflicts     prometheus.Counter
	ownerUnproven prometheus.Counter
	namespaces    prometheus.GaugeFunc
	cachedPods    prometheus.GaugeFunc
}

// newMetrics makes the reconciler's metrics; cached reports the watched
// namespaces and cached pods.
func newMetrics(reg prometheus.Registerer, cached func() (namespaces, pods int)) (*metrics, error) {
	m := &metrics{
		stalePods: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cmp_injector_stale_pods",
			Help: "Injected pods that differ from the catalog in a way only a restart applies, by plugin (cmp-injector-copy for the copy init container and the plugin server's source, argocd-repo-server for the repo-server's env) and reason. Only the leading replica reports.",
		}, []string{"plugin", "reason"}),
		patches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cmp_injector_reconcile_patches_total",
			Help: "Annotation patches of injected pods by the reconciler (live plugin.yaml updates and status changes), by result.",
		}, []string{"result"}),
		rollouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cmp_injector_reconcile_rollouts_total",
			Help: "Deployments restarted because their pods were stale (rollout: auto).",
		}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cmp_injector_reconcile_leader",
			Help: "1 while this replica holds the reconciler's Lease and acts, else 0.",
		}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cmp_injector_reconcile_conflicts_total",
			Help: "Times the reconciler found a pod it would patch last patched by another release's reconciler, and backed off from it.",
		}),
		ownerUnproven: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cmp_injector_reconcile_owner_unproven_total",
			Help: "Stale pods (rollout: auto) whose owner could not be proven, so that nothing was restarted: once per pod and reason.",
		}),
		namespaces: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "cmp_injector_reconcile_watched_namespaces",
			Help: "Enabled namespaces whose pods the leading replica watches.",
		}, func() float64 { n, _ := cached(); return float64(n) }),
		cachedPods: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "cmp_injector_reconcile_cached_pods",
			Help: "Pods in the leading replica's cache: the opted-in pods of enabled namespaces, and no others.",
		}, func() float64 { _, n := cached(); return float64(n) }),
	}
	m.patches.WithLabelValues("success")
	m.patches.WithLabelValues("error")
	if reg != nil {
		for _, c := range []prometheus.Collector{m.stalePods, m.patches, m.rollouts, m.leader, m.conflicts, m.ownerUnproven, m.namespaces, m.cachedPods} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
