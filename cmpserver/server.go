// Package cmpserver is a wire-compatible implementation of Argo CD's sidecar
// plugin server (argocd-cmp-server): gRPC plugin.ConfigManagementPluginService on
// a unix socket, running one ConfigManagementPlugin's commands.
package cmpserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/stats"

	"github.com/cmp-injector/cmp-injector/cmpserver/askpass"
	"github.com/cmp-injector/cmp-injector/cmpserver/command"
	"github.com/cmp-injector/cmp-injector/cmpserver/engine"
	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
	"github.com/cmp-injector/cmp-injector/cmpserver/redact"
	"github.com/cmp-injector/cmp-injector/cmpserver/rendercache"
	"github.com/cmp-injector/cmp-injector/cmpserver/tracing"
	"github.com/cmp-injector/cmp-injector/cmpserver/unpack"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// Options configure a Server. Zero values take the defaults noted.
type Options struct {
	// Plugin is the configuration to serve; when nil it is loaded from
	// ConfigPath.
	Plugin *pluginconfig.Plugin
	// ConfigPath is the plugin.yaml the server reloads while it runs (see
	// reload.go); empty: Plugin is served until the end.
	ConfigPath string
	// ReloadInterval is how often ConfigPath is checked for a change (1 s;
	// 0: never).
	ReloadInterval time.Duration
	// SocketDir holds the socket <name>[-<version>].sock.
	SocketDir string
	// WorkDir is the root of per-request dirs; it is wiped at start.
	WorkDir string
	// Env is the environment every command starts from, as argocd-cmp-server
	// passes its own: serve gives the process's (os.Environ), read at the
	// edge and not in the engine.
	Env    []string
	Limits unpack.Limits
	Exec   command.Options
	// RenderCache answers a repeated GenerateManifest without running the
	// plugin (package rendercache); zero: off.
	RenderCache rendercache.Config
	// MaxMsgSize is the gRPC message size limit in bytes (100 MiB).
	MaxMsgSize int
	// KeepaliveMinTime is the shortest client ping interval allowed (10 s); the
	// repo-server pings every 20 s during long silent calls.
	KeepaliveMinTime time.Duration
	// ShutdownGrace is how long in-flight requests may run after SIGTERM (25 s).
	ShutdownGrace time.Duration
	// StreamIdleTimeout ends a stream that sends no message for this long (60 s;
	// 0: never). The repo-server sends its chunks back to back, so only a client
	// that hung mid-stream ever waits this long, and it would otherwise hold a
	// goroutine, an open file and a request dir until it disconnects.
	StreamIdleTimeout time.Duration
	// MaxConcurrentStreams caps the streaming requests (GenerateManifest,
	// MatchRepository, GetParametersAnnouncement) handled at once, from the first
	// message to the response. One more fails at once with
	// ResourceExhausted. (64; 0: no cap.)
	MaxConcurrentStreams int
	// ReturnMemoryAfter is how long the server must have had no request in
	// flight before it returns its free heap to the kernel (idlememory.go)
	// (1 s; 0: never, the Go runtime's own pace).
	ReturnMemoryAfter time.Duration
	// MetricsAddr, if set, serves /healthz, /readyz and /metrics over HTTP.
	MetricsAddr string
	// MetricsTimeouts bound that listener's connections (zero fields:
	// serving.DefaultTimeouts).
	MetricsTimeouts serving.Timeouts
	// MetricsConns cap that listener's connections (zero fields:
	// serving.DefaultMetricsMaxConnections and its per-address default).
	MetricsConns serving.MetricsConns
	Logger       *zap.Logger
	// Tracer, when set, makes each request a trace, or a part of the
	// repo-server's (cmpserver/tracing); nil: no span is made.
	Tracer *tracing.Tracer
	// LogLevel and LogFormat are the server's --loglevel and --logformat (Argo CD's
	// names, any case; "" takes its defaults info and json). Every command sees
	// them as ARGOCD_LOG_LEVEL and ARGOCD_LOG_FORMAT, spelled as Argo CD exports
	// them (see command.NormalizeLogLevel). They do not configure Logger.
	LogLevel, LogFormat string
}

