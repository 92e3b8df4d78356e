// Package playground is `cmp-server playground`: a local web page, and the JSON
// API behind it, where a plugin author sees a plugin's parameters as Argo CD's
// UI shows them, edits them, and watches the manifests re-render as files change.
//
// Every run goes through the local runner (local.Generate and friends),
// the same path as `cmp-server run`, so what the page shows is what a sidecar
// would answer. The page and its assets are embedded: it works offline.
package playground

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/cmpserver/command"
	"github.com/cmp-injector/cmp-injector/cmpserver/local"
	"github.com/cmp-injector/cmp-injector/cmpserver/unpack"
	"github.com/cmp-injector/cmp-injector/pkg/params"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
)

// DefaultListen is where the playground listens unless told otherwise.
const DefaultListen = "127.0.0.1:7777"

// defaultPollInterval is how often the app dir and plugin.yaml are checked.
const defaultPollInterval = 200 * time.Millisecond

// Options configure a playground.
type Options struct {
	// ConfigPath is the plugin.yaml, re-read whenever it changes.
	ConfigPath string
	// RepoRoot is the tree sent to the plugin (the repository); AppDir is the
	// Application's directory inside it.
	RepoRoot, AppDir string
	// App holds the build env defaults (name, namespace, kube version...) the
	// page starts with; SourcePath, Parameters and HasPlugin are filled in.
	App client.App
	// Parameters are the Application parameters the page starts with.
	Parameters []params.AppParameter
	Exec       command.Options // command.DefaultOptions() when zero
	Limits     unpack.Limits   // a zero field: no limit
	// Env is the environment commands start from, as a sidecar's server
	// passes its own; nil: this process's.
	Env []string
	// LogLevel and LogFormat are exported to the commands as a sidecar does.
	LogLevel, LogFormat string
	Logger              *zap.Logger
	// PollInterval is how often the app dir and plugin.yaml are checked for
	// changes (default defaultPollInterval).
	PollInterval time.Duration
	// MaxShownBytes bounds the YAML of the manifests one generate answer
	// carries (default 4 MiB); the rest is counted, not sent.
	MaxShownBytes int
	// MaxEventStreams caps the pages following changes at once (default
	// DefaultMaxEventStreams): each holds a connection and a goroutine
	// until it goes, and a page reached from elsewhere could open thousands.
	MaxEventStreams int
}

// DefaultMaxEventStreams is far more tabs than one author opens.
const DefaultMaxEventStreams = 64

// Server is one playground: its state (the plugin, reloaded on change), the
// runs in progress and the subscribers to change events.
type Server struct {
	opts       Options
	appRelPath string
	log        *zap.Logger

	mu        sync.Mutex
	plugin    *pluginconfig.Plugin
	configErr error
	warnings  []string

	runs   runs
	events *broker
	watch  *watcher
}

// New checks the options and loads plugin.yaml. A plugin.yaml that does not load
// is not an error here: the page shows why, and the playground picks up the fix.
func New(opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Exec == (command.Options{}) {
		opts.Exec = command.DefaultOptions()
	}
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = defaultPollInterval
	}
	if opts.MaxShownBytes <= 0 {
		opts.MaxShownBytes = 4 << 20
	}
	if opts.MaxEventStreams <= 0 {
		opts.MaxEventStreams = DefaultMaxEventStreams
	}
	var err error
	if opts.AppDir, err = filepath.Abs(opts.AppDir); err != nil {
		return nil, err
	}
	if opts.RepoRoot == "" {
		opts.RepoRoot = opts.AppDir
	}
	if opts.RepoRoot, err = filepath.Abs(opts.RepoRoot); err != nil {
		return nil, err
	}
	if opts.ConfigPath, err = filepath.Abs(opts.ConfigPath); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(opts.AppDir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("--app-dir %s is not a directory", opts.AppDir)
	}
	rel, err := filepath.Rel(opts.RepoRoot, opts.AppDir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("--app-dir %s is not inside --repo-root %s", opts.AppDir, opts.RepoRoot)
	}
	if opts.App.Name == "" {
		opts.App.Name = filepath.Base(opts.AppDir)
	}
	s := &Server{opts: opts, appRelPath: rel, log: opts.Logger, events: newBroker(opts.MaxEventStreams)}
	s.reload()
	if s.configErr != nil && errors.Is(s.configErr, os.ErrNotExist) {
		return nil, s.configErr
	}
	s.watch = newWatcher(opts.AppDir, opts.ConfigPath, opts.PollInterval, opts.Logger)
	return s, nil
}

