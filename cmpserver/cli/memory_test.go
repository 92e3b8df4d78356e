package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
	"github.com/cmp-injector/cmp-injector/cmpserver/unpack/tartest"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

// procField reads one "Name: value kB" (status) or "name: value" (io) line of
// /proc/<pid>/<file>.
func procField(t *testing.T, pid int, file, name string) int64 {
	t.Helper()
	v, err := servingtest.ProcField(pid, file, name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func envInt64(name string, def int64) int64 {
	if v, err := strconv.ParseInt(os.Getenv(name), 10, 64); err == nil && v > 0 {
		return v
	}
	return def
}

// loudPlugin prints DOCS ConfigMaps of 1069 bytes of YAML each.
const loudPlugin = `kind: ConfigManagementPlugin
metadata: {name: loud}
spec:
  generate:
    command: [sh, -c]
    args:
    - |
      x=$(head -c 1000 /dev/zero | tr '\0' x)
      yes -- "---
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: cm
      data:
        k: $x" | head -n $((ARGOCD_ENV_DOCS * 7))
`

const loudDocBytes = 1069

func serve(t *testing.T, plugin, name string, args ...string) (pid int, socket string) {
	t.Helper()
	configDir, socketDir, workDir := layout(t, plugin)
	socket = filepath.Join(socketDir, name+".sock")
	return startServer(t, configDir, socketDir, workDir, socket, args...).Process.Pid, socket
}

// TestLargeOutputPeakRSS: the server's peak RSS (VmHWM) for a plugin printing a
// large stream must stay near twice the output (the chart's sidecar limit is 512Mi):
// stdout goes to a file, documents are split from it one at a time and the
// response is encoded once. Before, 91 MB of output took the server to 522 MiB.
// CMP_RSS_TEST_MB sets the output size (48).
func TestLargeOutputPeakRSS(t *testing.T) {
	t.Parallel()
	mb := envInt64("CMP_RSS_TEST_MB", 48)
	docs := mb * 1_000_000 / loudDocBytes
	output := docs * loudDocBytes
	pid, socket := serve(t, loudPlugin, "loud", "--max-stdout-bytes", strconv.FormatInt(output+1, 10))
	repo := t.TempDir()
	if err := os.WriteFile(filepath.Join(repo, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := procField(t, pid, "status", "VmHWM")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := c.Generate(ctx, client.Request{RepoRoot: repo, Env: []string{"ARGOCD_ENV_DOCS=" + strconv.FormatInt(docs, 10)}})
	if err != nil || int64(len(got)) != docs {
		t.Fatalf("%d manifests, %v; want %d", len(got), err, docs)
	}
	peak := procField(t, pid, "status", "VmHWM")
	t.Logf("output %.1f MB (%d documents): server VmHWM %.0f MiB (%.0f MiB at start), growth %.2f x the output",
		float64(output)/1e6, docs, float64(peak)/(1<<20), float64(base)/(1<<20), float64(peak-base)/float64(output))
	// About twice the output is expected; 3 x leaves room for the garbage
	// collector's timing and still fails the 6 x of keeping it all in memory.
	if limit := base + output*3; peak > limit {
		t.Errorf("peak RSS %d MiB, want at most %d MiB (start + 3 x the output)", peak>>20, limit>>20)
	}
}

// bomb is a tarball of files full of zeros: kilobytes compressed, files*fileMB
// MiB extracted.
func bomb(t *testing.T, files int, fileMB int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: ".", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	zeros := make([]byte, 1<<20)
	for i := range files {
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("zeros-%d", i), Typeflag: tar.TypeReg, Mode: 0o644, Size: fileMB << 20}); err != nil {
			t.Fatal(err)
		}
		for range fileMB {
			if _, err := tw.Write(zeros); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sendRaw streams tgz to GenerateManifest in 1 KiB chunks, as the repo-server does.
func sendRaw(t *testing.T, socket string, tgz []byte) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stream, err := pluginpb.NewConfigManagementPluginServiceClient(c.Conn()).GenerateManifest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range tartest.Messages(tgz, ".") {
		if err := stream.Send(m); err != nil {
			if errors.Is(err, io.EOF) {
				break // the server answered early
			}
			t.Fatal(err)
		}
	}
	_, err = stream.CloseAndRecv()
	return err
}

// TestGzipBombRefusedBeforeWriting: a tarball whose files add up to more than
// --max-extracted-bytes is refused with at most 64 x its compressed size + 4 MiB
// written (the server's bomb ratio, see cmpserver's bombRatio); with no check it
// would write files up to the limit first (4 GiB by default). This bomb's first
// file is over that bound, so nothing of it is written. Bytes written are the
// server's wchar in /proc/<pid>/io (the spooled .tar.gz counts).
// CMP_BOMB_FILES x CMP_BOMB_FILE_MB MiB (8 x 16) against a 64 MiB limit, or the
// default limit with CMP_BOMB_DEFAULT_LIMIT=1.
func TestGzipBombRefusedBeforeWriting(t *testing.T) {
	t.Parallel()
	files, fileMB := int(envInt64("CMP_BOMB_FILES", 8)), envInt64("CMP_BOMB_FILE_MB", 16)
	var args []string
	if os.Getenv("CMP_BOMB_DEFAULT_LIMIT") == "" {
		args = []string{"--max-extracted-bytes", strconv.Itoa(64 << 20)}
	}
	pid, socket := serve(t, forkPlugin, "forker", args...)
	tgz := bomb(t, files, fileMB)
	before := procField(t, pid, "io", "wchar")
	err := sendRaw(t, socket, tgz)
	written := procField(t, pid, "io", "wchar") - before
	t.Logf("bomb of %d MiB in %d files, %d KiB compressed: refused with %v; %.1f MiB written by the server",
		int64(files)*fileMB, files, len(tgz)>>10, err, float64(written)/(1<<20))
	if err == nil || !strings.Contains(err.Error(), "limit --max-extracted-bytes") {
		t.Fatalf("error %v, want the --max-extracted-bytes limit", err)
	}
	// The default case must write nothing but the tarball; with other sizes
	// the bound is the bomb ratio's.
	limit := int64(len(tgz)) + 1<<20
	if os.Getenv("CMP_BOMB_DEFAULT_LIMIT") != "" || os.Getenv("CMP_BOMB_FILES") != "" || os.Getenv("CMP_BOMB_FILE_MB") != "" {
		limit += 64*int64(len(tgz)) + 4<<20
	}
	if written > limit {
		t.Errorf("%d bytes written, want at most %d", written, limit)
	}
}

// onePlugin prints one ConfigMap whatever it is sent.
const onePlugin = `kind: ConfigManagementPlugin
metadata: {name: one}
spec:
  generate:
    command: [echo, '{"kind":"ConfigMap","metadata":{"name":"one"}}']
`

// TestIdleServerReturnsHeap: once a sidecar has had no request for
// --return-memory-after (1 s), its anonymous memory is back near its start,
// not holding the heap its last unpack grew (about 12 MiB more after a
// 1,000-file repository, held for minutes) while the node's memory cgroup
// charges it to the pod. The server with the return off runs beside it for
// the comparison in the log.
func TestIdleServerReturnsHeap(t *testing.T) {
	t.Parallel()
	pid, socket := serve(t, onePlugin, "one")
	offPid, offSocket := serve(t, onePlugin, "one", "--return-memory-after", "0")
	repo := tartest.Repo(t, 1000)
	start, offStart := procField(t, pid, "status", "RssAnon"), procField(t, offPid, "status", "RssAnon")
	startHWM := procField(t, pid, "status", "VmHWM")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, sock := range []string{socket, offSocket} {
		for range 3 {
			c, err := client.Dial(ctx, sock)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Generate(ctx, client.Request{RepoRoot: repo}); err != nil {
				t.Fatal(err)
			}
			c.Close()
		}
	}
	// The requests must have grown the heap for the test to mean anything.
	if grew := procField(t, pid, "status", "VmHWM") - startHWM; grew < 6<<20 {
		t.Fatalf("3 requests of 1,000 files grew the server's peak RSS by %d KiB only", grew>>10)
	}
	limit := start + 4<<20
	var anon int64
	for range 100 { // 10 s
		if anon = procField(t, pid, "status", "RssAnon"); anon <= limit {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	held := procField(t, offPid, "status", "RssAnon")
	t.Logf("anonymous RSS after 3 requests of 1,000 files: %.1f MiB (%.1f at start); with --return-memory-after 0: %.1f MiB (%.1f at start)",
		float64(anon)/(1<<20), float64(start)/(1<<20), float64(held)/(1<<20), float64(offStart)/(1<<20))
	if anon > limit {
		t.Errorf("idle server holds %d KiB of anonymous memory, want at most %d KiB (start + 4 MiB)", anon>>10, limit>>10)
	}
}