// DefaultOptions are serve's defaults. Every limit, timeout and cap of
// Options means "none" when zero, so a caller says what it wants instead of a
// zero standing for a default and -1 for none.
func DefaultOptions() Options {
	return Options{
		Limits:               unpack.DefaultLimits(),
		Exec:                 command.DefaultOptions(),
		MaxMsgSize:           100 << 20,
		KeepaliveMinTime:     10 * time.Second,
		ShutdownGrace:        25 * time.Second,
		StreamIdleTimeout:    DefaultStreamIdleTimeout,
		MaxConcurrentStreams: DefaultMaxConcurrentStreams,
		ReloadInterval:       DefaultReloadInterval,
		ReturnMemoryAfter:    DefaultReturnMemoryAfter,
	}
}

// Validate rejects values that cannot work, every problem in one error naming
// the flag, and gives a nil Logger a no-op one.
func (o *Options) Validate() error {
	// errors.Join leaves out the nil ones.
	errs := append(o.Limits.Problems(), o.Exec.Problems()...)
	errs = append(errs, o.RenderCache.Problems()...)
	if o.RenderCache.Enabled() && !o.RenderCache.AllowSecrets && len(o.Exec.Redact.Names()) > 0 {
		errs = append(errs, fmt.Errorf("--render-cache-size is set but this sidecar takes env from Secrets (%s): a cached answer would outlive a rotated Secret and hold its values in memory; add --render-cache-allow-secrets if that is acceptable", strings.Join(o.Exec.Redact.Names(), ", ")))
	}
	errs = append(errs,
		serving.NotNegative("max-concurrent-streams", o.MaxConcurrentStreams),
		serving.NotNegative("stream-idle-timeout", o.StreamIdleTimeout),
		serving.NotNegative("shutdown-grace", o.ShutdownGrace),
		serving.NotNegative("return-memory-after", o.ReturnMemoryAfter),
		serving.NotNegative("reload interval", o.ReloadInterval))
	if o.KeepaliveMinTime <= 0 {
		// gRPC reads 0 as its own 5 minutes, which ends the repo-server's
		// long silent calls on the third ping.
		errs = append(errs, fmt.Errorf("--keepalive-min must be more than 0, got %s", o.KeepaliveMinTime))
	}
	if o.MaxMsgSize <= 0 {
		errs = append(errs, fmt.Errorf("--max-msg-size-mb must be at least 1, got %d bytes", o.MaxMsgSize))
	}
	if err := o.MetricsConns.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return errors.Join(errs...)
}

// DefaultReloadInterval bounds the time from the kubelet's projection of a new
// plugin.yaml to the first request it serves; a check reads one small file.
const DefaultReloadInterval = time.Second

// DefaultStreamIdleTimeout is generous: a repo-server sends the tarball's chunks
// back to back after building it, so a real client is never idle this long.
const DefaultStreamIdleTimeout = 60 * time.Second

// DefaultMaxConcurrentStreams is well above what one repo-server sends at once in
// a default install: the application controller's 20 status and 10 operation
// processors each wait for one manifest generation at a time.
const DefaultMaxConcurrentStreams = 64

// Server serves one plugin on its socket.
type Server struct {
	opts    Options
	log     *zap.Logger
	metrics *metrics
	// configs is the configuration new requests take (reload.go).
	configs *configs
	// reloadMu serialises reloads.
	reloadMu sync.Mutex
	sock     *socket
	grpc     *grpc.Server
	ready    atomic.Bool
	// httpAddr is the bound metrics address once Serve listens.
	httpAddr atomic.Pointer[string]
	// requests is what the service runs requests with; its shared trees
	// and removals end with the server.
	requests *requestRunner
	// idle returns the free heap once no request runs (idlememory.go).
	idle *idleMemory
}

