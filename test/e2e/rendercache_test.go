package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// TestRenderCacheThroughArgoCD: the render cache's key holds what Argo CD's
// own repo-server code sends (cmpbench: reposerver/repository.GenerateManifests
// of v3.6.1, packing the checkout as the repo-server does, file times and
// all). Through it, a repeat is answered without running the plugin; with
// revisionIndependent a new commit that changes nothing the plugin is sent
// hits when the repo-server packs only the app's paths
// (--plugin-use-manifest-generate-paths), and misses when it packs the whole
// repository; a change in the app always misses.
func TestRenderCacheThroughArgoCD(t *testing.T) {
	cmpbench := harness.MustTool(t, "cmpbench")
	dir := t.TempDir()
	repo, sockets, config, work := filepath.Join(dir, "repo"), filepath.Join(dir, "sock"), filepath.Join(dir, "config"), filepath.Join(dir, "work")
	runs := filepath.Join(dir, "runs")
	for _, d := range []string{filepath.Join(repo, "apps", "a"), filepath.Join(repo, "docs"), sockets, config, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(rel, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(repo, rel), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=e2e", "GIT_AUTHOR_EMAIL=e2e@example.com",
			"GIT_COMMITTER_NAME=e2e", "GIT_COMMITTER_EMAIL=e2e@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	write("apps/a/values.txt", "one")
	write("docs/README.md", "v1")
	git("init", "-q", "-b", "main")
	git("add", "-A")
	git("commit", "-q", "-m", "first")
	plugin := `apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata: {name: cached}
spec:
  generate:
    command: [sh, -c]
    args: ['echo run >> "$RUNS"; printf "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\"}}" "$(cat values.txt)"']
`
	if err := os.WriteFile(filepath.Join(config, "plugin.yaml"), []byte(plugin), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := harness.Start("cmp-server", []string{env.bins["cmp-server"], "serve", "--config-dir", config},
		[]string{"ARGOCD_PLUGINSOCKFILEPATH=" + sockets, "ARGOCD_CMP_WORKDIR=" + work, "RUNS=" + runs,
			keys.EnvRenderCacheSize + "=1048576", keys.EnvRenderCacheRevisionIndependent + "=true"}, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(10 * time.Second) })
	if err := harness.Eventually(30*time.Second, 50*time.Millisecond, func() (bool, error) {
		_, err := os.Stat(filepath.Join(sockets, "cached.sock"))
		return err == nil, nil
	}); err != nil {
		t.Fatalf("no socket: %v\n%s", err, srv.Output())
	}
	generate := func(rev string, mgp bool) string {
		t.Helper()
		args := []string{"--sock-dir", sockets, "--plugin", "cached", "--repo", repo, "--app", "apps/a", "--revision", rev}
		if mgp {
			args = append(args, "--manifest-generate-paths")
		}
		cmd := exec.Command(cmpbench, args...)
		// The injector's repo-server settings.
		cmd.Env = os.Environ()
		for _, e := range catalog.DefaultRepoServerEnv() {
			cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
		}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("cmpbench: %v\n%s\n%s", err, errb.String(), srv.Output())
		}
		var r struct{ Manifests int }
		line, _ := bufio.NewReader(&out).ReadBytes('\n')
		if err := json.Unmarshal(line, &r); err != nil || r.Manifests != 1 {
			t.Fatalf("cmpbench printed %q: %v", line, err)
		}
		return rev
	}
	ran := func(step string, want int) {
		t.Helper()
		b, _ := os.ReadFile(runs)
		if got := strings.Count(string(b), "run\n"); got != want {
			t.Fatalf("%s: the plugin ran %d times, want %d\n%s", step, got, want, srv.Output())
		}
	}
	rev := func(n int) string { return fmt.Sprintf("%040x", n) }

	generate(rev(1), false)
	ran("first", 1)
	generate(rev(1), false)
	ran("a hard refresh at the same revision", 1)

	write("docs/README.md", "v2")
	git("commit", "-qam", "docs")
	generate(rev(2), false)
	ran("a commit outside the app, whole repository sent", 2)

	generate(rev(2), true)
	ran("the app's paths only, first time", 3)
	write("docs/README.md", "v3")
	git("commit", "-qam", "docs again")
	generate(rev(3), true)
	ran("a commit outside the app, the app's paths only", 3)

	write("apps/a/values.txt", "two")
	git("commit", "-qam", "app")
	generate(rev(4), true)
	ran("a change in the app", 4)
	if !strings.Contains(srv.Output(), `"render_cache_hit":true`) {
		t.Errorf("no hit logged:\n%s", srv.Output())
	}
}
