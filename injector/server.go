// Package injector is the mutating admission webhook: HTTPS transport,
// AdmissionReview handling, metrics and the offline twin of the same path.
package injector

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// Options are everything `cmp-injector serve` takes; Validate checks them.
type Options struct {
	CatalogFile, CertFile, KeyFile string
	Listen, MetricsListen          string
	// Poll is how often the catalog and certificate files are checked.
	Poll time.Duration
	// ShutdownDelay keeps serving, not ready, after SIGTERM so endpoints drop
	// the pod before connections are refused.
	ShutdownDelay time.Duration
	// ShutdownTimeout bounds the wait for in-flight reviews.
	ShutdownTimeout time.Duration
	// MetricsTimeouts bound the metrics port's connections (zero fields:
	// serving.DefaultTimeouts).
	MetricsTimeouts serving.Timeouts
	// MetricsConns cap the metrics port's connections (zero fields:
	// serving.DefaultMetricsMaxConnections and its per-address default).
	MetricsConns serving.MetricsConns
	// TrustedUsers may change what the injector owns in a pod on UPDATE: the
	// injector's own service account, which keeps pods current.
	TrustedUsers []string
	// MaxConnections caps the connections the webhook port holds at once.
	// When all are held, a new one takes the slot of the oldest connection
	// that has not sent a review yet; when every one has, more wait in the
	// listen backlog. Validate makes zero DefaultMaxConnections.
	MaxConnections int
	// NativeSidecars settles a catalog's defaults.nativeSidecars: auto by
	// asking the API server (serve's dry run); nil: auto is native sidecars.
	NativeSidecars catalog.NativeSidecarsResolver
	// MaxConnectionsPerIP caps the connections from one client address, so
	// one pod cannot take every slot; more are closed at accept. Validate
	// makes zero DefaultMaxConnectionsPerIP, or MaxConnections when lower (a
	// lower --max-connections alone is then no error).
	MaxConnectionsPerIP int
}

