package injector

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
)

// webhookMetrics are the injector's Prometheus series, in a private registry so tests
// can build many servers and nothing leaks from imported libraries.
type webhookMetrics struct {
	Registry *prometheus.Registry

	requests       *prometheus.CounterVec
	injected       *prometheus.CounterVec
	skipped        *prometheus.CounterVec
	denied         *prometheus.CounterVec
	duration       prometheus.Histogram
	badRequests    *prometheus.CounterVec
	panics         prometheus.Counter
	catalogReloads prometheus.Counter
	catalogErrors  prometheus.Counter
	catalogOK      prometheus.Gauge
	catalogInfo    *prometheus.GaugeVec
	certExpiry     prometheus.Gauge
	certReloads    prometheus.Counter
	certErrors     prometheus.Counter
	openConns      prometheus.Gauge
	droppedConns   *prometheus.CounterVec
	metricsDropped *prometheus.CounterVec
}

// newWebhookMetrics registers every series, plus the Go and process collectors.
func newWebhookMetrics() *webhookMetrics {
	const ns = "cmp_injector"
	m := &webhookMetrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "requests_total",
			Help: "Admission reviews answered, by decision (injected, skipped, denied) and dry run."},
			[]string{"decision", "dry_run"}),
		injected: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "injected_total",
			Help: "Pods injected, by catalog namespace key: the namespace when the catalog names it, else \"*\" (dry runs excluded)."}, []string{"namespace"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "skipped_total",
			Help: "Pods admitted unchanged, by reason (dry runs excluded)."}, []string{"reason"}),
		denied: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "denied_total",
			Help: "Pods denied, once per distinct reason of each denial (dry runs excluded)."}, []string{"reason"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "request_duration_seconds",
			Help:    "Time to answer one admission review, from body read to response written.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}}),
		badRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "bad_requests_total",
			Help: "Requests to /mutate refused before admission, by HTTP status code."}, []string{"code"}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "panics_total",
			Help: "Handler panics recovered."}),
		catalogReloads: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "catalog_reloads_total",
			Help: "Catalog versions loaded successfully."}),
		catalogErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "catalog_reload_errors_total",
			Help: "Catalog versions rejected (the previous one stays in use)."}),
		catalogOK: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "catalog_last_reload_success",
			Help: "1 if the last catalog file seen was valid, 0 if it was rejected."}),
		catalogInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "catalog_info",
			Help: "Always 1, labelled with the revision of the catalog in use."}, []string{"revision"}),
		certExpiry: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "certificate_expiry_timestamp_seconds",
			Help: "NotAfter of the serving certificate in use, as a Unix time."}),
		certReloads: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "certificate_reloads_total",
			Help: "Serving certificates loaded successfully."}),
		certErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "certificate_reload_errors_total",
			Help: "Certificate or key files that could not be loaded (the previous pair stays in use)."}),
		openConns: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "webhook_open_connections",
			Help: "Connections the webhook port holds (at most --max-connections)."}),
		droppedConns: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "webhook_connections_dropped_total",
			Help: "Webhook connections closed by the connection limits, by reason: per_ip_cap (its address held --max-connections-per-ip), " +
				"evicted (no valid review yet, closed to make room at --max-connections), evicted_idle (no review in flight, the least recently used, closed to make room when none was on probation), probation (no valid review within " + reviewProbation.String() + " of accept)."}, []string{"reason"}),
		metricsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "metrics_connections_dropped_total",
			Help: "Metrics-port connections closed by its connection limits, by reason: per_ip_cap (its address held --metrics-max-connections-per-ip), " +
				"evicted (the oldest, closed to make room at --metrics-max-connections)."}, []string{"reason"}),
	}
	m.Registry.MustRegister(m.requests, m.injected, m.skipped, m.denied, m.duration, m.badRequests, m.panics,
		m.catalogReloads, m.catalogErrors, m.catalogOK, m.catalogInfo, m.certExpiry, m.certReloads, m.certErrors, m.openConns, m.droppedConns, m.metricsDropped,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// namespaceLabel bounds the namespace label of injections to the catalog's own
// keys: a namespace the catalog names keeps its name, any other one (enabled
// through "*") is counted as "*". Requests cannot create series (an attack run
// made 50,000 series from 50,000 namespaces).
func namespaceLabel(cat *catalog.Catalog, namespace string) string {
	if cat != nil && cat.HasNamespace(namespace) {
		return namespace
	}
	return catalog.AllNamespaces
}

// observe records a decision. Dry runs only count as requests: server-side
// dry-run promises no side effects.
func (m *webhookMetrics) observe(r *inject.Report, namespace string, dryRun bool) {
	dr := "false"
	if dryRun {
		dr = "true"
	}
	m.requests.WithLabelValues(string(r.Decision), dr).Inc()
	if dryRun {
		return
	}
	switch r.Decision {
	case inject.Injected:
		m.injected.WithLabelValues(namespace).Inc()
	case inject.Skipped:
		for _, reason := range r.Reasons {
			m.skipped.WithLabelValues(string(reason)).Inc()
		}
	case inject.Denied:
		for _, reason := range r.Reasons {
			m.denied.WithLabelValues(string(reason)).Inc()
		}
	}
}