// New validates the options, wipes and recreates the work dir, and builds the
// gRPC server.
func New(opts Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	var first *loaded
	switch {
	case opts.Plugin != nil:
		if err := opts.Plugin.Validate(); err != nil {
			return nil, err
		}
		first = &loaded{plugin: opts.Plugin}
	case opts.ConfigPath != "":
		var err error
		if first, err = readConfig(opts.ConfigPath, opts.Logger); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("no plugin configuration")
	}
	if err := command.NormalizeLogSettings(&opts.LogLevel, &opts.LogFormat); err != nil {
		return nil, err
	}
	if opts.SocketDir == "" || opts.WorkDir == "" {
		return nil, errors.New("socket dir and work dir are required")
	}
	// Before the work dir is wiped: a server that answers on our socket may
	// be using it (Serve checks again when it listens).
	if err := checkSocketFree(filepath.Join(opts.SocketDir, first.plugin.SocketName())); err != nil {
		return nil, err
	}
	if err := resetWorkDir(opts.WorkDir); err != nil {
		return nil, err
	}
	if opts.Exec.AskPassBin == "" {
		opts.Exec.AskPassBin = askPassBin(opts.WorkDir, opts.Logger)
	}
	if opts.Exec.Redact == nil {
		// The sidecar's Secret values, named by the injector (redact.go).
		opts.Exec.Redact = redact.FromEnv(opts.Env)
	}
	m := newMetrics()
	registerRedactions(m.Registry, opts.Exec.Redact)
	env := append(append([]string{}, opts.Env...), command.LogEnv(opts.LogLevel, opts.LogFormat)...)
	cfgs := &configs{metrics: m, renderCache: opts.RenderCache, log: opts.Logger, newEngine: func(p *pluginconfig.Plugin) *engine.Engine {
		return engine.New(p, opts.Limits, opts.WorkDir, opts.Exec, env, opts.Logger, m)
	}}
	cfgs.install(first)
	rq := &requestRunner{configs: cfgs, log: opts.Logger, limits: opts.Limits, idle: opts.StreamIdleTimeout,
		trees: unpack.NewTrees(), removals: &removals{}, metrics: m, redact: opts.Exec.Redact}
	if opts.MaxConcurrentStreams > 0 {
		rq.streams = make(chan struct{}, opts.MaxConcurrentStreams)
	}
	s := &Server{opts: opts, log: opts.Logger, metrics: m, configs: cfgs, requests: rq, idle: newIdleMemory(opts.ReturnMemoryAfter)}
	s.grpc = grpc.NewServer(append(traceOptions(opts.Tracer),
		grpc.MaxRecvMsgSize(opts.MaxMsgSize),
		grpc.MaxSendMsgSize(opts.MaxMsgSize),
		grpc.ForceServerCodecV2(newCodec()),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: opts.KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.ChainUnaryInterceptor(m.unaryInterceptor, s.idle.unaryInterceptor, redactUnary(opts.Exec.Redact)),
		grpc.ChainStreamInterceptor(m.streamInterceptor, s.idle.streamInterceptor, redactStream(opts.Exec.Redact)),
	)...)
	s.sock = newSocket(s.grpc.Serve)
	pluginpb.RegisterConfigManagementPluginServiceServer(s.grpc, &service{r: rq})
	return s, nil
}

// traceOptions install the stats handler that begins each request's span,
// in the trace the repo-server's metadata names (none without a tracer). The
// span's status is the error the interceptors return, redacted.
// CheckPluginConfiguration is left out: the kubelet's probe (cmp-server
// probe) calls it every few seconds, each call a trace of its own.
func traceOptions(t *tracing.Tracer) []grpc.ServerOption {
	if t == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(t.Provider),
		otelgrpc.WithPropagators(t.Propagator),
		// The server's metrics are its Prometheus ones.
		otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelgrpc.WithFilter(func(info *stats.RPCTagInfo) bool {
			return info.FullMethodName != pluginpb.ConfigManagementPluginService_CheckPluginConfiguration_FullMethodName
		}),
	))}
}

