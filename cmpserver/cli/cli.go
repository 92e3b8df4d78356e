// Package cli is the cmp-server command line: serve (the default), run, call,
// copy, probe and version. cmd/cmp-server adds the helm subcommand.
package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/cmp-injector/cmp-injector/cmpserver"
	"github.com/cmp-injector/cmp-injector/pkg/version"
)

// Command is one subcommand.
type Command func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// Main dispatches args (without the program name). With no args, or when the
// first arg is a flag, it serves, like Argo CD's argocd-cmp-server entrypoint.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, extra map[string]Command) int {
	commands := map[string]Command{
		"serve":   Serve,
		"run":     Run,
		"call":    Call,
		"copy":    Copy,
		"probe":   Probe,
		"version": printVersion,
	}
	for name, c := range extra {
		commands[name] = c
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return Serve(ctx, args, stdout, stderr)
	}
	if c, ok := commands[args[0]]; ok {
		return c(ctx, args[1:], stdout, stderr)
	}
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(stderr, "cmp-server: unknown command %q (commands: %s; no command means serve)\n", args[0], strings.Join(names, ", "))
	return 2
}

func printVersion(_ context.Context, _ []string, stdout, _ io.Writer) int {
	fmt.Fprintln(stdout, version.Version)
	return 0
}

// newFlagSet returns a FlagSet that prints errors and usage to stderr.
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s\n\nFlags:\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseWithAction parses flags that may come before or after one positional
// action word, e.g. "run generate --config f" or "run --config f generate".
func parseWithAction(fs *flag.FlagSet, args []string) (string, error) {
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if fs.NArg() == 0 {
		return "", nil
	}
	action := fs.Arg(0)
	if err := fs.Parse(fs.Args()[1:]); err != nil {
		return "", err
	}
	if fs.NArg() > 0 {
		return "", fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return action, nil
}

// envDefault returns the environment variable's value or def.
func envDefault(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// zapLevels maps Argo CD's level names (as cmpserver.NormalizeLogLevel returns
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
	if *level, err = cmpserver.NormalizeLogLevel(*level); err != nil {
		return nil, fmt.Errorf("--loglevel: %w", err)
	}
	if *format, err = cmpserver.NormalizeLogFormat(*format); err != nil {
		return nil, fmt.Errorf("--logformat: %w", err)
	}
	cfg := zap.NewProductionEncoderConfig()
	cfg.EncodeTime = zapcore.ISO8601TimeEncoder
	enc := zapcore.NewJSONEncoder(cfg)
	if *format == "text" {
		enc = zapcore.NewConsoleEncoder(cfg)
	}
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(stderr), zapLevels[*level])), nil
}
