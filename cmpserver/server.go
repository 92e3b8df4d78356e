// Package cmpserver is a wire-compatible implementation of Argo CD's sidecar
// plugin server (argocd-cmp-server): gRPC plugin.ConfigManagementPluginService on
// a unix socket, running one ConfigManagementPlugin's commands.
package cmpserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// Options configure a Server. Zero values take the defaults noted.
type Options struct {
	Plugin *pluginconfig.Plugin
	// SocketDir holds the socket <name>[-<version>].sock.
	SocketDir string
	// WorkDir is the root of per-request dirs; it is wiped at start.
	WorkDir string
	Limits  Limits      // DefaultLimits
	Exec    ExecOptions // DefaultExecOptions
	// MaxMsgSize is the gRPC message size limit in bytes (100 MiB).
	MaxMsgSize int
	// KeepaliveMinTime is the shortest client ping interval allowed (10 s); the
	// repo-server pings every 20 s during long silent calls.
	KeepaliveMinTime time.Duration
	// ShutdownGrace is how long in-flight requests may run after SIGTERM (25 s).
	ShutdownGrace time.Duration
	// StreamIdleTimeout ends a stream that sends no message for this long (60 s;
	// < 0: never). The repo-server sends its chunks back to back, so only a client
	// that hung mid-stream ever waits this long, and it would otherwise hold a
	// goroutine, an open file and a request dir until it disconnects.
	StreamIdleTimeout time.Duration
	// MaxConcurrentStreams caps the streaming requests (GenerateManifest,
	// MatchRepository, GetParametersAnnouncement) handled at once, from the first
	// message to the response (64; < 0: no cap). One more fails at once with
	// ResourceExhausted.
	MaxConcurrentStreams int
	// MetricsAddr, if set, serves /healthz, /readyz and /metrics over HTTP.
	MetricsAddr string
	// MetricsTimeouts bound that listener's connections (zero fields:
	// serving.DefaultTimeouts).
	MetricsTimeouts serving.Timeouts
	Logger          *zap.Logger
	// LogLevel and LogFormat are the server's --loglevel and --logformat (Argo CD's
	// names, any case; "" takes its defaults info and json). Every command sees
	// them as ARGOCD_LOG_LEVEL and ARGOCD_LOG_FORMAT, spelled as Argo CD exports
	// them (see NormalizeLogLevel). They do not configure Logger.
	LogLevel, LogFormat string
}

func (o *Options) defaults() {
	if o.Limits == (Limits{}) {
		o.Limits = DefaultLimits
	}
	if o.Exec == (ExecOptions{}) {
		o.Exec = DefaultExecOptions
	}
	if o.MaxMsgSize <= 0 {
		o.MaxMsgSize = 100 << 20
	}
	if o.KeepaliveMinTime <= 0 {
		o.KeepaliveMinTime = 10 * time.Second
	}
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = 25 * time.Second
	}
	if o.StreamIdleTimeout == 0 {
		o.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	if o.MaxConcurrentStreams == 0 {
		o.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
}

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
	metrics *Metrics
	engine  *Engine
	grpc    *grpc.Server
	ready   atomic.Bool
	// httpAddr is the bound metrics address once Serve listens.
	httpAddr atomic.Pointer[string]
	// streams holds one token per streaming request in flight (nil: no cap).
	streams chan struct{}
}

// New validates the options, wipes and recreates the work dir, and builds the
// gRPC server.
func New(opts Options) (*Server, error) {
	opts.defaults()
	if opts.Plugin == nil {
		return nil, errors.New("no plugin configuration")
	}
	if err := opts.Plugin.Validate(); err != nil {
		return nil, err
	}
	if err := normalizeLogSettings(&opts.LogLevel, &opts.LogFormat); err != nil {
		return nil, err
	}
	if opts.SocketDir == "" || opts.WorkDir == "" {
		return nil, errors.New("socket dir and work dir are required")
	}
	if err := resetWorkDir(opts.WorkDir); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: opts.Logger, metrics: NewMetrics()}
	if opts.MaxConcurrentStreams > 0 {
		s.streams = make(chan struct{}, opts.MaxConcurrentStreams)
	}
	s.engine = newEngine(opts.Plugin, opts.Limits, opts.WorkDir, opts.Exec, logEnv(opts.LogLevel, opts.LogFormat), s.log, s.metrics)
	s.grpc = grpc.NewServer(
		grpc.MaxRecvMsgSize(opts.MaxMsgSize),
		grpc.MaxSendMsgSize(opts.MaxMsgSize),
		grpc.ForceServerCodecV2(newCodec()),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: opts.KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.ChainUnaryInterceptor(s.metrics.unaryInterceptor),
		grpc.ChainStreamInterceptor(s.metrics.streamInterceptor),
	)
	pluginpb.RegisterConfigManagementPluginServiceServer(s.grpc, &service{s: s})
	return s, nil
}

