package cmpserver

import (
	"archive/tar"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/cmpserver/command"
	"github.com/cmp-injector/cmp-injector/cmpserver/unpack"
	"github.com/cmp-injector/cmp-injector/pkg/params"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

const discoveryPlugin = `apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata:
  name: demo
spec:
  version: v1.0
  init:
    command: [sh, -c, "echo init-ran > .init-marker"]
  generate:
    command: [sh, -c]
    args:
    - |
      test -f .init-marker || { echo "init did not run" >&2; exit 4; }
      printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  file: "%s"\n---\n# only a comment\n---\nnull\n---\n{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}\n' "$ARGOCD_APP_NAME" "$(cat data.txt)"
  discover:
    fileName: "./data.txt"
  parameters:
    static:
    - name: values-files
      title: VALUES FILES
      collectionType: array
      string: dropped
    dynamic:
      command: [sh, -c, "echo '[{\"name\":\"dyn\",\"collectionType\":\"map\",\"map\":{\"a\":\"b\"}}]'"]
  provideGitCreds: true
`

func TestAllFourRPCs(t *testing.T) {
	t.Parallel()
	ts := startServer(t, discoveryPlugin, nil)
	if filepath.Base(ts.socket) != "demo-v1.0.sock" {
		t.Errorf("socket %s", ts.socket)
	}
	root := writeTree(t, map[string]string{"apps/demo/data.txt": "hello", "other/x.txt": "x"})
	c := ts.dial(t)
	ctx := ctxTimeout(t, 30*time.Second)

	check, err := c.Check(ctx)
	if err != nil || !check.DiscoveryConfigured || !check.ProvideGitCreds {
		t.Fatalf("Check = %+v, %v", check, err)
	}
	req := client.Request{RepoRoot: root, AppRelPath: "apps/demo", Env: []string{"ARGOCD_APP_NAME=my-app"}}
	match, err := c.Match(ctx, req)
	if err != nil || !match.Supported || !match.DiscoveryEnabled {
		t.Fatalf("Match = %+v, %v", match, err)
	}
	noMatch, err := c.Match(ctx, client.Request{RepoRoot: root, AppRelPath: "other"})
	if err != nil || noMatch.Supported || !noMatch.DiscoveryEnabled {
		t.Fatalf("Match(other) = %+v, %v", noMatch, err)
	}
	ann, err := c.Parameters(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	wantAnn := []params.Announcement{
		{Name: "dyn", CollectionType: "map", Map: map[string]string{"a": "b"}},
		{Name: "values-files", Title: "VALUES FILES", CollectionType: "array"},
	}
	if !reflect.DeepEqual(ann, wantAnn) {
		t.Errorf("Parameters = %+v", ann)
	}
	manifests, err := c.Generate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"apiVersion":"v1","data":{"file":"hello"},"kind":"ConfigMap","metadata":{"name":"my-app"}}`,
		`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}`,
	}
	if !reflect.DeepEqual(manifests, want) {
		t.Errorf("Generate = %q", manifests)
	}
	// Request dirs are removed after each request (after its response).
	ts.srv.requests.removals.idle()
	entries, _ := os.ReadDir(ts.srv.opts.WorkDir)
	if len(entries) != 0 {
		t.Errorf("work dir not cleaned: %v", entries)
	}
}

// selectPlugin replays the repo-server's discovery.DetectConfigManagementPlugin
// for one socket: v2.10-2.12 clients always send MatchRepository; v2.13+ call
// CheckPluginConfiguration first and skip Match when discovery is off.
func selectPlugin(t *testing.T, ts *testServer, req client.Request, named, checkFirst bool) (bool, error) {
	c := ts.dial(t)
	ctx := ctxTimeout(t, 30*time.Second)
	if checkFirst {
		check, err := c.Check(ctx)
		if err != nil {
			return false, err
		}
		if !check.DiscoveryConfigured {
			return named, nil
		}
	}
	m, err := c.Match(ctx, req)
	if err != nil {
		return false, err
	}
	return m.Supported || (!m.DiscoveryEnabled && named), nil
}

func TestClientFlows(t *testing.T) {
	t.Parallel()
	named := strings.Replace(discoveryPlugin, "  discover:\n    fileName: \"./data.txt\"\n", "", 1)
	root := writeTree(t, map[string]string{"app/data.txt": "d", "nodata/x": "x"})
	for _, tc := range []struct {
		name, plugin, app string
		named, want       bool
	}{
		{"named without discovery", named, "nodata", true, true},
		{"unnamed without discovery", named, "app", false, false},
		{"named with matching discovery", discoveryPlugin, "app", true, true},
		{"named with failing discovery", discoveryPlugin, "nodata", true, false},
		{"discovered", discoveryPlugin, "app", false, true},
	} {
		ts := startServer(t, tc.plugin, nil)
		for _, checkFirst := range []bool{false, true} {
			req := client.Request{RepoRoot: root, AppRelPath: tc.app, Env: []string{"ARGOCD_APP_NAME=a"}}
			got, err := selectPlugin(t, ts, req, tc.named, checkFirst)
			if err != nil || got != tc.want {
				t.Errorf("%s (check first %v): selected %v, %v; want %v", tc.name, checkFirst, got, err, tc.want)
				continue
			}
			if !got {
				continue
			}
			if checkFirst { // v2.13+: a second Check precedes Generate
				if _, err := ts.dial(t).Check(ctxTimeout(t, 10*time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			// Generate needs data.txt only via cat; nodata has none, so give it one.
			if tc.app == "nodata" {
				continue
			}
			if _, err := ts.dial(t).Generate(ctxTimeout(t, 30*time.Second), req); err != nil {
				t.Errorf("%s: Generate: %v", tc.name, err)
			}
		}
	}
}

func TestStreamProtocolErrors(t *testing.T) {
	t.Parallel()
	ts := startServer(t, discoveryPlugin, nil)
	c := ts.dial(t)
	tgz := craftTgz(t, dir("."), file("data.txt", "x"))
	_, err := rawGenerate(t, c, chunkMsg(tgz))
	wantErr(t, err, "error getting stream metadata: metadata is nil")
	_, err = rawGenerate(t, c, metaMsg(".", checksum(tgz)), metaMsg(".", checksum(tgz)), chunkMsg(tgz))
	wantErr(t, err, "stream request file is nil")
	_, err = rawGenerate(t, c, metaMsg(".", strings.Repeat("0", 64)), chunkMsg(tgz))
	wantErr(t, err, "file checksum validation error")
	if status.Code(err) != codes.Unknown {
		t.Errorf("code %v, want Unknown as Argo CD", status.Code(err))
	}
	_, err = sendTgz(t, c, "../..", tgz)
	wantErr(t, err, "illegal appPath: out of workDir bound")
	_, err = sendTgz(t, c, "missing", tgz)
	wantErr(t, err, `app path "missing" is not a directory`)
	_, err = rawGenerate(t, c, metaMsg(".", checksum([]byte("not gzip"))), chunkMsg([]byte("not gzip")))
	wantErr(t, err, "error reading repository tarball")
}

func TestHostileTarballs(t *testing.T) {
	t.Parallel()
	ts := startServer(t, discoveryPlugin, nil)
	c := ts.dial(t)
	fifo := tarEntry{Hdr: tar0("fifo", '6')}
	chr := tarEntry{Hdr: tar0("tty", '3')}
	blk := tarEntry{Hdr: tar0("disk", '4')}
	hard := tarEntry{Hdr: tar0("hard", '1')}
	hard.Hdr.Linkname = "data.txt"
	for _, tc := range []struct {
		name    string
		entries []tarEntry
		want    string
	}{
		{"dotdot", []tarEntry{file("../x", "x")}, `"../x" contains ..`},
		{"nested dotdot", []tarEntry{file("a/../../x", "x")}, "contains .."},
		{"absolute", []tarEntry{file("/abs", "x")}, `"/abs" is absolute`},
		{"symlink out", []tarEntry{symlink("etc", "../../etc")}, "illegal filepath in symlink"},
		{"absolute symlink", []tarEntry{symlink("passwd", "/etc/passwd")}, "illegal filepath in symlink"},
		{"loop", []tarEntry{symlink("l1", "l2"), symlink("l2", "l1")}, "too many levels"},
		{"fifo", []tarEntry{fifo}, "unsupported type"},
		{"char device", []tarEntry{chr}, "unsupported type"},
		{"block device", []tarEntry{blk}, "unsupported type"},
		{"hard link", []tarEntry{file("data.txt", "x"), hard}, "unsupported type"},
		{"file under symlinked dir", []tarEntry{dir("sub"), symlink("link", "sub"), file("link/evil", "x")}, `"link" is a symlink and cannot contain entries`},
		{"dir under symlinked dir", []tarEntry{symlink("link", "."), dir("link/d")}, "is a symlink"},
		{"file replacing dir", []tarEntry{dir("d"), file("d", "x")}, "already a directory"},
	} {
		entries := append([]tarEntry{dir(".")}, tc.entries...)
		entries = append(entries, file("data.txt", "x"))
		_, err := sendTgz(t, c, ".", craftTgz(t, entries...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	// Nothing escaped into the work dir's parent.
	parent := filepath.Dir(ts.srv.opts.WorkDir)
	entries, _ := os.ReadDir(parent)
	for _, e := range entries {
		if e.Name() != "_cmp_server" && e.Name() != "_cmp_server"+askPassLinkSuffix {
			t.Errorf("unexpected %s in %s", e.Name(), parent)
		}
	}
	// A symlink that stays inside is recreated and usable.
	manifests, err := sendTgz(t, c, "app", craftTgz(t, dir("."), dir("real"), file("real/data.txt", "via-link"), symlink("app", "real")), "ARGOCD_APP_NAME=l")
	if err != nil || !strings.Contains(manifests.GetManifests()[0], "via-link") {
		t.Errorf("inside symlink: %v %v", manifests, err)
	}
}

func tar0(name string, typ byte) tar.Header {
	return tar.Header{Name: name, Typeflag: typ, Mode: 0o644}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	ts := startServer(t, discoveryPlugin, func(o *Options) {
		o.Limits = unpack.Limits{MaxCompressedBytes: 4096, MaxExtractedBytes: 1000, MaxFiles: 10}
	})
	c := ts.dial(t)
	random := make([]byte, 8192)
	if _, err := rand.Read(random); err != nil {
		t.Fatal(err)
	}
	_, err := sendTgz(t, c, ".", craftTgz(t, dir("."), file("big", string(random))))
	wantErr(t, err, "exceeds 4096 compressed bytes (limit --max-compressed-bytes)")
	_, err = sendTgz(t, c, ".", craftTgz(t, dir("."), file("a", strings.Repeat("a", 600)), file("b", strings.Repeat("b", 600))))
	wantErr(t, err, "expands to more than 1000 bytes (limit --max-extracted-bytes)")
	var many []tarEntry
	for i := 0; i < 11; i++ {
		many = append(many, file(fmt.Sprintf("f%d", i), ""))
	}
	_, err = sendTgz(t, c, ".", craftTgz(t, many...))
	wantErr(t, err, "more than 10 entries (limit --max-files)")
	// Just under every limit works.
	_, err = sendTgz(t, c, ".", craftTgz(t, dir("."), file("data.txt", strings.Repeat("d", 900))), "ARGOCD_APP_NAME=x")
	if err != nil {
		t.Fatal(err)
	}
}

func TestCommandErrorsCarryStderr(t *testing.T) {
	t.Parallel()
	plugin := strings.Replace(discoveryPlugin, "test -f .init-marker", "echo 'secret=no; it broke' >&2; exit 3\n      test -f .init-marker", 1)
	ts := startServer(t, plugin, nil)
	root := writeTree(t, map[string]string{"data.txt": "x"})
	_, err := ts.dial(t).Generate(ctxTimeout(t, 30*time.Second), client.Request{RepoRoot: root})
	wantErr(t, err, "desc = error generating manifests: `sh -c \"echo 'secret=no; it broke' >&2; exit 3\\ntest -f .init-marker")
	wantErr(t, err, "` failed exit status 3: secret=no; it broke")
}