// Validate rejects what cannot work, every problem in one error that names
// the flags, and fills MaxConnections and MaxConnectionsPerIP when they are
// zero. A zero --poll-interval
// used to panic in time.NewTicker.
func (c *Options) Validate() error {
	var errs []error
	if c.CatalogFile == "" || c.CertFile == "" || c.KeyFile == "" {
		errs = append(errs, errors.New("--catalog, --tls-cert-file and --tls-key-file are required"))
	}
	if c.Poll <= 0 {
		errs = append(errs, fmt.Errorf("--poll-interval must be more than 0, got %s", c.Poll))
	}
	if c.ShutdownDelay < 0 || c.ShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-delay and --shutdown-timeout must not be negative, got %s and %s", c.ShutdownDelay, c.ShutdownTimeout))
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.MaxConnections < 0 {
		errs = append(errs, fmt.Errorf("--max-connections must be at least 1, got %d", c.MaxConnections))
	}
	if c.MaxConnectionsPerIP == 0 && c.MaxConnections > 0 {
		c.MaxConnectionsPerIP = min(DefaultMaxConnectionsPerIP, c.MaxConnections)
	}
	switch {
	case c.MaxConnectionsPerIP < 0:
		errs = append(errs, fmt.Errorf("--max-connections-per-ip must be at least 1, got %d", c.MaxConnectionsPerIP))
	case c.MaxConnections > 0 && c.MaxConnectionsPerIP > c.MaxConnections:
		errs = append(errs, fmt.Errorf("--max-connections-per-ip (%d) must not be more than --max-connections (%d)", c.MaxConnectionsPerIP, c.MaxConnections))
	}
	if err := c.MetricsConns.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// DefaultMaxConnections is far above what API servers open (a few each, over
// HTTP/1.1 keep-alive) and bounds memory: an attack run held 5,000 idle
// connections at 250 MB of the chart's 256 Mi limit, about 50 KB each.
const DefaultMaxConnections = 1024

// DefaultMaxConnectionsPerIP leaves one address a quarter of the slots. API
// servers have few addresses (several replicas, or a konnectivity agent or
// the node's address in front of all of them), and kube-apiserver keeps at
// most 25 idle connections per webhook host, opening more only for reviews
// in flight at once: 256 is far above that, and a pod flooding the port
// leaves three quarters of the slots free.
const DefaultMaxConnectionsPerIP = 256

// Connection timing on the webhook port. The API server opens a connection
// to send a review at once, so one that has not sent a review soon after
// accept does not hold a slot for long; one that has is an API server's
// keep-alive connection and stays until IdleTimeout.
const (
	// reviewProbation is the longest a connection stays open without a
	// valid review (see serving.ConnLimits and mutate).
	reviewProbation = 10 * time.Second
	// readHeaderTimeout also bounds the TLS handshake: http.Server gives a
	// handshake the least of ReadHeaderTimeout, ReadTimeout and WriteTimeout.
	readHeaderTimeout = 5 * time.Second
	// idleTimeout closes a keep-alive connection that reviewed before; 90 s
	// is the API server's own idle timeout for its webhook connections.
	idleTimeout = 90 * time.Second
)

// Server is the webhook. Its zero value is not usable; build it with New.
type Server struct {
	cfg      Options
	log      *zap.Logger
	metrics  *webhookMetrics
	catalog  *catalog.Watcher
	certs    *certReloader
	draining atomic.Bool
	// encodings keeps the JSON of what injection adds, per catalog snapshot.
	encodings *inject.Encodings
	// onCatalog is called after each new catalog is installed.
	onCatalog atomic.Pointer[func()]
}

// Catalog is the catalog in use, nil before the first valid one.
func (s *Server) Catalog() *catalog.Catalog { return s.catalog.Current() }

// OnCatalogChange registers f to run after every new catalog is loaded (the
// reconciler re-checks injected pods).
func (s *Server) OnCatalogChange(f func()) { s.onCatalog.Store(&f) }

// Registry is where the server's metrics are, for collectors run beside it
// (the reconciler's), so /metrics serves them too.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.Registry }

// New wires a server; nothing is read until Run.
func New(cfg Options, log *zap.Logger) *Server {
	s := &Server{cfg: cfg, log: log, metrics: newWebhookMetrics(), encodings: inject.NewEncodings()}
	s.catalog = catalog.NewWatcher(cfg.CatalogFile, catalog.Options{NativeSidecars: cfg.NativeSidecars}, catalog.Hooks{
		Loaded: func(c *catalog.Catalog) {
			s.metrics.catalogReloads.Inc()
			s.metrics.catalogOK.Set(1)
			s.metrics.catalogInfo.Reset()
			s.metrics.catalogInfo.WithLabelValues(c.Revision).Set(1)
			log.Info("catalog loaded", zap.String("revision", c.Revision), zap.Strings("plugins", c.Names))
			if d := c.Defaults; d.NativeSidecarsAuto {
				log.Info("defaults.nativeSidecars: auto", zap.Bool("nativeSidecars", d.NativeSidecars), zap.String("because", d.NativeSidecarsReason))
			}
			for _, w := range c.Warnings {
				log.Warn("catalog: "+w, zap.String("revision", c.Revision))
			}
			if f := s.onCatalog.Load(); f != nil {
				(*f)()
			}
		},
		Failed: func(err error) {
			s.metrics.catalogErrors.Inc()
			s.metrics.catalogOK.Set(0)
			// Before the first valid version, Serve returns the error.
			if s.catalog.Current() != nil {
				log.Error("catalog rejected; keeping the previous version", zap.String("file", cfg.CatalogFile), zap.Error(err))
			}
		},
		Recovered: func(c *catalog.Catalog) {
			s.metrics.catalogOK.Set(1)
			log.Info("catalog file readable again with the version in use", zap.String("revision", c.Revision))
		},
	})
	s.certs = newCertReloader(cfg.CertFile, cfg.KeyFile,
		func(notAfter time.Time) {
			s.metrics.certReloads.Inc()
			s.metrics.certExpiry.Set(float64(notAfter.Unix()))
			log.Info("serving certificate loaded", zap.Time("notAfter", notAfter))
		},
		func(err error) {
			s.metrics.certErrors.Inc()
			if s.certs.Loaded() {
				log.Error("serving certificate rejected; keeping the previous one", zap.Error(err))
			}
		})
	return s
}

// Ready is nil when the server can answer reviews.
func (s *Server) Ready() error {
	switch {
	case s.draining.Load():
		return errors.New("shutting down")
	case !s.certs.Loaded():
		return errors.New("no valid serving certificate loaded")
	case s.catalog.Current() == nil:
		return errors.New("no valid catalog loaded")
	}
	return nil
}

// WebhookHandler serves /mutate and /readyz. The kubelet probes the metrics
// port; /readyz stays here for doctor, which checks an out-of-cluster
// injector at the webhook's URL. A connection that only asks for /readyz,
// or sends /mutate anything but a review that decodes with a request UID,
// stays on probation: it is closed soon and is the first to give up its slot.
func (s *Server) WebhookHandler() http.Handler {
	r := mux.NewRouter()
	// mutate keeps the connection once its review decodes (handler.go).
	r.HandleFunc("/mutate", s.mutate).Methods(http.MethodPost)
	r.HandleFunc("/readyz", serving.ReadyHandler(s.Ready)).Methods(http.MethodGet, http.MethodHead)
	return s.recoverer(r)
}

// MetricsHandler serves /metrics, /healthz and /readyz over plain HTTP.
func (s *Server) MetricsHandler() http.Handler {
	return s.recoverer(serving.MetricsRouter(s.metrics.Registry, s.Ready))
}

// recoverer turns a panic into a 500 and a metric instead of a dropped
// connection; the API server then applies the failure policy.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
					panic(v)
				}
				s.metrics.panics.Inc()
				s.log.Error("handler panic", zap.Any("panic", v), zap.ByteString("stack", debug.Stack()))
				http.Error(w, "internal error", http.StatusInternalServerError)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// trusted reports whether username is one of the configured trusted users.
