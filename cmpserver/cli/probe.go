package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// probeRetryInterval is how often --wait tries again. A try is a stat and a
// connect on a local socket, so a short interval costs nothing and is what
// lets the next container start within milliseconds of the server listening.
const probeRetryInterval = 5 * time.Millisecond

// probeCommand exits 0 once the plugin server of this container answers on its
// socket. With --wait it is the native sidecar's postStart hook: the kubelet
// starts the next container (eventually the repo-server) only after the hook
// returns, so the repo-server never enumerates sockets before every plugin
// answers, and it waits no longer than the server takes to listen. Without
// --wait it answers once, as a probe does. It runs in the sidecar with serve's
// env and defaults, so both resolve the same paths.
func probeCommand(ctx context.Context, args []string, stdio serving.IO) error {
	fs := serving.NewFlagSet("cmp-server probe", "[--socket-dir DIR] [--config-dir DIR] [--timeout 2s] [--wait] [--termination-log FILE]")
	var configDir, socketDir string
	serverDirFlags(fs.FlagSet, &configDir, &socketDir)
	timeout := fs.Duration("timeout", 2*time.Second, "how long the server may take to answer CheckPluginConfiguration (with --wait: to start listening and answer)")
	wait := fs.Bool("wait", false, "try again until the server answers or --timeout passes, instead of failing at the first refusal (the sidecar's postStart hook)")
	termLog := fs.String("termination-log", "", "on failure, also write the reason to this file: the container's terminationMessagePath, which the kubelet reports as the container's termination message after it kills a container whose hook failed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	socket, err := probeOnce(ctx, configDir, socketDir, *timeout, *wait)
	if err != nil {
		if *termLog != "" {
			// The file exists (the kubelet made it); failing to write it
			// must not hide the reason, which stderr still carries.
			_ = overwrite(*termLog, err.Error())
		}
		return err
	}
	fmt.Fprintf(stdio.Stdout, "%s answers\n", socket)
	return nil
}

// probeOnce resolves the socket from plugin.yaml and probes it, retrying
// until timeout when wait is set. Its error names the plugin and why, on one
// line: it becomes the hook's message in the pod's status.
func probeOnce(ctx context.Context, configDir, socketDir string, timeout time.Duration, wait bool) (string, error) {
	path := pluginconfig.ConfigPath(configDir)
	plugin, _, err := pluginconfig.Load(path)
	if err != nil {
		// serve fails on the same file, so waiting would only delay the
		// reason. A probe's output is one line in the pod's status: fold
		// the validation list onto it.
		return "", errors.New(strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	socket := filepath.Join(socketDir, plugin.SocketName())
	if !wait {
		return socket, probe(ctx, socket, timeout)
	}
	if err := waitProbe(ctx, socket, timeout); err != nil {
		return "", fmt.Errorf("plugin %s did not start: %w", plugin.Metadata.Name, err)
	}
	return socket, nil
}

// waitProbe probes socket until it answers or timeout passes, and then
// explains the last refusal: a missing socket after the whole timeout is a
// server that never listened (its own log says why), a refused one a server
// that died after listening.
func waitProbe(ctx context.Context, socket string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(probeRetryInterval)
	defer tick.Stop()
	for {
		err := probe(ctx, socket, timeout)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not answering after %s: %w", timeout, err)
		case <-tick.C:
		}
	}
}

// overwrite replaces the content of an existing file without creating it.
func overwrite(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(text)
	return errors.Join(werr, f.Close())
}

// probe explains why socket does not answer, or returns nil. The plain dial
// first turns a refused or forbidden connection into its own reason at once,
// where gRPC would only retry until the timeout.
func probe(ctx context.Context, socket string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := dialable(ctx, socket); err != nil {
		return err
	}
	c, err := client.Dial(ctx, socket)
	if err != nil {
		return timeoutReason(socket, timeout, err)
	}
	defer c.Close()
	if _, err := c.Check(ctx); err != nil {
		return timeoutReason(socket, timeout, err)
	}
	return nil
}

// dialable explains why nothing can listen on socket (it is missing, not a
// socket, or stale), or returns nil once a plain connection succeeds.
func dialable(ctx context.Context, socket string) error {
	fi, err := os.Stat(socket)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("no socket at %s: the plugin server is not listening", socket)
	case err != nil:
		return err
	case fi.Mode().Type() != os.ModeSocket:
		return fmt.Errorf("%s exists but is not a socket", socket)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%s: connection refused: stale socket, no server listens on it", socket)
	case err != nil:
		return fmt.Errorf("%s: %w", socket, err)
	}
	return conn.Close()
}

func timeoutReason(socket string, timeout time.Duration, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded {
		return fmt.Errorf("%s: no answer to CheckPluginConfiguration within %s", socket, timeout)
	}
	return fmt.Errorf("%s: %w", socket, err)
}