func TestDynamicParametersErrors(t *testing.T) {
	t.Parallel()
	for out, want := range map[string]string{
		`{"name":"x"}`:                          `it printed "{\"name\":\"x\"}"`,
		`[{"title":"T"}]`:                       `get parameters announcement error: dynamic parameter announcement 0: name is required (entry titled "T")`,
		`[{"name":"a","collectionType":"set"}]`: `unknown collectionType "set"`,
		`garbage`:                               `it printed "garbage"`,
	} {
		plugin := strings.Replace(discoveryPlugin, `echo '[{\"name\":\"dyn\",\"collectionType\":\"map\",\"map\":{\"a\":\"b\"}}]'`, "cat out.json", 1)
		ts := startServer(t, plugin, nil)
		root := writeTree(t, map[string]string{"out.json": out})
		_, err := ts.dial(t).Parameters(ctxTimeout(t, 30*time.Second), client.Request{RepoRoot: root})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("output %s: error %v, want %q", out, err, want)
		}
	}
}

// TestDynamicParametersNull: a dynamic command printing null (e.g. jq on a missing
// key) announces nothing, so the response is the static list alone, as with Argo CD.
func TestDynamicParametersNull(t *testing.T) {
	t.Parallel()
	plugin := strings.Replace(discoveryPlugin, `echo '[{\"name\":\"dyn\",\"collectionType\":\"map\",\"map\":{\"a\":\"b\"}}]'`, "echo null", 1)
	ts := startServer(t, plugin, nil)
	root := writeTree(t, map[string]string{"data.txt": "x"})
	ann, err := ts.dial(t).Parameters(ctxTimeout(t, 30*time.Second), client.Request{RepoRoot: root})
	want := []params.Announcement{{Name: "values-files", Title: "VALUES FILES", CollectionType: "array"}}
	if err != nil || !reflect.DeepEqual(ann, want) {
		t.Fatalf("Parameters = %+v, %v; want %+v", ann, err, want)
	}
}

