package cmpserver

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
)

// sharedPlugin declares it does not write to the repository; generate reports
// the (physical) repository root it ran under and what that root holds.
const sharedPlugin = `kind: ConfigManagementPlugin
metadata: {name: shared}
spec:
  readOnlyRepository: true
  generate:
    command: [sh, -c]
    args:
    - |
      if [ -n "$ARGOCD_ENV_WRITE" ]; then $ARGOCD_ENV_AS sh -c 'echo x > "$1"' sh "$ARGOCD_ENV_WRITE" || exit 3; fi
      printf '{"kind":"ConfigMap","data":{"root":"%s","top":"%s"}}' "$(cd "$ARGOCD_ENV_TOP" && pwd -P)" "$(LC_ALL=C ls -A "$ARGOCD_ENV_TOP" | tr '\n' ' ')"
`

func sharedRoot(t *testing.T, c *client.Client, repo, app, top string, env ...string) (root, listing string, err error) {
	t.Helper()
	got, err := c.Generate(ctxTimeout(t, 30*time.Second), client.Request{RepoRoot: repo, AppRelPath: app, Env: append([]string{"ARGOCD_ENV_TOP=" + top}, env...)})
	if err != nil {
		return "", "", err
	}
	var cm struct{ Data map[string]string }
	if err := json.Unmarshal([]byte(got[0]), &cm); err != nil {
		t.Fatal(err)
	}
	return cm.Data["root"], strings.TrimSpace(cm.Data["top"]), nil
}

// TestSharedTreeForTheSameStream: with readOnlyRepository, requests that send
// the same repository (same checksum), whatever their app path, run in one
// unpacked tree; another repository gets its own; the tree is read-only, so a
// command that writes fails and the next request still sees the tree intact;
// request dirs and trees are gone after the server stops.
func TestSharedTreeForTheSameStream(t *testing.T) {
	t.Parallel()
	ts := startServer(t, sharedPlugin, nil)
	c := ts.dial(t)
	repo := writeTree(t, map[string]string{"apps/a/x.yaml": "a", "apps/b/y.yaml": "b", "README.md": "r"})
	rootA, listing, err := sharedRoot(t, c, repo, "apps/a", "../..")
	if err != nil {
		t.Fatal(err)
	}
	if listing != "README.md apps" {
		t.Errorf("tree holds %q, want only the repository", listing)
	}
	rootB, _, err := sharedRoot(t, c, repo, "apps/b", "../..")
	if err != nil || rootB != rootA {
		t.Fatalf("second app ran under %s (%v), want the shared %s", rootB, err, rootA)
	}
	other := writeTree(t, map[string]string{"apps/a/x.yaml": "changed"})
	rootO, _, err := sharedRoot(t, c, other, "apps/a", "../..")
	if err != nil || rootO == rootA {
		t.Fatalf("another repository ran under %s (%v), want its own tree", rootO, err)
	}
	// A command that writes into the shared tree fails and changes nothing.
	// Sidecars run as UID 999, for whom the permission bits decide. Root's
	// capabilities override them, so a root test run writes without
	// CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (setpriv): the bits decide then too.
	as := "ARGOCD_ENV_AS="
	if os.Geteuid() == 0 {
		as += "setpriv --bounding-set=-dac_override,-dac_read_search --"
	}
	_, _, err = sharedRoot(t, c, repo, "apps/a", "../..", "ARGOCD_ENV_WRITE=new-file", as)
	wantErr(t, err, "ermission denied")
	_, listing, err = sharedRoot(t, c, repo, "apps/b", "../..")
	if err != nil || listing != "README.md apps" {
		t.Fatalf("after the refused write: %q %v", listing, err)
	}
	// The tree is read-only on disk.
	if fi, err := os.Stat(rootA + "/apps/a/x.yaml"); err != nil || fi.Mode().Perm()&0o222 != 0 {
		t.Errorf("shared file mode %v (%v), want no write permission", fi.Mode(), err)
	}
	if fi, err := os.Stat(rootA + "/apps"); err != nil || fi.Mode().Perm()&0o222 != 0 {
		t.Errorf("shared dir mode %v (%v), want no write permission", fi.Mode(), err)
	}
	// Only the shared trees remain between requests (the request dirs are removed).
	ts.srv.requests.removals.idle()
	if n := requestDirs(t, ts); n != 2 {
		t.Errorf("%d dirs in the work dir, want the 2 trees", n)
	}
	ts.cancel()
	<-ts.done
	ts.done <- nil // for startServer's cleanup
	if entries, _ := os.ReadDir(ts.srv.opts.WorkDir); len(entries) != 0 {
		t.Errorf("left after stopping: %v", entries)
	}
}