// askPassBin links Argo CD's askpass program name to this server in a private
// directory beside the work dir, for plugins that get git credentials;
// "" when it cannot, and git is then pointed at the server by path.
func askPassBin(workDir string, log *zap.Logger) string {
	dir := workDir + askPassLinkSuffix
	self, err := os.Executable()
	if err == nil {
		if err = askpass.LinkDir(dir, self); err == nil {
			return dir
		}
	}
	log.Warn("git's askpass program is named by path instead of argocd on PATH", zap.Error(err))
	return ""
}

// askPassLinkSuffix names askPassBin's directory, beside the work dir (which
// holds request dirs only, as Argo CD's does).
const askPassLinkSuffix = "-askpass"

// resetWorkDir removes what earlier runs left and recreates the dir privately.
func resetWorkDir(dir string) error {
	// Shared trees are read-only (see trees.go).
	unpack.MakeWritable(dir)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("error cleaning work dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("error creating work dir: %w", err)
	}
	return nil
}

// SocketPath is where the server listens, for the configuration in use.
func (s *Server) SocketPath() string {
	return filepath.Join(s.opts.SocketDir, s.configs.get().plugin.SocketName())
}

// ConfigHash is the sha256 (hex) of the plugin.yaml being served, "" when the
// configuration was given in Options.Plugin.
func (s *Server) ConfigHash() string { return s.configs.get().hash }