func TestDiscoveryRules(t *testing.T) {
	t.Parallel()
	root := writeTree(t, map[string]string{"app/deep/x/main.jsonnet": "", "app/Chart.yaml": "", "empty/": ""})
	base := "kind: ConfigManagementPlugin\nmetadata: {name: disc}\nspec:\n  generate: {command: [\"true\"]}\n  discover:\n"
	for _, tc := range []struct {
		discover string
		app      string
		want     bool
		err      string
	}{
		{"    find: {glob: \"**/*.jsonnet\"}", "app", true, ""},
		{"    find: {glob: \"**/*.{yaml,json}\"}", "app", true, ""},
		{"    find: {glob: \"**/*.{cue,nix}\"}", "app", false, ""},
		{"    find: {glob: \"Chart.yaml\"}", "empty", false, "/empty/Chart.yaml\": file does not exist"}, // as Argo CD (errtext_test.go)
		{"    find: {glob: \"../../../**\"}", "app", false, "leaves the repository"},
		{"    fileName: \"*.yaml\"", "app", true, ""},
		{"    fileName: \"**/*.jsonnet\"", "app", false, ""}, // stdlib: ** is *
		{"    fileName: \"[\"", "app", false, "syntax error in pattern"},
		{"    fileName: \"nothing\"\n    find: {glob: \"**\"}", "app", false, ""}, // only the first rule
		{"    find: {command: [sh, -c, \"ls Chart.yaml\"]}", "app", true, ""},
		{"    find: {command: [sh, -c, \"echo\"]}", "app", false, ""}, // a lone newline is empty
		{"    find: {command: [sh, -c, \"exit 1\"]}", "app", false, "match repository error: error running find command: `sh -c \"exit 1\"` failed exit status 1"},
	} {
		ts := startServer(t, base+tc.discover+"\n", nil)
		m, err := ts.dial(t).Match(ctxTimeout(t, 30*time.Second), client.Request{RepoRoot: root, AppRelPath: tc.app})
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want %q", tc.discover, err, tc.err)
		case tc.err == "" && (err != nil || m.Supported != tc.want || !m.DiscoveryEnabled):
			t.Errorf("%s in %s: %+v, %v; want supported=%v", tc.discover, tc.app, m, err, tc.want)
		}
	}
}

