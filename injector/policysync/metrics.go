package policysync

import "github.com/prometheus/client_golang/prometheus"

// metrics are the syncer's: what an alert on a stuck catalog needs.
type metrics struct {
	applies  prometheus.Counter
	errors   *prometheus.CounterVec
	revision *prometheus.GaugeVec
}

func newMetrics() *metrics {
	return &metrics{
		applies: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cmp_injector_policy_applies_total",
			Help: "Times the admission policies were applied from the catalog.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cmp_injector_policy_errors_total",
			Help: "Failures to bring the admission policies to the catalog, by stage (catalog: a version of the file that does not load; apply); the policies in place are kept.",
		}, []string{"stage"}),
		revision: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cmp_injector_policy_catalog_revision",
			Help: "1 for the catalog revision the admission policies were last applied from.",
		}, []string{"revision"}),
	}
}

func (m *metrics) register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.applies, m.errors, m.revision} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}
