package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/cmp-injector/cmp-injector/cmpserver"
	"github.com/cmp-injector/cmp-injector/cmpserver/command"
	"github.com/cmp-injector/cmp-injector/cmpserver/redact"
	"github.com/cmp-injector/cmp-injector/cmpserver/tracing"
	"github.com/cmp-injector/cmp-injector/cmpserver/unpack"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
	"github.com/cmp-injector/cmp-injector/pkg/version"
)

// execFlags registers the command limits shared by serve, run and the
// playground. --exec-timeout and --kill-grace default to Argo CD's
// ARGOCD_EXEC_TIMEOUT and ARGOCD_EXEC_FATAL_TIMEOUT; a value that is not a
// duration is an error (Argo CD's util/exec logs it and takes its default,
// which would leave an admin's bound silently unapplied).
func execFlags(fs *flag.FlagSet, o *command.Options) error {
	*o = command.DefaultOptions()
	timeout, err := envDurationStrict(keys.EnvExecTimeout, o.Timeout)
	if err != nil {
		return err
	}
	grace, err := envDurationStrict(keys.EnvExecFatalTimeout, o.KillGrace)
	if err != nil {
		return err
	}
	fs.DurationVar(&o.Timeout, "exec-timeout", timeout, "maximum run time of one plugin command (0 = only the request deadline) (env "+keys.EnvExecTimeout+")")
	fs.DurationVar(&o.KillGrace, "kill-grace", grace, "time between SIGTERM and SIGKILL to a command's process group (env "+keys.EnvExecFatalTimeout+")")
	fs.DurationVar(&o.OutputGrace, "output-grace", o.OutputGrace, "once a command exits, how long a background child may keep its stdout or stderr open before it is killed and the output read so far is used")
	fs.DurationVar(&o.DeadlineBuffer, "deadline-buffer", o.DeadlineBuffer, "commands are stopped this long before the request deadline")
	fs.Int64Var(&o.MaxStdoutBytes, "max-stdout-bytes", o.MaxStdoutBytes, "a command printing more than this to stdout fails")
	fs.Int64Var(&o.MaxStderrBytes, "max-stderr-bytes", o.MaxStderrBytes, "captured stderr is truncated to this many bytes")
	return nil
}

// envDurationStrict is the Go duration in the environment variable name
// ("90s", "2m"), def when unset or empty, an error naming it otherwise.
func envDurationStrict(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q is not a duration (e.g. 90s): %w", name, v, err)
	}
	return d, nil
}

// limitFlags registers the tarball limits shared by serve and run.
func limitFlags(fs *flag.FlagSet, l *unpack.Limits) {
	*l = unpack.DefaultLimits()
	fs.Int64Var(&l.MaxCompressedBytes, "max-compressed-bytes", l.MaxCompressedBytes, "maximum size of a received .tar.gz (0 = no limit)")
	fs.Int64Var(&l.MaxExtractedBytes, "max-extracted-bytes", l.MaxExtractedBytes, "maximum total size of the files in a tarball (0 = no limit)")
	fs.IntVar(&l.MaxFiles, "max-files", l.MaxFiles, "maximum number of entries in a tarball (0 = no limit)")
}

// logFlags registers --loglevel and --logformat with Argo CD's env defaults.
// Commands see both as ARGOCD_LOG_LEVEL and ARGOCD_LOG_FORMAT.
func logFlags(fs *flag.FlagSet) (level, format *string) {
	level = fs.String("loglevel", envDefault(keys.EnvCMPServerLogLevel, "info"), "log level: trace, debug, info, warn, error, fatal or panic; commands see it as "+keys.EnvLogLevel+" (env "+keys.EnvCMPServerLogLevel+")")
	format = fs.String("logformat", envDefault(keys.EnvCMPServerLogFormat, "json"), "log format: json or text; commands see it as "+keys.EnvLogFormat+" (env "+keys.EnvCMPServerLogFormat+")")
	return level, format
}

