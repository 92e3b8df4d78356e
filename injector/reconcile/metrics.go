package reconcile

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	stalePods *prometheus.GaugeVec
	patches   *prometheus.CounterVec
	rollouts  prometheus.Counter
	leader    prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		stalePods: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cmp_injector_stale_pods",
			Help: "Injected pods that differ from the catalog in a way only a restart applies, by plugin (cmp-injector-copy for the copy init container, argocd-repo-server for the repo-server's env) and reason. Only the leading replica reports.",
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
	}
	m.patches.WithLabelValues("success")
	m.patches.WithLabelValues("error")
	if reg != nil {
		for _, c := range []prometheus.Collector{m.stalePods, m.patches, m.rollouts, m.leader} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