func TestHungCommandAndGrandchildKilledAtDeadline(t *testing.T) {
	t.Parallel()
	plugin := `kind: ConfigManagementPlugin
metadata: {name: hang}
spec:
  generate:
    command: [sh, -c]
    args:
    - |
      sh -c 'trap "" TERM; echo $$ > "$ARGOCD_ENV_PIDFILE"; while :; do sleep 1; done' &
      wait
`
	ts := startServer(t, plugin, func(o *Options) {
		o.Exec = command.DefaultOptions()
		o.Exec.KillGrace = time.Second
	})
	pidFile := filepath.Join(t.TempDir(), "pid")
	root := writeTree(t, map[string]string{"f": "x"})
	start := time.Now()
	_, err := ts.dial(t).Generate(ctxTimeout(t, 3*time.Second), client.Request{RepoRoot: root, Env: []string{"ARGOCD_ENV_PIDFILE=" + pidFile}})
	if err == nil {
		t.Fatal("hung command succeeded")
	}
	t.Logf("error after %s: %v", time.Since(start).Round(time.Millisecond), err)
	data, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatal(rerr)
	}
	pid := strings.TrimSpace(string(data))
	deadline := time.Now().Add(15 * time.Second)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %s (ignores SIGTERM) still alive", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// processAlive treats a zombie as dead: in a container nobody may reap it.

