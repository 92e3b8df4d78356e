package cmpserver

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
)

// openIdleStream starts a GenerateManifest stream that sends its metadata and one
// chunk of a valid tarball and then goes silent without half-closing, as a client
// that hung mid-stream does. The returned channel yields the stream's final error
// once the server ends it.
func openIdleStream(t *testing.T, ctx context.Context, rpc pluginpb.ConfigManagementPluginServiceClient, tgz []byte) <-chan error {
	t.Helper()
	stream, err := rpc.GenerateManifest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(metaMsg(".", checksum(tgz))); err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(chunkMsg(tgz[:len(tgz)/2])); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() {
		var resp pluginpb.ManifestResponse
		ended <- stream.RecvMsg(&resp)
	}()
	return ended
}

// requestDirs counts the dirs in the server's work dir. Files are not counted:
// a request's tarball spool is created there and unlinked at once, so a listing
// can catch it, and counting it would let a wait for n requests in flight end
// while one of them has not yet started.
func requestDirs(t *testing.T, ts *testServer) int {
	t.Helper()
	entries, err := os.ReadDir(ts.srv.opts.WorkDir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() {
			n++
		}
	}
	return n
}

// waitUntil polls cond until it holds or the deadline passes.

// TestIdleStreamsAreEnded: clients that stop mid-stream used to hold a goroutine,
// an open tarball file and a request dir each until they disconnected. The server
// now ends a stream that sends nothing for --stream-idle-timeout, removes its
// request dir, and its goroutines go away. Not parallel: it counts the process's
// goroutines, so nothing else may run meanwhile. CMP_IDLE_STREAMS sets how many
// clients (20).
func TestIdleStreamsAreEnded(t *testing.T) {
	n := 20
	if v, err := strconv.Atoi(os.Getenv("CMP_IDLE_STREAMS")); err == nil && v > 0 {
		n = v
	}
	const idle = 500 * time.Millisecond
	ts := startServer(t, discoveryPlugin, func(o *Options) {
		o.StreamIdleTimeout = idle
		o.MaxConcurrentStreams = n
	})
	c := ts.dial(t)
	rpc := pluginpb.NewConfigManagementPluginServiceClient(c.Conn())
	tgz := craftTgz(t, dir("."), file("data.txt", "x"))
	// The client's own deadline is far away: only the server may end the streams.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	runtime.GC()
	baseline := runtime.NumGoroutine()
	baseFDs := openFDs(t)
	ended := make([]<-chan error, n)
	for i := range ended {
		ended[i] = openIdleStream(t, ctx, rpc, tgz)
	}
	if !waitUntil(10*time.Second, func() bool { return requestDirs(t, ts) == n }) {
		t.Fatalf("%d request dirs, want %d while the streams are open", requestDirs(t, ts), n)
	}
	t.Logf("%d idle clients: %d request dirs, %d open files and %d goroutines over the baseline (%d goroutines; client and server share the process)",
		n, requestDirs(t, ts), openFDs(t)-baseFDs, runtime.NumGoroutine()-baseline, baseline)

	// Generous: the streams end after the idle timeout, whatever the load.
	wait := time.After(20 * time.Second)
	for i, ch := range ended {
		select {
		case err := <-ch:
			if status.Code(err) != codes.DeadlineExceeded || !contains(err, "limit --stream-idle-timeout") {
				t.Errorf("stream %d ended with %v, want DeadlineExceeded naming --stream-idle-timeout", i, err)
			}
		case <-wait:
			t.Fatalf("after 20s: %d of %d idle streams still open, %d request dirs, %d open files and %d goroutines over the baseline",
				n-i, n, requestDirs(t, ts), openFDs(t)-baseFDs, runtime.NumGoroutine()-baseline)
		}
	}
	if !waitUntil(10*time.Second, func() bool { return requestDirs(t, ts) == 0 }) {
		t.Errorf("%d request dirs left after the idle streams ended", requestDirs(t, ts))
	}
	if !waitUntil(10*time.Second, func() bool { return runtime.NumGoroutine() <= baseline }) {
		t.Errorf("%d goroutines, baseline %d", runtime.NumGoroutine(), baseline)
	}
	t.Logf("after the idle timeout: %d request dirs, %d open files and %d goroutines over the baseline", requestDirs(t, ts), openFDs(t)-baseFDs, runtime.NumGoroutine()-baseline)
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// TestConcurrentStreamCap: a stream over --max-concurrent-streams fails at once
// with ResourceExhausted, and a slot is usable again once a stream ends.
func TestConcurrentStreamCap(t *testing.T) {
	t.Parallel()
	ts := startServer(t, discoveryPlugin, func(o *Options) {
		o.MaxConcurrentStreams = 2
		o.StreamIdleTimeout = time.Minute
	})
	c := ts.dial(t)
	rpc := pluginpb.NewConfigManagementPluginServiceClient(c.Conn())
	tgz := craftTgz(t, dir("."), file("data.txt", "x"))
	held, cancelHeld := context.WithCancel(context.Background())
	defer cancelHeld()
	first := openIdleStream(t, held, rpc, tgz)
	openIdleStream(t, held, rpc, tgz)
	// The slots themselves, not a listing of the work dir: the third stream is
	// sent only once both held streams have taken theirs.
	if !waitUntil(10*time.Second, func() bool { return len(ts.srv.requests.streams) == 2 }) {
		t.Fatalf("%d stream slots taken, want 2", len(ts.srv.requests.streams))
	}
	_, err := sendTgz(t, c, ".", tgz, "ARGOCD_APP_NAME=x")
	if status.Code(err) != codes.ResourceExhausted || !contains(err, "limit --max-concurrent-streams") {
		t.Fatalf("third stream: %v, want ResourceExhausted naming --max-concurrent-streams", err)
	}
	cancelHeld()
	<-first
	if !waitUntil(10*time.Second, func() bool { return requestDirs(t, ts) == 0 }) {
		t.Fatalf("%d request dirs left after the clients went away", requestDirs(t, ts))
	}
	if _, err := sendTgz(t, c, ".", tgz, "ARGOCD_APP_NAME=x"); err != nil {
		t.Fatalf("after the held streams ended: %v", err)
	}
}

func contains(err error, substr string) bool {
	return err != nil && strings.Contains(err.Error(), substr)
}
