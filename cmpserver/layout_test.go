package cmpserver

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
)

// layoutPlugin reports where its commands run and what the request dir holds,
// from generate and from the dynamic parameters command.
const layoutPlugin = `kind: ConfigManagementPlugin
metadata: {name: layout}
spec:
  generate:
    command: [sh, -c]
    args:
    - |
      printf '{"kind":"ConfigMap","data":{"pwd":"%s","top":"%s"}}' "$(pwd -P)" "$(LC_ALL=C ls -A "$ARGOCD_ENV_TOP" | tr '\n' ' ')"
  parameters:
    dynamic:
      command: [sh, -c, 'printf "[{\"name\":\"%s\"}]" "$(pwd -P)"']
`

// uuidPattern is a random (version 4) UUID, which is how Argo CD names request dirs.
const uuidPattern = `[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}`

// TestWorkDirLayoutMatchesArgo: argocd-cmp-server unpacks every request into
// <work dir>/_cmp_server/<uuid>/ and runs commands in <uuid>/<appRelPath>; the
// tarball it received there is gone by then. Plugins print or compute paths from
// their working directory, so ours must be the same, with nothing else beside the
// repository.
func TestWorkDirLayoutMatchesArgo(t *testing.T) {
	t.Parallel()
	ts := startServer(t, layoutPlugin, nil)
	workDir, err := filepath.EvalSymlinks(ts.srv.opts.WorkDir)
	if err != nil {
		t.Fatal(err)
	}
	root := writeTree(t, map[string]string{"apps/demo/values.yaml": "a: b", "README.md": "r", ".git/HEAD": "ref"})
	c := ts.dial(t)
	ctx := ctxTimeout(t, 30*time.Second)

	for _, tc := range []struct{ app, top string }{
		{"apps/demo", "../.."}, // top: the request dir, seen from the app dir
		{".", "."},
	} {
		got, err := c.Generate(ctx, client.Request{RepoRoot: root, AppRelPath: tc.app, Env: []string{"ARGOCD_ENV_TOP=" + tc.top}})
		if err != nil || len(got) != 1 {
			t.Fatalf("generate %s: %q, %v", tc.app, got, err)
		}
		var cm struct{ Data map[string]string }
		if err := json.Unmarshal([]byte(got[0]), &cm); err != nil {
			t.Fatal(err)
		}
		suffix := ""
		if tc.app != "." {
			suffix = "/" + regexp.QuoteMeta(tc.app)
		}
		if want := "^" + regexp.QuoteMeta(workDir) + "/" + uuidPattern + suffix + "$"; !regexp.MustCompile(want).MatchString(cm.Data["pwd"]) {
			t.Errorf("app %s: command ran in %s, want %s", tc.app, cm.Data["pwd"], want)
		}
		// Only the repository: no tarball, no extra directory level.
		if top := strings.TrimSpace(cm.Data["top"]); top != ".git README.md apps" {
			t.Errorf("app %s: request dir holds %q, want the repository's .git README.md apps", tc.app, top)
		}
	}

	ann, err := c.Parameters(ctx, client.Request{RepoRoot: root, AppRelPath: "apps/demo"})
	if err != nil || len(ann) != 1 {
		t.Fatalf("parameters: %+v, %v", ann, err)
	}
	if want := "^" + regexp.QuoteMeta(workDir) + "/" + uuidPattern + "/apps/demo$"; !regexp.MustCompile(want).MatchString(ann[0].Name) {
		t.Errorf("dynamic parameters command ran in %s, want %s", ann[0].Name, want)
	}
	ts.srv.requests.removals.idle() // request dirs are removed after the response
	if entries, _ := os.ReadDir(ts.srv.opts.WorkDir); len(entries) != 0 {
		t.Errorf("request dirs left behind: %v", entries)
	}
}