func TestCommandTimeoutFlag(t *testing.T) {
	t.Parallel()
	plugin := "kind: ConfigManagementPlugin\nmetadata: {name: slow}\nspec:\n  generate: {command: [sleep, \"60\"]}\n"
	ts := startServer(t, plugin, func(o *Options) {
		o.Exec = command.DefaultOptions()
		o.Exec.Timeout = 500 * time.Millisecond
	})
	root := writeTree(t, map[string]string{"f": "x"})
	_, err := ts.dial(t).Generate(ctxTimeout(t, 30*time.Second), client.Request{RepoRoot: root})
	wantErr(t, err, "error generating manifests: `sleep 60` failed signal: killed (killed after the command timeout of 500ms; the command ended with signal: terminated)")
}

func TestConcurrentGenerates(t *testing.T) {
	t.Parallel()
	// A barrier every command must pass: each marks its arrival, then waits
	// until all have arrived. A server that ran them one at a time would leave
	// the first waiting alone until it gives up (exit 9), so the test proves
	// overlap rather than only correct answers.
	const n = 20
	barrier := t.TempDir()
	plugin := fmt.Sprintf(`kind: ConfigManagementPlugin
metadata: {name: conc}
spec:
  generate:
    command: [sh, -c]
    args:
    - |
      touch "$ARGOCD_ENV_BARRIER/$(cat id)"
      i=0
      while [ "$(ls "$ARGOCD_ENV_BARRIER" | wc -l)" -lt %d ]; do
        i=$((i+1)); [ $i -gt 300 ] && { echo "no overlap: alone at the barrier after 30 s" >&2; exit 9; }
        sleep 0.1
      done
      printf '{"kind":"ConfigMap","metadata":{"name":"%%s-%%s"}}' "$ARGOCD_APP_NAME" "$(cat id)"
`, n)
	ts := startServer(t, plugin, nil)
	roots := make([]string, n)
	for i := range roots {
		roots[i] = writeTree(t, map[string]string{"id": fmt.Sprint(i)})
	}
	concurrently(t, len(roots), func(i int) error {
		c, err := client.Dial(ctxTimeout(t, 10*time.Second), ts.socket)
		if err != nil {
			return err
		}
		defer c.Close()
		got, err := c.Generate(ctxTimeout(t, 60*time.Second), client.Request{RepoRoot: roots[i],
			Env: []string{fmt.Sprintf("ARGOCD_APP_NAME=app%d", i), "ARGOCD_ENV_BARRIER=" + barrier}})
		want := fmt.Sprintf(`{"kind":"ConfigMap","metadata":{"name":"app%d-%d"}}`, i, i)
		if err == nil && (len(got) != 1 || got[0] != want) {
			err = fmt.Errorf("request %d got %q", i, got)
		}
		return err
	})
}

