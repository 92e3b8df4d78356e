package cmpserver

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
)

// secondServer builds a server of pluginYAML on socketDir and workDir ("":
// its own).
func secondServer(t *testing.T, pluginYAML, socketDir, workDir string) (*Server, error) {
	t.Helper()
	p, _, err := pluginconfig.Parse([]byte(pluginYAML))
	if err != nil {
		t.Fatal(err)
	}
	if workDir == "" {
		workDir = filepath.Join(shortTempDir(t), "_cmp_server")
	}
	opts := DefaultOptions()
	opts.Plugin, opts.SocketDir, opts.WorkDir = p, socketDir, workDir
	return New(opts)
}

// serveSecond serves a second server until ctx ends; done gets what Serve returned.
func serveSecond(t *testing.T, ctx context.Context, pluginYAML, socketDir string) (*Server, chan error) {
	t.Helper()
	srv, err := secondServer(t, pluginYAML, socketDir, "")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	return srv, done
}

// TestSecondServerRefusesALiveSocket: a second server whose socket name is
// taken by a server that still answers fails at start with an error naming
// the socket, before it wipes its work dir (the first's, when both run in one
// container), and the first keeps its socket and its traffic (it used to be
// unlinked silently, the second taking every new connection).
func TestSecondServerRefusesALiveSocket(t *testing.T) {
	t.Parallel()
	ts := startServer(t, discoveryPlugin, nil)
	marker := filepath.Join(ts.srv.opts.WorkDir, "in-flight")
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := secondServer(t, discoveryPlugin, filepath.Dir(ts.socket), ts.srv.opts.WorkDir)
	wantErr(t, err, "socket "+ts.socket+" is in use")
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the refused server wiped the work dir: %v", err)
	}
	if _, err := ts.dial(t).Check(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatalf("the first server no longer answers on its socket: %v", err)
	}
}

// TestServeRefusesASocketTakenAfterNew: the socket is checked again when
// Serve listens.
func TestServeRefusesASocketTakenAfterNew(t *testing.T) {
	t.Parallel()
	socketDir := filepath.Join(shortTempDir(t), "s")
	if err := os.Mkdir(socketDir, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := secondServer(t, discoveryPlugin, socketDir, "")
	if err != nil {
		t.Fatal(err)
	}
	// A live listener: the kernel accepts connections into its backlog.
	live, err := net.Listen("unix", srv.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	select {
	case err := <-done:
		wantErr(t, err, "socket "+srv.SocketPath()+" is in use")
	case <-time.After(15 * time.Second):
		cancel()
		<-done
		t.Fatal("Serve took over the live socket instead of refusing it")
	}
	if c, err := net.Dial("unix", srv.SocketPath()); err != nil {
		t.Errorf("the live socket is gone: %v", err)
	} else {
		c.Close()
	}
}

// TestServerReplacesAStaleSocket: a socket file whose server is gone (what a
// killed container leaves) is removed and served again.
func TestServerReplacesAStaleSocket(t *testing.T) {
	t.Parallel()
	socketDir := filepath.Join(shortTempDir(t), "s")
	if err := os.Mkdir(socketDir, 0o755); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(socketDir, "demo-v1.0.sock")
	lis, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	lis.(*net.UnixListener).SetUnlinkOnClose(false)
	lis.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, done := serveSecond(t, ctx, discoveryPlugin, socketDir)
	ts := &testServer{srv: srv, socket: stale}
	if !waitUntil(15*time.Second, func() bool {
		c, err := net.Dial("unix", stale)
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		cancel()
		t.Fatalf("the stale socket was not served again: %v", <-done)
	}
	if _, err := ts.dial(t).Check(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
