package cmpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
	"github.com/cmp-injector/cmp-injector/cmpserver/unpack/tartest"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

// TestMain lets a plugin command run this test binary through
// keys.PluginServerPath: with CMP_TEST_ECHO_ARGS=1 it prints its arguments as a
// ConfigMap instead of running tests.
func TestMain(m *testing.M) {
	if os.Getenv("CMP_TEST_ECHO_ARGS") == "1" {
		data, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]string{"name": "args"}, "data": map[string]string{"args": strings.Join(os.Args[1:], " ")}})
		os.Stdout.Write(data)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type testServer struct {
	srv    *Server
	socket string
	cancel context.CancelFunc
	done   chan error
}

// shortTempDir returns a dir whose path fits in a unix socket address.
func shortTempDir(t testing.TB) string {
	dir, err := os.MkdirTemp("", "cmp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startServer serves pluginYAML on a real unix socket until the test ends.
func startServer(t testing.TB, pluginYAML string, mutate func(*Options)) *testServer {
	t.Helper()
	p, _, err := pluginconfig.Parse([]byte(pluginYAML))
	if err != nil {
		t.Fatal(err)
	}
	base := shortTempDir(t)
	opts := DefaultOptions()
	opts.Plugin, opts.SocketDir, opts.WorkDir = p, filepath.Join(base, "s"), filepath.Join(base, "w", "_cmp_server")
	opts.Env = os.Environ()
	if mutate != nil {
		mutate(&opts)
	}
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{srv: srv, socket: srv.SocketPath(), cancel: cancel, done: make(chan error, 1)}
	go func() { ts.done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-ts.done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("server did not stop")
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		// Serve creates the socket before it binds the metrics port, so a
		// test that reads MetricsAddr waits for both.
		if fi, err := os.Stat(ts.socket); err == nil && fi.Mode()&os.ModeSocket != 0 &&
			(opts.MetricsAddr == "" || srv.MetricsAddr() != "") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("socket or metrics listener never appeared")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return ts
}

// dial connects a fresh client, as the repo-server does for every call.
func (ts *testServer) dial(t testing.TB) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, ts.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// The crafted tarballs of the tests (unpack/tartest).
type tarEntry = tartest.Entry

var (
	file     = tartest.File
	dir      = tartest.Dir
	symlink  = tartest.Symlink
	craftTgz = tartest.Tgz
	// writeTree writes a repository of path → content ("dir/" for a dir).
	writeTree    = tartest.Tree
	waitUntil    = servingtest.WaitUntil
	processAlive = servingtest.ProcessAlive
)

func checksum(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// rawGenerate speaks the protocol by hand: the given messages, then half-close.
func rawGenerate(t testing.TB, c *client.Client, msgs ...*pluginpb.AppStreamRequest) (*pluginpb.ManifestResponse, error) {
	t.Helper()
	stream, err := pluginpb.NewConfigManagementPluginServiceClient(c.Conn()).GenerateManifest(ctxTimeout(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if err := stream.Send(m); err != nil {
			break // the server answered early; CloseAndRecv returns its error
		}
	}
	return stream.CloseAndRecv()
}

func metaMsg(appRel, sum string, env ...string) *pluginpb.AppStreamRequest {
	entries, _ := client.EnvEntries(env)
	return &pluginpb.AppStreamRequest{Request: &pluginpb.AppStreamRequest_Metadata{Metadata: &pluginpb.ManifestRequestMetadata{AppRelPath: appRel, Checksum: sum, Env: entries}}}
}

func chunkMsg(b []byte) *pluginpb.AppStreamRequest {
	return &pluginpb.AppStreamRequest{Request: &pluginpb.AppStreamRequest_File{File: &pluginpb.File{Chunk: b}}}
}

// sendTgz sends a crafted tarball in 1 KiB chunks with a correct checksum.
func sendTgz(t testing.TB, c *client.Client, appRel string, tgz []byte, env ...string) (*pluginpb.ManifestResponse, error) {
	msgs := []*pluginpb.AppStreamRequest{metaMsg(appRel, checksum(tgz), env...)}
	for i := 0; i < len(tgz); i += 1024 {
		msgs = append(msgs, chunkMsg(tgz[i:min(i+1024, len(tgz))]))
	}
	return rawGenerate(t, c, msgs...)
}

func wantErr(t testing.TB, err error, substr string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", substr)
	}
	if !strings.Contains(err.Error(), substr) {
		t.Fatalf("error %q does not contain %q", err, substr)
	}
}
