package cmpserver

import (
	"context"
	"errors"
	"net/http"
	"path"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/cmp-injector/cmp-injector/cmpserver/command"
	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
	"github.com/cmp-injector/cmp-injector/cmpserver/rendercache"
	"github.com/cmp-injector/cmp-injector/cmpserver/unpack"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
	"github.com/cmp-injector/cmp-injector/pkg/tenancy"
)

// metrics are the server's Prometheus collectors, on a private registry so that
// tests and embedders never collide with the global one.
type metrics struct {
	Registry        *prometheus.Registry
	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	receivedBytes   *prometheus.CounterVec
	inFlight        prometheus.Gauge
	commandDuration *prometheus.HistogramVec
	commandExits    *prometheus.CounterVec
	configReloads   *prometheus.CounterVec
	configInfo      *prometheus.GaugeVec
	refusals        *prometheus.CounterVec
	metricsDropped  *prometheus.CounterVec
	// The render cache (rendercache, via cacheObserver).
	cacheLookups   *prometheus.CounterVec
	cacheEvictions *prometheus.CounterVec
	cacheEntries   prometheus.Gauge
	cacheBytes     prometheus.Gauge
	matchSettled   prometheus.Counter
}

// newMetrics registers every cmp_server_ metric on a new registry.
func newMetrics() *metrics {
	buckets := []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	m := &metrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cmp_server_requests_total",
			Help: "gRPC requests handled, by RPC and result (gRPC status code).",
		}, []string{"rpc", "result"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cmp_server_request_duration_seconds",
			Help:    "Time from the start of a gRPC request to its response, by RPC.",
			Buckets: buckets,
		}, []string{"rpc"}),
		receivedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cmp_server_received_bytes_total",
			Help: "Compressed repository tarball bytes received, by RPC.",
		}, []string{"rpc"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cmp_server_requests_in_flight",
			Help: "gRPC requests being handled.",
		}),
		commandDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cmp_server_command_duration_seconds",
			Help:    "Plugin command run time, by phase (init, generate, discover, parameters).",
			Buckets: buckets,
		}, []string{"phase"}),
		commandExits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cmp_server_command_exits_total",
			Help: "Plugin commands finished, by phase and exit code (signal_N when killed, start_error when not started).",
		}, []string{"phase", "code"}),
		configReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cmp_server_config_reloads_total",
			Help: "Changes of plugin.yaml seen while serving, by result: success (the new configuration serves new requests) or failure (unreadable or invalid; the previous one keeps serving).",
		}, []string{"result"}),
		configInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cmp_server_config_info",
			Help: "1 for the plugin.yaml being served, labelled with the sha256 of its content.",
		}, []string{"hash"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cmp_server_tenancy_refusals_total",
			Help: "Requests refused by the plugin's allowedProjects or allowedSourceRepos (tenancy.go), by RPC and reason.",
		}, []string{"rpc", "reason"}),
		metricsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cmp_server_metrics_connections_dropped_total",
			Help: "Connections to --metrics-addr closed by its limits, by reason: per_ip_cap (its address held --metrics-max-connections-per-ip), evicted (the oldest, closed to make room at --metrics-max-connections).",
		}, []string{"reason"}),
		cacheLookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cmp_server_render_cache_lookups_total",
			Help: "GenerateManifest requests looked up in the render cache, by result: hit (answered without running the plugin) or miss.",
		}, []string{"result"}),
		cacheEvictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cmp_server_render_cache_evictions_total",
			Help: "Answers removed from the render cache, by reason: size (the least recently used, to stay within --render-cache-size) or expired (older than --render-cache-ttl).",
		}, []string{"reason"}),
		cacheEntries: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cmp_server_render_cache_entries",
			Help: "Answers held by the render cache of the configuration being served.",
		}),
		cacheBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cmp_server_render_cache_bytes",
			Help: "Bytes of the answers held by the render cache of the configuration being served (at most --render-cache-size).",
		}),
		matchSettled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cmp_server_match_settled_total",
			Help: "MatchRepository requests whose discovery rule (fileName or find.glob) matched before the end of the repository tarball: the rest was received and its checksum verified, but not unpacked.",
		}),
	}
	for _, r := range []string{cacheHit, cacheMiss} {
		m.cacheLookups.WithLabelValues(r)
	}
	for _, r := range []string{rendercache.EvictedSize, rendercache.EvictedExpired} {
		m.cacheEvictions.WithLabelValues(r)
	}
	// Both results exist from the start, so a rate() or an alert on failures
	// has a series before the first one.
	m.configReloads.WithLabelValues(reloadSucceeded)
	m.configReloads.WithLabelValues(reloadFailed)
	// The rpc label is the method's name, as the interceptors take it.
	generate := path.Base(pluginpb.ConfigManagementPluginService_GenerateManifest_FullMethodName)
	for _, r := range tenancy.RefusalReasons {
		m.refusals.WithLabelValues(generate, string(r))
	}
	m.Registry.MustRegister(m.requests, m.requestDuration, m.receivedBytes, m.inFlight, m.commandDuration, m.commandExits,
		m.configReloads, m.configInfo, m.refusals, m.metricsDropped,
		m.cacheLookups, m.cacheEvictions, m.cacheEntries, m.cacheBytes, m.matchSettled,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Render cache lookup results (cmp_server_render_cache_lookups_total).
const (
	cacheHit  = "hit"
	cacheMiss = "miss"
)

// cacheObserver counts what the render cache does (the render cache's observer).
type cacheObserver struct{ m *metrics }

func (o cacheObserver) Lookup(hit bool) {
	r := cacheMiss
	if hit {
		r = cacheHit
	}
	o.m.cacheLookups.WithLabelValues(r).Inc()
}

func (o cacheObserver) Evicted(reason string) { o.m.cacheEvictions.WithLabelValues(reason).Inc() }

func (o cacheObserver) Held(entries int, bytes int64) {
	o.m.cacheEntries.Set(float64(entries))
	o.m.cacheBytes.Set(float64(bytes))
}

// configLoaded points cmp_server_config_info at the configuration in use.
func (m *metrics) configLoaded(hash string) {
	m.configInfo.Reset()
	if hash != "" {
		m.configInfo.WithLabelValues(hash).Set(1)
	}
}

// CommandDone counts how a plugin command ended (command.Observer).
func (m *metrics) CommandDone(r command.Report) {
	m.commandDuration.WithLabelValues(r.Phase).Observe(r.Duration.Seconds())
	m.commandExits.WithLabelValues(r.Phase, r.Exit).Inc()
}

func (m *metrics) refused(rpc string, reason tenancy.Reason) {
	m.refusals.WithLabelValues(rpc, string(reason)).Inc()
}

// received counts a repository received (Request.Received).
func (m *metrics) received(rpc string, repo *unpack.Repo) {
	m.receivedBytes.WithLabelValues(rpc).Add(float64(repo.Size))
	if repo.Settled {
		m.matchSettled.Inc()
	}
}

func (m *metrics) observe(method string, start time.Time, err error) {
	rpc := path.Base(method)
	m.requests.WithLabelValues(rpc, status.Code(err).String()).Inc()
	m.requestDuration.WithLabelValues(rpc).Observe(time.Since(start).Seconds())
}

func (m *metrics) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	m.inFlight.Inc()
	defer m.inFlight.Dec()
	start := time.Now()
	resp, err := handler(ctx, req)
	m.observe(info.FullMethod, start, err)
	return resp, err
}

func (m *metrics) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	m.inFlight.Inc()
	defer m.inFlight.Dec()
	start := time.Now()
	err := handler(srv, ss)
	m.observe(info.FullMethod, start, err)
	return err
}

// httpHandler serves /healthz (the process is alive), /readyz (the socket is
// being served and not draining) and /metrics.
func (m *metrics) httpHandler(ready *atomic.Bool) http.Handler {
	return serving.MetricsRouter(m.Registry, func() error {
		if !ready.Load() {
			return errors.New("the socket is not served (starting or draining)")
		}
		return nil
	})
}

// Reload results, the values of cmp_server_config_reloads_total's result label.
const (
	reloadSucceeded = "success"
	reloadFailed    = "failure"
)