// TestAllowConcurrencyFalseSerialises: two generations of a plugin with
// allowConcurrency: false never run at the same time, though both requests
// are in flight together. The barrier proves the overlap: the first command
// to run holds the lock until the other request's repository is unpacked in
// its own request dir next to it (that request is then past receiving, on its
// way to the generation), so the test cannot pass by the requests simply
// arriving one after the other. Without the serialisation the second command
// finds the lock held and fails.
func TestAllowConcurrencyFalseSerialises(t *testing.T) {
	t.Parallel()
	lockDir := t.TempDir()
	// mkdir is atomic: a second generation running at the same time fails.
	// Request dirs are siblings (<work dir>/<uuid>/), each with its own copy
	// of the file f; the first command waits for the second copy.
	plugin := `kind: ConfigManagementPlugin
metadata: {name: serial}
spec:
  allowConcurrency: false
  generate:
    command: [sh, -c]
    args:
    - |
      mkdir "$ARGOCD_ENV_LOCK/held" || { echo overlap >&2; exit 9; }
      if mkdir "$ARGOCD_ENV_LOCK/first" 2>/dev/null; then
        until [ "$(ls -d ../*/f | wc -l)" -ge 2 ]; do sleep 0.02; done
        sleep 0.3
      fi
      rmdir "$ARGOCD_ENV_LOCK/held"
`
	ts := startServer(t, plugin, nil)
	root := writeTree(t, map[string]string{"f": "x"})
	concurrently(t, 2, func(int) error {
		c, err := client.Dial(ctxTimeout(t, 10*time.Second), ts.socket)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Generate(ctxTimeout(t, 60*time.Second), client.Request{RepoRoot: root, Env: []string{"ARGOCD_ENV_LOCK=" + lockDir}})
		return err
	})
}

// keepaliveSeconds is how long the keepalive tests keep a generate silent. With the
// repo-server's 20 s pings, grpc-go's default policy (MinTime 5 min) sends GOAWAY
// too_many_pings on the third strike, at the ping of about 80 s (measured: 81 s),
// so the default is 90 s: at 60 s both tests below would pass whatever the policy.
//
// Each takes 90 s: make unit runs with -short and skips them; make test runs
// them (make unit-long) beside the end-to-end suite.
func keepaliveSeconds(t *testing.T) int {
	if testing.Short() {
		t.Skip("90 s keepalive test: skipped with -short (make unit); make unit-long runs it")
	}
	seconds := 90
	if v := os.Getenv("CMP_KEEPALIVE_TEST_SECONDS"); v != "" {
		if _, err := fmt.Sscan(v, &seconds); err != nil {
			t.Fatalf("CMP_KEEPALIVE_TEST_SECONDS=%q: %v", v, err)
		}
	}
	return seconds
}

