package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/cmp-injector/cmp-injector/cmpserver/publish"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// namesFlag collects a repeated flag's plugin names.
type namesFlag []string

func (n *namesFlag) String() string { return strings.Join(*n, ",") }

func (n *namesFlag) Set(v string) error {
	if err := publish.CheckPluginName(v); err != nil {
		return err
	}
	*n = append(*n, v)
	return nil
}

// publishCommand runs the injected pod's sockets container (see package
// publish). With --wait it is that container's postStart hook: it returns once
// every plugin's socket is published and answers, so the repo-server, started
// after it, finds every plugin at its first listing.
func publishCommand(ctx context.Context, args []string, stdio serving.IO) error {
	fs := serving.NewFlagSet("cmp-server publish", "[--plugin NAME]... [--image-configured NAME]... [--config-dir DIR] [--socket-dir DIR] [--wait [--timeout 60s] [--termination-log FILE]]")
	var configured, fromImage namesFlag
	fs.Var(&configured, "plugin", "a plugin whose socket to publish under the name its plugin.yaml in --config-dir/NAME/ gives (repeatable)")
	fs.Var(&fromImage, "image-configured", "a plugin whose plugin.yaml is in its image: the first socket its server makes names it, for the pod's life (repeatable)")
	configDir := fs.String("config-dir", keys.SocketsConfigDir, "holds NAME/plugin.yaml of each --plugin")
	dir := fs.String("socket-dir", envDefault(keys.EnvPluginSockFilePath, keys.PluginSocketDir), "the repo-server's socket directory: the whole plugins volume (env "+keys.EnvPluginSockFilePath+")")
	wait := fs.Bool("wait", false, "do not publish: wait until every socket is published and answers, then exit 0 (the container's postStart hook)")
	timeout := fs.Duration("timeout", time.Minute, "with --wait, how long to wait")
	termLog := fs.String("termination-log", "", "with --wait, on failure also write the reason to this file (the container's terminationMessagePath)")
	level, format := logFlags(fs.FlagSet)
	fs.Notes("Each plugin's sidecar binds its socket in " + keys.PrivatePlugins + "/<NAME> of the volume, the only part it mounts; this container hard-links it into the volume's root, where Argo CD's repo-server lists and dials sockets.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var routes []publish.Route
	for _, n := range configured {
		routes = append(routes, publish.Route{Plugin: n, Config: filepath.Join(*configDir, n, keys.PluginConfigFile)})
	}
	for _, n := range fromImage {
		routes = append(routes, publish.Route{Plugin: n})
	}
	if len(routes) == 0 {
		return fs.Errorf("at least one --plugin or --image-configured is needed")
	}
	p := &publish.Publisher{Root: *dir, Routes: routes}
	if *wait {
		err := waitPublished(ctx, p, *timeout)
		if err != nil && *termLog != "" {
			_ = overwrite(*termLog, err.Error())
		}
		if err == nil {
			fmt.Fprintf(stdio.Stdout, "%d plugin sockets published\n", len(routes))
		}
		return err
	}
	log, err := newLogger(level, format, stdio.Stderr)
	if err != nil {
		return fs.Errorf("%v", err)
	}
	defer log.Sync() //nolint:errcheck // stderr sync errors are meaningless
	p.Log = log
	log.Info("publishing plugin sockets", zap.String("dir", *dir), zap.Int("plugins", len(routes)))
	ctx, stop := serving.ShutdownContext(ctx)
	defer stop()
	p.Run(ctx)
	return nil
}

// waitPublished polls Check until nothing is missing or timeout passes.
func waitPublished(ctx context.Context, p *publish.Publisher, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(probeRetryInterval * 4)
	defer t.Stop()
	for {
		missing := p.Check()
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("plugin sockets not published after %s: %s", timeout, publish.Describe(missing))
		case <-t.C:
		}
	}
}