// Reload reads ConfigPath again. It reports whether a new configuration was
// installed; on an error the previous one stays in use.
func (s *Server) Reload() (bool, error) {
	if s.opts.ConfigPath == "" {
		return false, nil
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	old := s.configs.get()
	next, err := readConfig(s.opts.ConfigPath, s.log)
	if err != nil {
		s.metrics.configReloads.WithLabelValues(reloadFailed).Inc()
		s.log.Error("plugin configuration rejected; still serving the previous one",
			zap.String("file", s.opts.ConfigPath), zap.String("config_hash", old.hash), zap.Error(err))
		return false, err
	}
	if next.hash == old.hash {
		return false, nil
	}
	// The new configuration takes requests first, then the socket moves: a
	// request reaching the new name never runs the old commands, and one that
	// reaches the old name in between runs the new ones.
	oldPath := filepath.Join(s.opts.SocketDir, old.plugin.SocketName())
	newPath := filepath.Join(s.opts.SocketDir, next.plugin.SocketName())
	s.configs.install(next)
	if newPath != oldPath && s.sock.listening() {
		if err := s.sock.listen(newPath); err != nil {
			// Still serving on the old name with the new commands is better
			// than not serving at all; the next change tries again.
			s.metrics.configReloads.WithLabelValues(reloadFailed).Inc()
			s.log.Error("plugin configuration loaded but the socket could not move", zap.String("from", oldPath),
				zap.String("to", newPath), zap.Error(err))
			return true, err
		}
		s.log.Info("plugin socket moved", zap.String("from", oldPath), zap.String("to", newPath))
	}
	s.metrics.configReloads.WithLabelValues(reloadSucceeded).Inc()
	s.log.Info("plugin configuration reloaded", zap.String("file", s.opts.ConfigPath),
		zap.String("previous_hash", old.hash), zap.String("config_hash", next.hash))
	s.logServing(next, newPath)
	return true, nil
}

// watchConfig reloads whenever the file's content changes, until ctx ends.
func (s *Server) watchConfig(ctx context.Context) {
	p := &serving.Poller{
		Interval:    s.opts.ReloadInterval,
		Fingerprint: serving.FileHash(s.opts.ConfigPath),
		OnChange: func(_ string, err error) {
			if err != nil {
				s.metrics.configReloads.WithLabelValues(reloadFailed).Inc()
				s.log.Error("plugin configuration unreadable; still serving the previous one",
					zap.String("file", s.opts.ConfigPath), zap.Error(err))
				return
			}
			_, _ = s.Reload()
		},
	}
	// Not primed: the first check compares the file with what New loaded,
	// so a change between the two is not missed.
	p.Run(ctx)
}

// MetricsAddr is the bound address of the metrics listener, "" before Serve
// listens or when none is configured.
func (s *Server) MetricsAddr() string {
	if p := s.httpAddr.Load(); p != nil {
		return *p
	}
	return ""
}

// metricSet is the server's collectors (for tests).
func (s *Server) metricSet() *metrics { return s.metrics }

// Serve listens on the socket until ctx is done, then stops accepting, lets
// in-flight requests finish within ShutdownGrace, removes the socket and returns
// nil. Argo CD's server only deletes its socket and keeps running until killed.
// With a ConfigPath it reloads the configuration meanwhile (reload.go).
func (s *Server) Serve(ctx context.Context) error {
	if err := os.MkdirAll(s.opts.SocketDir, 0o755); err != nil {
		return fmt.Errorf("error creating socket dir: %w", err)
	}
	path := s.SocketPath()
	if err := s.sock.listen(path); err != nil {
		return err
	}

	var httpSrv *serving.MetricsServer
	if s.opts.MetricsAddr != "" {
		hl, err := net.Listen("tcp", s.opts.MetricsAddr)
		if err != nil {
			s.sock.close()
			s.grpc.Stop()
			return fmt.Errorf("error listening on %s: %w", s.opts.MetricsAddr, err)
		}
		mc := s.opts.MetricsConns
		mc.OnDrop = func(r serving.DropReason) { s.metrics.metricsDropped.WithLabelValues(string(r)).Inc() }
		httpSrv = serving.NewMetricsServer(s.metrics.httpHandler(&s.ready), serving.MetricsOptions{Timeouts: s.opts.MetricsTimeouts, Conns: mc}, nil)
		addr := hl.Addr().String()
		s.httpAddr.Store(&addr)
		go func() { _ = httpSrv.Serve(hl) }()
		s.log.Info("serving metrics", zap.String("addr", hl.Addr().String()))
	}

	s.ready.Store(true)
	s.logServing(s.configs.get(), path)
	pollCtx, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	if s.opts.ConfigPath != "" && s.opts.ReloadInterval > 0 {
		go s.watchConfig(pollCtx)
	}

	var serveErr error
	select {
	case serveErr = <-s.sock.served:
		s.sock.close()
	case <-ctx.Done():
		s.ready.Store(false)
		s.log.Info("shutting down: draining in-flight requests", zap.Duration("grace", s.opts.ShutdownGrace))
		stopPolling()
		// Remove the socket first so the repo-server stops picking this plugin.
		s.sock.close()
		stopped := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(s.opts.ShutdownGrace):
			s.log.Warn("grace period over: cancelling in-flight requests")
			s.grpc.Stop()
			<-stopped
		}
		select {
		case serveErr = <-s.sock.served:
		default:
		}
	}
	if httpSrv != nil {
		shutCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = httpSrv.Shutdown(shutCtx)
		cancel()
	}
	if errors.Is(serveErr, grpc.ErrServerStopped) {
		serveErr = nil
	}
	s.idle.stop()
	s.requests.removals.finish()
	s.requests.trees.RemoveAll()
	return serveErr
}

func (s *Server) logServing(c *loaded, path string) {
	p := c.plugin
	s.log.Info("serving plugin", zap.String("plugin", p.Metadata.Name), zap.String("socket", path),
		zap.Bool("discovery", p.DiscoveryConfigured()), zap.Bool("concurrent", p.Concurrent()), zap.String("config_hash", c.hash))
	if !p.DiscoveryConfigured() {
		s.log.Info("discovery is not configured: Applications must name the plugin", zap.String("name", strings.TrimSuffix(p.SocketName(), ".sock")))
	}
	if n := p.VersionNotice(); n != "" {
		s.log.Warn(n)
	}
}
