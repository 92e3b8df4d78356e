package cmpserver

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
)

// TestUnpackOverlapsReceiving: files are extracted while the stream is still
// arriving, and the plugin runs only once the whole stream's checksum matched.
func TestUnpackOverlapsReceiving(t *testing.T) {
	t.Parallel()
	ts := startServer(t, discoveryPlugin, nil)
	c := ts.dial(t)
	// A random file after data.txt keeps the stream going well past it.
	noise := make([]byte, 1<<20)
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	tgz := craftTgz(t, dir("."), file("data.txt", "early"), file("zz-noise", string(noise)))
	stream, err := pluginpb.NewConfigManagementPluginServiceClient(c.Conn()).GenerateManifest(ctxTimeout(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(metaMsg(".", checksum(tgz), "ARGOCD_APP_NAME=overlap")); err != nil {
		t.Fatal(err)
	}
	half := len(tgz) / 2
	for i := 0; i < half; i += 1024 {
		if err := stream.Send(chunkMsg(tgz[i:min(i+1024, half)])); err != nil {
			t.Fatal(err)
		}
	}
	// data.txt is on disk before the client sends the second half.
	appeared := waitUntil(20*time.Second, func() bool {
		m, _ := filepath.Glob(filepath.Join(ts.srv.opts.WorkDir, "*", "data.txt"))
		return len(m) == 1
	})
	if !appeared {
		t.Fatal("data.txt not extracted while the stream was half sent")
	}
	// Nothing ran yet: init writes .init-marker.
	if m, _ := filepath.Glob(filepath.Join(ts.srv.opts.WorkDir, "*", ".init-marker")); len(m) != 0 {
		t.Fatal("init ran before the stream was complete")
	}
	for i := half; i < len(tgz); i += 1024 {
		if err := stream.Send(chunkMsg(tgz[i:min(i+1024, len(tgz))])); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil || !strings.Contains(resp.GetManifests()[0], "early") {
		t.Fatalf("%v %v", resp, err)
	}
}

// TestChecksumMismatchRemovesTree: a valid tarball under a wrong checksum is
// unpacked as it arrives, but the plugin never runs, the tree is removed and the
// error is Argo CD's. A damaged tarball under a wrong checksum reports the
// checksum first, as Argo CD (which verifies before unpacking) does.
func TestChecksumMismatchRemovesTree(t *testing.T) {
	t.Parallel()
	plugin := strings.Replace(discoveryPlugin, `echo init-ran > .init-marker`, `touch $ARGOCD_ENV_MARK`, 1)
	ts := startServer(t, plugin, nil)
	c := ts.dial(t)
	mark := filepath.Join(t.TempDir(), "ran")
	tgz := craftTgz(t, dir("."), file("data.txt", "x"))
	msgs := []*pluginpb.AppStreamRequest{metaMsg(".", checksum(append([]byte("other"), tgz...)), "ARGOCD_ENV_MARK="+mark)}
	for i := 0; i < len(tgz); i += 16 {
		msgs = append(msgs, chunkMsg(tgz[i:min(i+16, len(tgz))]))
	}
	_, err := rawGenerate(t, c, msgs...)
	wantErr(t, err, "file checksum validation error")
	if _, err := os.Stat(mark); err == nil {
		t.Error("the plugin ran on a tarball whose checksum did not match")
	}
	if !waitUntil(10*time.Second, func() bool { return requestDirs(t, ts) == 0 }) {
		t.Errorf("%d request dirs left after a checksum mismatch", requestDirs(t, ts))
	}
	damaged := append(append([]byte{}, tgz[:len(tgz)/2]...), "garbage"...)
	_, err = rawGenerate(t, c, metaMsg(".", strings.Repeat("0", 64)), chunkMsg(damaged))
	wantErr(t, err, "file checksum validation error")
	_, err = rawGenerate(t, c, metaMsg(".", checksum(damaged)), chunkMsg(damaged))
	wantErr(t, err, "error reading repository tarball")
}

// TestCompressibleRepoUnpacks: a repository whose files compress far better
// than text (here 24 MiB of zeros, about 24 KiB compressed) trips the bomb
// check, waits for the whole stream, passes the limits and is unpacked: the
// check delays such a repository, it never refuses one under the limits.
func TestCompressibleRepoUnpacks(t *testing.T) {
	t.Parallel()
	ts := startServer(t, discoveryPlugin, nil)
	c := ts.dial(t)
	zeros := strings.Repeat("\x00", 12<<20)
	tgz := craftTgz(t, dir("."), file("a-zeros", zeros), file("b-zeros", zeros), file("data.txt", "fine"))
	resp, err := sendTgz(t, c, ".", tgz, "ARGOCD_APP_NAME=z")
	if err != nil || !strings.Contains(resp.GetManifests()[0], "fine") {
		t.Fatalf("%v %v", resp, err)
	}
}