func (s *Server) trusted(username string) bool {
	for _, u := range s.cfg.TrustedUsers {
		if u == username {
			return true
		}
	}
	return false
}

// countConns keeps the open-connections gauge: every connection starts New
// and ends Closed or Hijacked exactly once. The limits learn which
// connections are reading or serving a request.
func (s *Server) countConns(c net.Conn, state http.ConnState) {
	serving.TrackConnState(c, state)
	switch state {
	case http.StateNew:
		s.metrics.openConns.Inc()
	case http.StateClosed, http.StateHijacked:
		s.metrics.openConns.Dec()
	}
}

// TLSConfig serves the reloaded certificate with TLS 1.2 or later, offering
// HTTP/2 and HTTP/1.1. kube-apiserver calls a webhook behind a Service, or at
// any URL but localhost, over HTTP/1.1 only, so that its concurrent reviews
// spread over the Service's endpoints (k8s.io/apiserver/pkg/util/webhook,
// kubernetes#75791); it negotiates HTTP/2 only with a webhook at a localhost
// URL.
func (s *Server) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.certs.GetCertificate,
		NextProtos: []string{"h2", "http/1.1"}}
}

// http2Config bounds each HTTP/2 connection. The standard library's server
// carries the rapid-reset protections (CVE-2023-44487: at most
// MaxConcurrentStreams handlers run per connection, the rest queue, and a
// connection whose queue keeps growing is closed) and the CONTINUATION flood
// one (CVE-2023-45288: header blocks are bounded by MaxHeaderBytes).
var http2Config = &http.HTTP2Config{
	// kube-apiserver sends at most a few hundred reviews at once per server.
	MaxConcurrentStreams: 250,
	// Flow control windows sized for a review (at most maxReviewBytes).
	MaxReceiveBufferPerStream:     1 << 20,
	MaxReceiveBufferPerConnection: 4 << 20,
}