// resetWorkDir removes what earlier runs left and recreates the dir privately.
func resetWorkDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("error cleaning work dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("error creating work dir: %w", err)
	}
	return nil
}

// SocketPath is where the server listens.
func (s *Server) SocketPath() string {
	return filepath.Join(s.opts.SocketDir, s.opts.Plugin.SocketName())
}

// MetricsAddr is the bound address of the metrics listener, "" before Serve
// listens or when none is configured.
func (s *Server) MetricsAddr() string {
	if p := s.httpAddr.Load(); p != nil {
		return *p
	}
	return ""
}

// Metrics exposes the server's registry (for tests and embedders).
func (s *Server) Metrics() *Metrics { return s.metrics }

// Serve listens on the socket until ctx is done, then stops accepting, lets
// in-flight requests finish within ShutdownGrace, removes the socket and returns
// nil. Argo CD's server only deletes its socket and keeps running until killed.
func (s *Server) Serve(ctx context.Context) error {
	path := s.SocketPath()
	if err := os.MkdirAll(s.opts.SocketDir, 0o755); err != nil {
		return fmt.Errorf("error creating socket dir: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("error removing stale socket: %w", err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("error listening on %s: %w", path, err)
	}
	defer os.Remove(path)

	var httpSrv *http.Server
	if s.opts.MetricsAddr != "" {
		hl, err := net.Listen("tcp", s.opts.MetricsAddr)
		if err != nil {
			lis.Close()
			return fmt.Errorf("error listening on %s: %w", s.opts.MetricsAddr, err)
		}
		httpSrv = serving.MetricsServer(s.metrics.httpHandler(&s.ready), s.opts.MetricsTimeouts, nil)
		addr := hl.Addr().String()
		s.httpAddr.Store(&addr)
		go func() { _ = httpSrv.Serve(hl) }()
		s.log.Info("serving metrics", zap.String("addr", hl.Addr().String()))
	}

	served := make(chan error, 1)
	go func() { served <- s.grpc.Serve(lis) }()
	s.ready.Store(true)
	s.log.Info("serving plugin", zap.String("plugin", s.opts.Plugin.Metadata.Name), zap.String("socket", path),
		zap.Bool("discovery", s.opts.Plugin.DiscoveryConfigured()), zap.Bool("concurrent", s.opts.Plugin.Concurrent()))
	if !s.opts.Plugin.DiscoveryConfigured() {
		s.log.Info("discovery is not configured: Applications must name the plugin", zap.String("name", s.opts.Plugin.SocketName()[:len(s.opts.Plugin.SocketName())-len(".sock")]))
	}

	var serveErr error
	select {
	case serveErr = <-served:
	case <-ctx.Done():
		s.ready.Store(false)
		s.log.Info("shutting down: draining in-flight requests", zap.Duration("grace", s.opts.ShutdownGrace))
		// Remove the socket first so the repo-server stops picking this plugin.
		_ = os.Remove(path)
		stopped := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(s.opts.ShutdownGrace):
			s.log.Warn("grace period over: cancelling in-flight requests")
			s.grpc.Stop()
			<-stopped
		}
		serveErr = <-served
	}
	if httpSrv != nil {
		shutCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = httpSrv.Shutdown(shutCtx)
		cancel()
	}
	if errors.Is(serveErr, grpc.ErrServerStopped) {
		serveErr = nil
	}
	return serveErr
}
