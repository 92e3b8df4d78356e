// Package cli is the cmp-server command line: serve (the default), run, call,
// copy, probe, publish, playground and version. cmd/cmp-server adds the helm subcommand. Every
// command returns an error; serving.Program prints it once and picks the exit
// code.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/cmp-injector/cmp-injector/cmpserver/askpass"
	"github.com/cmp-injector/cmp-injector/cmpserver/command"
	"github.com/cmp-injector/cmp-injector/cmpserver/redact"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
	"github.com/cmp-injector/cmp-injector/pkg/version"
)

// Commands are cmp-server's own subcommands; cmd/cmp-server adds helm.
func Commands() []serving.Command {
	return []serving.Command{
		{Name: "serve", Summary: "serve the plugin.yaml in --config-dir on a unix socket, like argocd-cmp-server", Run: serveCommand},
		{Name: "run", Summary: "run a plugin.yaml's generate, parameters or match locally, as the sidecar would", Run: runCommand},
		{Name: "call", Summary: "send a running plugin server a request over its socket, as a repo-server would", Run: callCommand},
		{Name: "probe", Summary: "exit 0 once this container's plugin server answers; --wait until it does (the sidecar's postStart hook)", Run: probeCommand},
		{Name: "publish", Summary: "publish each plugin's socket from its private directory to the repo-server's (the injected pod's sockets container)", Run: publishCommand},
		{Name: "copy", Summary: "copy this binary to DEST (the init container's job)", Run: copyCommand},
		{Name: "playground", Summary: "serve a local page to write a plugin against: its parameters as Argo CD shows them, live manifests", Run: playgroundCommand},
		serving.VersionCommand("cmp-server", version.Version),
	}
}

// Main dispatches args (without the program name) and returns the exit code.
// With no args, or when the first arg is a flag, it serves, like Argo CD's
// argocd-cmp-server entrypoint.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, extra ...serving.Command) int {
	if askpass.IsAskPass(os.Getenv, args) {
		// git in a plugin command runs this binary as its askpass program.
		return askpass.Main(ctx, os.Getenv, args, stdout, stderr)
	}
	p := serving.Program{
		Name:     "cmp-server",
		Summary:  "A drop-in argocd-cmp-server for Argo CD plugin sidecars, with its local runner and client.",
		Commands: append(Commands(), extra...),
		Default:  "serve",
	}
	return p.Main(ctx, args, serving.IO{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

// envDefault returns the environment variable's value or def.
func envDefault(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// zapLevels maps Argo CD's level names (as command.NormalizeLogLevel returns
// them) to zap's; zap has no trace, so trace logs what debug logs.
var zapLevels = map[string]zapcore.Level{
	"trace": zapcore.DebugLevel, "debug": zapcore.DebugLevel, "info": zapcore.InfoLevel,
	"warning": zapcore.WarnLevel, "error": zapcore.ErrorLevel, "fatal": zapcore.FatalLevel, "panic": zapcore.PanicLevel,
}

// newLogger builds a zap logger writing JSON (or console text) to stderr. It
// accepts what argocd-cmp-server accepts, so existing sidecar args keep working,
// and rewrites level and format in Argo CD's spelling (e.g. WARN → warning, an
// empty format → text), which is what the plugin's commands are then given.
func newLogger(level, format *string, stderr io.Writer) (*zap.Logger, error) {
	var err error
	if *level, err = command.NormalizeLogLevel(*level); err != nil {
		return nil, fmt.Errorf("--loglevel: %w", err)
	}
	if *format, err = command.NormalizeLogFormat(*format); err != nil {
		return nil, fmt.Errorf("--logformat: %w", err)
	}
	cfg := zap.NewProductionEncoderConfig()
	cfg.EncodeTime = zapcore.ISO8601TimeEncoder
	enc := zapcore.NewJSONEncoder(cfg)
	if *format == "text" {
		enc = zapcore.NewConsoleEncoder(cfg)
	}
	// The sidecar's Secret values never reach a log line, whoever logs them
	// (cmpserver/redact): zap writes each entry with one Write, redacted whole.
	stderr = redact.FromEnv(os.Environ()).Writer(stderr)
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(stderr), zapLevels[*level])), nil
}