// serverDirFlags registers the directories serve and probe must agree on: the
// probe runs in the sidecar with serve's env, so the same defaults find the
// socket serve made.
func serverDirFlags(fs *flag.FlagSet, configDir, socketDir *string) {
	fs.StringVar(configDir, "config-dir", keys.PluginConfigDir, "directory holding plugin.yaml")
	fs.StringVar(configDir, "config-dir-path", keys.PluginConfigDir, "alias of --config-dir (Argo CD's name)")
	fs.StringVar(socketDir, "socket-dir", envDefault(keys.EnvPluginSockFilePath, keys.PluginSocketDir), "directory of the plugin socket (env "+keys.EnvPluginSockFilePath+")")
}

// serveCommand runs the plugin server until SIGTERM or SIGINT.
func serveCommand(ctx context.Context, args []string, stdio serving.IO) error {
	fs := serving.NewFlagSet("cmp-server serve", "[flags]   (also: cmp-server [flags])")
	opts := cmpserver.DefaultOptions()
	var configDir string
	serverDirFlags(fs.FlagSet, &configDir, &opts.SocketDir)
	workBase := fs.String("work-dir", envDefault(keys.EnvCMPWorkDir, os.TempDir()), "parent of the _cmp_server request dir, which is wiped at start (env "+keys.EnvCMPWorkDir+", else $TMPDIR)")
	fs.StringVar(&opts.MetricsAddr, "metrics-addr", "", "if set, serve /healthz, /readyz and /metrics on this TCP address, e.g. :8081")
	fs.IntVar(&opts.MetricsConns.Max, "metrics-max-connections", serving.DefaultMetricsMaxConnections, "connections the --metrics-addr port holds at once; a new one takes the slot of the oldest, so the kubelet's probe never waits behind idle ones")
	fs.IntVar(&opts.MetricsConns.PerIP, "metrics-max-connections-per-ip", 0, "connections the --metrics-addr port holds from one client address, at most --metrics-max-connections; more are closed at once (0: "+strconv.Itoa(serving.DefaultMetricsMaxConnectionsPerIP)+", or --metrics-max-connections when lower)")
	fs.DurationVar(&opts.ShutdownGrace, "shutdown-grace", opts.ShutdownGrace, "how long in-flight requests may finish after SIGTERM")
	maxMsgMB := fs.Int("max-msg-size-mb", envInt(keys.EnvGRPCMaxSizeMB, 100), "gRPC message size limit in MiB (env "+keys.EnvGRPCMaxSizeMB+")")
	fs.DurationVar(&opts.StreamIdleTimeout, "stream-idle-timeout", cmpserver.DefaultStreamIdleTimeout, "end a request stream that sends no message for this long (0 = never)")
	fs.IntVar(&opts.MaxConcurrentStreams, "max-concurrent-streams", cmpserver.DefaultMaxConcurrentStreams, "streaming requests handled at once; one more fails at once with ResourceExhausted (0 = no cap)")
	fs.DurationVar(&opts.ReturnMemoryAfter, "return-memory-after", cmpserver.DefaultReturnMemoryAfter, "once no request has run for this long, return the free heap to the kernel: what a request's unpack grew is not held while the sidecar is idle (0 = never)")
	fs.DurationVar(&opts.ReloadInterval, "config-reload-interval", cmpserver.DefaultReloadInterval, "how often plugin.yaml is checked for a change, which then serves new requests without a restart (0 = never)")
	fs.DurationVar(&opts.KeepaliveMinTime, "keepalive-min", envDuration(keys.EnvGRPCKeepAliveMin, 10*time.Second), "shortest client keepalive ping interval allowed (env "+keys.EnvGRPCKeepAliveMin+")")
	limitFlags(fs.FlagSet, &opts.Limits)
	if err := execFlags(fs.FlagSet, &opts.Exec); err != nil {
		return fs.Errorf("%v", err)
	}
	if err := renderCacheFlags(fs.FlagSet, &opts.RenderCache); err != nil {
		return fs.Errorf("%v", err)
	}
	level, format := logFlags(fs.FlagSet)
	var traceCfg tracing.Config
	if err := tracing.Flags(fs.FlagSet, &traceCfg); err != nil {
		return fs.Errorf("%v", err)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := newLogger(level, format, stdio.Stderr)
	if err != nil {
		return fs.Errorf("%v", err)
	}
	defer log.Sync() //nolint:errcheck // stderr sync errors are meaningless
	// Start refuses a config with problems, every one named.
	tracer, err := tracing.Start(ctx, traceCfg, version.Version)
	if err != nil {
		return fs.Errorf("%v", err)
	}
	if tracer != nil {
		log.Info("traces are sent to an OpenTelemetry collector", zap.String("otlp_address", traceCfg.Address),
			zap.Bool("insecure", traceCfg.Insecure), zap.Strings("header_names", traceCfg.HeaderNames()), zap.Float64("sample_ratio", traceCfg.SampleRatio))
		defer func() {
			// Spans still batched are sent before the sidecar exits; a
			// collector that is gone costs at most this long.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := tracer.Shutdown(sctx); err != nil {
				log.Warn("traces not sent at shutdown", zap.Error(err))
			}
		}()
	}
	opts.Tracer = tracer
	if c := opts.RenderCache; c.Enabled() {
		log.Info("render cache on: a repeated GenerateManifest is answered without running the plugin", zap.Int64("max_bytes", c.MaxBytes),
			zap.Duration("ttl", c.TTL), zap.Bool("revision_independent", c.RevisionIndependent), zap.Bool("allow_secrets", c.AllowSecrets))
	}
	// The library reads 0 as "default"; on the command line 0 means "off".
	// The server loads the file and reloads it when it changes.
	opts.ConfigPath = pluginconfig.ConfigPath(configDir)
	opts.WorkDir = filepath.Join(*workBase, "_cmp_server")
	opts.MaxMsgSize = *maxMsgMB << 20
	opts.Logger = log
	opts.Env = os.Environ()
	opts.Exec.Redact = redact.FromEnv(opts.Env)
	logRedaction(log, opts.Exec.Redact)
	opts.LogLevel, opts.LogFormat = *level, *format
	if err := opts.Validate(); err != nil {
		return fs.Errorf("%v", err)
	}
	srv, err := cmpserver.New(opts)
	if err != nil {
		return fmt.Errorf("cannot start: %w", err)
	}
	// The sidecar's first process adopts every orphan in the container; without a
	// reaper they would stay zombies until the pod is deleted.
	if stopReaper, err := command.StartReaper(log); err != nil {
		log.Warn("orphaned processes will not be reaped", zap.Error(err))
	} else {
		defer stopReaper()
	}
	log.Info("cmp-server starting", zap.String("version", version.Version))
	ctx, stop := serving.ShutdownContext(ctx)
	defer stop()
	if err := srv.Serve(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("server failed: %w", err)
	}
	log.Info("cmp-server stopped")
	return nil
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// envDuration accepts Go durations ("10s"); Argo CD's variable also takes them.
// Unlike envDurationStrict, a value that is not one, or not positive, takes def.
func envDuration(name string, def time.Duration) time.Duration {
	if v, err := envDurationStrict(name, def); err == nil && v > 0 {
		return v
	}
	return def
}

// logRedaction says which variables' values are redacted (names only), and
// which Secret variables are too short to be.
func logRedaction(log *zap.Logger, r *redact.Redactor) {
	if names := r.Names(); len(names) > 0 {
		log.Info("the values of these Secret variables are redacted from logs and errors", zap.Strings("names", names))
	}
	if short := r.Short(); len(short) > 0 {
		log.Warn(fmt.Sprintf("these Secret variables are shorter than %d bytes and are not redacted", redact.MinLen), zap.Strings("names", short))
	}
}