// silentGenerate runs a generate that prints nothing for the given time, over a
// client pinging every 20 s like the repo-server.
func silentGenerate(t *testing.T, seconds int, minTime time.Duration) ([]string, error) {
	plugin := fmt.Sprintf("kind: ConfigManagementPlugin\nmetadata: {name: silent}\nspec:\n  generate: {command: [sh, -c, 'sleep %d; echo \"{}\"']}\n", seconds)
	ts := startServer(t, plugin, func(o *Options) {
		if minTime > 0 {
			o.KeepaliveMinTime = minTime
		}
		o.Exec = command.DefaultOptions()
		o.Exec.Timeout = time.Duration(seconds+30) * time.Second // longer than --exec-timeout's 90 s default
	})
	root := writeTree(t, map[string]string{"f": "x"})
	c := ts.dial(t) // keepalive Time 20 s
	return c.Generate(ctxTimeout(t, time.Duration(seconds+60)*time.Second), client.Request{RepoRoot: root})
}

// A long silent generate survives the repo-server's keepalive pings.
func TestLongSilentGenerateSurvivesKeepalive(t *testing.T) {
	t.Parallel()
	seconds := keepaliveSeconds(t)
	got, err := silentGenerate(t, seconds, 0) // 0: the server default, 10 s
	if err != nil || len(got) != 1 {
		t.Fatalf("after %ds: %q, %v", seconds, got, err)
	}
}

// The control: with grpc-go's default policy the same call dies, which shows the
// test above is long enough to catch a wrong policy.
func TestDefaultGRPCPolicyDropsLongCalls(t *testing.T) {
	t.Parallel()
	seconds := keepaliveSeconds(t)
	if seconds < 85 {
		t.Skipf("CMP_KEEPALIVE_TEST_SECONDS=%d is shorter than the third ping strike (about 80 s)", seconds)
	}
	_, err := silentGenerate(t, seconds, 5*time.Minute)
	wantErr(t, err, "too_many_pings")
}

func TestEnvPrecedenceAndPluginServerPath(t *testing.T) {
	t.Parallel()
	plugin := `kind: ConfigManagementPlugin
metadata: {name: envs}
spec:
  generate:
    command: [/var/run/argocd/cmp-server, helm, generate, --flag]
`
	ts := startServer(t, plugin, nil)
	root := writeTree(t, map[string]string{"f": "x"})
	got, err := ts.dial(t).Generate(ctxTimeout(t, 30*time.Second), client.Request{RepoRoot: root, Env: []string{"CMP_TEST_ECHO_ARGS=1"}})
	if err != nil || len(got) != 1 || !strings.Contains(got[0], `"args":"helm generate --flag"`) {
		t.Fatalf("self exec: %q, %v", got, err)
	}

	envPlugin := "kind: ConfigManagementPlugin\nmetadata: {name: envs2}\nspec:\n  generate: {command: [sh, -c, 'printf \"{\\\"home\\\":\\\"%s\\\",\\\"p\\\":\\\"%s\\\",\\\"e\\\":\\\"%s\\\"}\" \"$HOME\" \"$PARAM_IMAGE_TAG\" \"$EMPTY\"']}\n"
	ts2 := startServer(t, envPlugin, nil)
	env := []string{"HOME=/from-request", "EMPTY=", `ARGOCD_APP_PARAMETERS=[{"name":"image","map":{"tag":"v2","TAG":"v1"}}]`, "PARAM_IMAGE_TAG=random"}
	got, err = ts2.dial(t).Generate(ctxTimeout(t, 30*time.Second), client.Request{RepoRoot: root, Env: env})
	if err != nil || len(got) != 1 || got[0] != `{"home":"/from-request","p":"v2","e":""}` {
		t.Fatalf("env: %q, %v", got, err)
	}
	_, err = ts2.dial(t).Generate(ctxTimeout(t, 30*time.Second), client.Request{RepoRoot: root, Env: []string{`ARGOCD_APP_PARAMETERS=[{"string":"nameless"}]`}})
	wantErr(t, err, "invalid ARGOCD_APP_PARAMETERS: parameter 0: name is required")
}