// TestSharedTreeNeedsTheDeclaration: without readOnlyRepository every request
// gets a fresh tree, as in Argo CD.
func TestSharedTreeNeedsTheDeclaration(t *testing.T) {
	t.Parallel()
	ts := startServer(t, strings.Replace(sharedPlugin, "  readOnlyRepository: true\n", "", 1), nil)
	c := ts.dial(t)
	repo := writeTree(t, map[string]string{"apps/a/x.yaml": "a"})
	r1, _, err1 := sharedRoot(t, c, repo, "apps/a", "../..")
	r2, _, err2 := sharedRoot(t, c, repo, "apps/a", "../..")
	if err1 != nil || err2 != nil || r1 == r2 {
		t.Fatalf("roots %s %s (%v %v), want two fresh trees", r1, r2, err1, err2)
	}
	// Writing into one's own tree works.
	if _, _, err := sharedRoot(t, c, repo, "apps/a", "../..", "ARGOCD_ENV_WRITE=new-file"); err != nil {
		t.Fatal(err)
	}
}

// poisonPlugin shares its tree; with ARGOCD_ENV_POISON its command makes the
// tree writable again and rewrites a file (what the read-only bits cannot stop,
// since the command runs as the tree's owner), tells the test so and waits for
// it; every command prints what the repository's somefile holds.
const poisonPlugin = `kind: ConfigManagementPlugin
metadata: {name: poison}
spec:
  readOnlyRepository: true
  generate:
    command: [sh, -c]
    args:
    - |
      set -e
      if [ -n "$ARGOCD_ENV_POISON" ]; then
        (cd "$ARGOCD_ENV_TOP" && chmod -R u+w . && echo poisoned > somefile)
        : > "$ARGOCD_ENV_SYNC/poisoned"
        i=0; while [ ! -e "$ARGOCD_ENV_SYNC/release" ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done
      fi
      printf '{"kind":"ConfigMap","data":{"content":"%s"}}' "$(cat "$ARGOCD_ENV_TOP/somefile")"
`

func somefile(t *testing.T, c *client.Client, repo, app string, env ...string) (string, error) {
	t.Helper()
	got, err := c.Generate(ctxTimeout(t, 60*time.Second), client.Request{RepoRoot: repo, AppRelPath: app, Env: append([]string{"ARGOCD_ENV_TOP=../.."}, env...)})
	if err != nil {
		return "", err
	}
	var cm struct{ Data map[string]string }
	if err := json.Unmarshal([]byte(got[0]), &cm); err != nil {
		t.Fatal(err)
	}
	return cm.Data["content"], nil
}

// TestSharedTreeTamperedByACommand: a command that makes the shared tree
// writable again and rewrites a file (chmod needs no privilege on one's own
// files) changes neither what a concurrent request on the same tarball gets nor
// what a later one gets: the change is seen once the command has run, the
// tree is dropped, and a request that ran on it runs again on a private copy.
func TestSharedTreeTamperedByACommand(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.WarnLevel)
	ts := startServer(t, poisonPlugin, func(o *Options) { o.Logger = zap.New(core) })
	c := ts.dial(t)
	repo := writeTree(t, map[string]string{"somefile": "original", "apps/a/x.yaml": "a", "apps/b/y.yaml": "b"})
	sync := t.TempDir()
	type result struct {
		content string
		err     error
	}
	poisoner := make(chan result, 1)
	go func() {
		content, err := somefile(t, c, repo, "apps/a", "ARGOCD_ENV_POISON=1", "ARGOCD_ENV_SYNC="+sync)
		poisoner <- result{content, err}
	}()
	released := false
	release := func() {
		if !released {
			released = true
			_ = os.WriteFile(sync+"/release", nil, 0o644)
		}
	}
	defer release()
	if !waitUntil(30*time.Second, func() bool { _, err := os.Stat(sync + "/poisoned"); return err == nil }) {
		t.Fatal("the poisoning command never ran")
	}
	// The poisoner still holds the tree: this request shares it.
	if got, err := somefile(t, c, repo, "apps/b"); err != nil || got != "original" {
		t.Errorf("concurrent request on the same tarball got %q (%v), want \"original\"", got, err)
	}
	release()
	if r := <-poisoner; r.err != nil {
		t.Errorf("poisoning request: %v", r.err)
	}
	// Both ran on the shared tree first (so the concurrent one did share it),
	// saw the change and ran again.
	if n := logs.FilterMessageSnippet("shared repository tree was changed").Len(); n != 2 {
		t.Errorf("%d requests reported the changed tree, want the poisoning and the concurrent one", n)
	}
	if got, err := somefile(t, c, repo, "apps/b"); err != nil || got != "original" {
		t.Errorf("later request on the same tarball got %q (%v), want \"original\"", got, err)
	}
	// The later one ran on a fresh shared tree, not a private copy.
	if n := logs.FilterMessageSnippet("shared repository tree was changed").Len(); n != 2 {
		t.Errorf("the later request found a changed tree too (%d reports)", n)
	}
}