// reload re-reads plugin.yaml; on failure the plugin is cleared so that no run
// uses a configuration the author has since changed.
func (s *Server) reload() {
	p, warnings, err := pluginconfig.Load(s.opts.ConfigPath)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.plugin, s.warnings, s.configErr = p, warnings, err
	if err != nil {
		s.log.Warn("plugin configuration does not load", zap.Error(err))
	}
}

// current returns the plugin in use, or why there is none.
func (s *Server) current() (*pluginconfig.Plugin, []string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.plugin, s.warnings, s.configErr
}

// watchChanges reports file changes since baseline to subscribers until ctx
// ends, re-reading plugin.yaml first when it changed.
func (s *Server) watchChanges(ctx context.Context, baseline map[string]stamp) {
	s.watch.run(ctx, baseline, func(c change) {
		if c.Config {
			s.reload()
		}
		_, _, err := s.current()
		ev := changeEvent{Paths: c.Paths, Config: c.Config, More: c.More}
		if err != nil {
			ev.ConfigError = err.Error()
		}
		s.events.publish(ev)
	})
}

// request is the local runner request for one run.
func (s *Server) request(p *pluginconfig.Plugin, env []string, onCommand func(command.Report)) local.Request {
	return local.Request{
		Plugin: p, RepoRoot: s.opts.RepoRoot, AppRelPath: s.appRelPath, Env: env,
		Limits: s.opts.Limits, Exec: s.opts.Exec, Logger: s.log, BaseEnv: s.opts.Env,
		LogLevel: s.opts.LogLevel, LogFormat: s.opts.LogFormat, OnCommand: onCommand,
	}
}

// ListenAndServe serves the page on addr until ctx ends. remoteAllowed says the
// address was named explicitly by the user; without it a non-loopback address is
// refused, and with it the log warns that anyone who reaches the port can run
// the plugin.
func (s *Server) ListenAndServe(ctx context.Context, addr string, remoteAllowed bool) error {
	loopback, err := checkListen(addr)
	if err != nil {
		return err
	}
	if !loopback {
		if !remoteAllowed {
			return fmt.Errorf("refusing to listen on %s, which is not a loopback address: name it with --listen to allow it", addr)
		}
		s.log.Warn("the playground listens on a non-loopback address: anyone who reaches it can run this plugin with any parameters on this machine", zap.String("listen", addr))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv := &http.Server{
		Handler:           s.Handler(ln.Addr().String()),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	// The baseline is taken before the page can load, not by the watching
	// goroutine whenever it first runs: an edit saved after the page opened
	// could otherwise become part of the baseline and never be reported.
	go s.watchChanges(ctx, s.watch.snapshot())
	s.log.Info("playground listening", zap.String("url", "http://"+ln.Addr().String()+"/"),
		zap.String("config", s.opts.ConfigPath), zap.String("appDir", s.opts.AppDir))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.runs.cancelAll()
	shutdown, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	// Event streams never end on their own: Shutdown waits for them only until
	// the timeout, then Close drops them.
	if err := srv.Shutdown(shutdown); err != nil {
		srv.Close()
	}
	return nil
}

// checkListen parses a listen address and reports whether it is loopback only.
// The host must be named: ":7777" listens on every interface, which is refused
// as ambiguous, and a host name other than localhost is refused too, because
// what it resolves to can change under the playground.
func checkListen(addr string) (loopback bool, err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("--listen %q: %w", addr, err)
	}
	if host == "localhost" {
		return true, nil
	}
	if host == "" {
		return false, fmt.Errorf("--listen %q names no host: write 127.0.0.1%s for this machine only, or 0.0.0.0%s for every interface", addr, addr, addr)
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false, fmt.Errorf("--listen %q: the host must be an IP address or localhost", addr)
	}
	return ip.IsLoopback(), nil
}