func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	ts := startServer(t, discoveryPlugin, func(o *Options) { o.MetricsAddr = "127.0.0.1:0" })
	root := writeTree(t, map[string]string{"data.txt": "x"})
	if _, err := ts.dial(t).Generate(ctxTimeout(t, 30*time.Second), client.Request{RepoRoot: root}); err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + ts.srv.MetricsAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz %d", code)
	}
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz %d", code)
	}
	code, body := get("/metrics")
	for _, want := range []string{
		`cmp_server_requests_total{result="OK",rpc="GenerateManifest"} 1`,
		`cmp_server_request_duration_seconds_count{rpc="GenerateManifest"} 1`,
		`cmp_server_received_bytes_total{rpc="GenerateManifest"}`,
		`cmp_server_command_exits_total{code="0",phase="generate"} 1`,
		`cmp_server_command_exits_total{code="0",phase="init"} 1`,
		`cmp_server_command_duration_seconds_count{phase="generate"} 1`,
	} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestOutputCaps(t *testing.T) {
	t.Parallel()
	plugin := "kind: ConfigManagementPlugin\nmetadata: {name: caps}\nspec:\n  generate: {command: [sh, -c, 'if [ -f loud ]; then yes; else head -c 5000 /dev/zero | tr \"\\\\0\" x >&2; exit 1; fi']}\n"
	ts := startServer(t, plugin, func(o *Options) {
		o.Exec = command.DefaultOptions()
		o.Exec.MaxStdoutBytes = 1000
		o.Exec.MaxStderrBytes = 100
	})
	// yes never stops on its own: the cap must stop it.
	_, err := ts.dial(t).Generate(ctxTimeout(t, 60*time.Second), client.Request{RepoRoot: writeTree(t, map[string]string{"loud": ""})})
	wantErr(t, err, "output exceeds 1000 bytes (limit --max-stdout-bytes)")
	_, err = ts.dial(t).Generate(ctxTimeout(t, 60*time.Second), client.Request{RepoRoot: writeTree(t, map[string]string{"quiet": ""})})
	wantErr(t, err, "failed exit status 1: "+strings.Repeat("x", 100)+"… (4900 more bytes dropped)")
}

// concurrently runs fn(0..n-1) at the same time and reports every error.
func concurrently(t *testing.T, n int, fn func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- fn(i)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// The metrics port closes idle keep-alive connections (it had only a header
// timeout, so they stayed open forever).
func TestMetricsIdleConnectionsClose(t *testing.T) {
	t.Parallel()
	ts := startServer(t, discoveryPlugin, func(o *Options) {
		o.MetricsAddr = "127.0.0.1:0"
		o.MetricsTimeouts = serving.Timeouts{Idle: 100 * time.Millisecond}
	})
	servingtest.ExpectIdleClose(t, ts.srv.MetricsAddr(), 5*time.Second)
}

// The metrics port had no connection cap: idle connections held memory and
// file descriptors without bound. With the default limits, a few hundred idle
// connections from ten addresses leave at most
// serving.DefaultMetricsMaxConnections open, and a probe is still answered.
// The timeouts are long so only the limits close anything.
func TestMetricsPortCapsConnections(t *testing.T) {
	ts := startServer(t, discoveryPlugin, func(o *Options) {
		o.MetricsAddr = "127.0.0.1:0"
		o.MetricsTimeouts = serving.Timeouts{ReadHeader: time.Hour, Read: time.Hour, Idle: time.Hour}
	})
	held := serving.DefaultMetricsMaxConnections
	n := held + 300
	closed := servingtest.ExpectConnCap(t, ts.srv.MetricsAddr(), n, 10, held, 20*time.Second)
	dropped := metricValue(t, ts.srv.metrics, "cmp_server_metrics_connections_dropped_total", "reason=evicted") +
		metricValue(t, ts.srv.metrics, "cmp_server_metrics_connections_dropped_total", "reason=per_ip_cap")
	t.Logf("%d idle connections to the metrics port: %d closed, %v counted", n, closed, dropped)
	if dropped < float64(n-held) {
		t.Errorf("cmp_server_metrics_connections_dropped_total %v, want at least %d", dropped, n-held)
	}
}
