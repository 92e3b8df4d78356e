package cli

import (
	"context"
	"flag"

	"github.com/cmp-injector/cmp-injector/cmpserver/playground"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// playgroundCommand serves the plugin playground page (cmpserver/playground) until
// SIGINT or SIGTERM.
func playgroundCommand(ctx context.Context, args []string, stdio serving.IO) error {
	fs := serving.NewFlagSet("cmp-server playground", "--config plugin.yaml --app-dir DIR [--repo-root DIR] [--listen "+playground.DefaultListen+"] [flags]")
	config := fs.String("config", "plugin.yaml", "the plugin.yaml to try; re-read when it changes")
	listen := fs.String("listen", playground.DefaultListen, "address of the page; a non-loopback address is accepted only when named here, and then anyone reaching it can run the plugin")
	var a appFlags
	a.register(fs.FlagSet)
	var opts playground.Options
	fs.IntVar(&opts.MaxEventStreams, "max-event-streams", playground.DefaultMaxEventStreams, "pages that may follow changes at once; one more is answered 503")
	limitFlags(fs.FlagSet, &opts.Limits)
	if err := execFlags(fs.FlagSet, &opts.Exec); err != nil {
		return fs.Errorf("%v", err)
	}
	level, format := logFlags(fs.FlagSet)
	if err := fs.Parse(args); err != nil {
		return err
	}
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "listen" })
	log, err := newLogger(level, format, stdio.Stderr)
	if err != nil {
		return fs.Errorf("%v", err)
	}
	root, _, app, err := a.resolve()
	if err != nil {
		return err
	}
	opts.ConfigPath, opts.RepoRoot, opts.AppDir = *config, root, a.appDir
	opts.App, opts.Parameters = app, app.Parameters
	opts.LogLevel, opts.LogFormat, opts.Logger = *level, *format, log
	srv, err := playground.New(opts)
	if err != nil {
		return err
	}
	ctx, stop := serving.ShutdownContext(ctx)
	defer stop()
	return srv.ListenAndServe(ctx, *listen, explicit)
}
