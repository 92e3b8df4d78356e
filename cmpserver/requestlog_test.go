package cmpserver

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
	"github.com/cmp-injector/cmp-injector/cmpserver/unpack/tartest"
)

// TestRequestDoneSeparatesThePacking: Argo CD's client opens the stream,
// packs the whole repository and only then sends the header. "request done"
// says how long the request took from the stream's opening (duration) and
// from the header on (after_header, the server's own part): here the client
// waits 300 ms between the two, as a slow packing would.
func TestRequestDoneSeparatesThePacking(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	ts := startServer(t, `kind: ConfigManagementPlugin
metadata: {name: timed}
spec:
  generate:
    command: [echo, '{"kind":"ConfigMap","metadata":{"name":"timed"}}']
`, func(o *Options) { o.Logger = zap.New(core) })
	c := ts.dial(t)
	defer c.Close()
	tgz := tartest.Tgz(t, tartest.File("a.yaml", "a: 1\n"))
	stream, err := pluginpb.NewConfigManagementPluginServiceClient(c.Conn()).GenerateManifest(ctxTimeout(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	const packing = 300 * time.Millisecond
	time.Sleep(packing)
	for _, m := range []*pluginpb.AppStreamRequest{metaMsg(".", checksum(tgz)), chunkMsg(tgz)} {
		if err := stream.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := stream.CloseAndRecv(); err != nil {
		t.Fatal(err)
	}
	var done []observer.LoggedEntry
	for range 100 { // the line is written as the handler returns
		if done = logs.FilterMessage("request done").All(); len(done) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(done) != 1 {
		t.Fatalf("%d \"request done\" lines, want 1", len(done))
	}
	f := done[0].ContextMap()
	total, ok1 := f["duration"].(time.Duration)
	own, ok2 := f["after_header"].(time.Duration)
	if !ok1 || !ok2 || own <= 0 {
		t.Fatalf("request done fields %v: want durations duration and after_header > 0", f)
	}
	// The handler starts a little after the client opened the stream, so
	// the wait it sees is a little shorter than the client's: half of it is
	// still far from the 0 of an after_header that counted the wait too.
	if total-own < packing/2 {
		t.Errorf("duration %s - after_header %s = %s, want most of the %s the client waited before the header", total, own, total-own, packing)
	}
}