// LoadInitial reads the catalog and certificate once and returns every
// problem: a server that starts without them would only look started. Keeping
// the previous version is for reloads.
func (s *Server) LoadInitial() error {
	var errs []error
	if _, err := s.catalog.Reload(); err != nil {
		errs = append(errs, fmt.Errorf("catalog %s: %w", s.cfg.CatalogFile, err))
	}
	if err := s.certs.Reload(); err != nil {
		errs = append(errs, fmt.Errorf("serving certificate: %w", err))
	}
	return errors.Join(errs...)
}

// Run listens on the configured addresses until ctx ends, then drains.
func (s *Server) Run(ctx context.Context) error {
	hl, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("webhook listener: %w", err)
	}
	ml, err := net.Listen("tcp", s.cfg.MetricsListen)
	if err != nil {
		_ = hl.Close()
		return fmt.Errorf("metrics listener: %w", err)
	}
	return s.Serve(ctx, hl, ml)
}

// Serve is Run on listeners the caller opened (tests use port 0).
func (s *Server) Serve(ctx context.Context, webhookLn, metricsLn net.Listener) error {
	err := s.cfg.Validate()
	if err == nil {
		err = s.LoadInitial()
	}
	if err != nil {
		_ = webhookLn.Close()
		_ = metricsLn.Close()
		return err
	}
	pollCtx, stopPolling := context.WithCancel(context.Background())
	defer stopPolling()
	// One reloader policy for both files: a change of content, or a new
	// distinct error reading them, calls Reload once; recovery is the next
	// successful load, which the hooks log. The first check finds the files
	// LoadInitial read and Reload skips content it has seen.
	for _, p := range []*serving.Poller{
		{Interval: s.cfg.Poll, Fingerprint: serving.FileHash(s.cfg.CatalogFile), OnChange: func(string, error) { _, _ = s.catalog.Reload() }},
		{Interval: s.cfg.Poll, Fingerprint: serving.FileHash(s.cfg.CertFile, s.cfg.KeyFile), OnChange: func(string, error) { _ = s.certs.Reload() }},
	} {
		go p.Run(pollCtx)
	}

	errLog := zap.NewStdLog(s.log.Named("http"))
	hs := &http.Server{Handler: s.WebhookHandler(), TLSConfig: s.TLSConfig(), ErrorLog: errLog,
		ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
		IdleTimeout: idleTimeout, MaxHeaderBytes: 64 << 10, ConnState: s.countConns, HTTP2: http2Config,
		ConnContext: serving.ConnContext}
	mc := s.cfg.MetricsConns
	mc.OnDrop = func(r serving.DropReason) { s.metrics.metricsDropped.WithLabelValues(string(r)).Inc() }
	ms := serving.NewMetricsServer(s.MetricsHandler(), serving.MetricsOptions{Timeouts: s.cfg.MetricsTimeouts, Conns: mc}, errLog)
	limited := serving.LimitConns(webhookLn, serving.ConnLimits{Max: s.cfg.MaxConnections, PerIP: s.cfg.MaxConnectionsPerIP,
		Probation: reviewProbation, OnDrop: func(r serving.DropReason) { s.metrics.droppedConns.WithLabelValues(string(r)).Inc() }})

	errc := make(chan error, 2)
	go func() { errc <- hs.Serve(tls.NewListener(limited, hs.TLSConfig)) }()
	go func() { errc <- ms.Serve(metricsLn) }()
	s.log.Info("serving", zap.String("webhook", webhookLn.Addr().String()), zap.String("metrics", metricsLn.Addr().String()))

	select {
	case err := <-errc:
		_ = hs.Close()
		_ = ms.Close()
		return err
	case <-ctx.Done():
	}
	s.draining.Store(true)
	s.log.Info("draining", zap.Duration("delay", s.cfg.ShutdownDelay))
	time.Sleep(s.cfg.ShutdownDelay)
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	err1 := hs.Shutdown(sctx)
	err2 := ms.Shutdown(sctx)
	s.log.Info("stopped")
	return errors.Join(err1, err2)
}
