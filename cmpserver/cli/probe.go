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

// probeCommand exits 0 once the plugin server of this container answers on its socket.
// It is the startupProbe of native sidecars: the kubelet starts the next
// container (eventually the repo-server) only after it passes, so the
// repo-server never enumerates sockets before every plugin can answer. It runs
// in the sidecar with serve's env and defaults, so both resolve the same paths.
func probeCommand(ctx context.Context, args []string, stdio serving.IO) error {
	fs := serving.NewFlagSet("cmp-server probe", "[--socket-dir DIR] [--config-dir DIR] [--timeout 2s]")
	var configDir, socketDir string
	serverDirFlags(fs.FlagSet, &configDir, &socketDir)
	timeout := fs.Duration("timeout", 2*time.Second, "how long the server may take to answer CheckPluginConfiguration")
	if err := fs.Parse(args); err != nil {
		return err
	}
	plugin, _, err := pluginconfig.Load(pluginconfig.ConfigPath(configDir))
	if err != nil {
		// A probe's output is one line in the pod's events: fold the
		// validation list onto it.
		return errors.New(strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	socket := filepath.Join(socketDir, plugin.SocketName())
	if err := probe(ctx, socket, *timeout); err != nil {
		return err
	}
	fmt.Fprintf(stdio.Stdout, "%s answers\n", socket)
	return nil
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
